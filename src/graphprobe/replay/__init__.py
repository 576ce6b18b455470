"""Replay: local error attribution in one run (issue #27, part 1).

With ``"replay"`` in the dumper's config, every selected module's calls keep
their inputs, the module's buffers and the graph-mode outputs through an op
that runs inside the compiled (or captured) graph
(:mod:`graphprobe.replay.capture`). At ``step()`` each kept call is run
again through the module's original eager forward, in the tensors' dtype and
in float64, on copies of the module, and the errors and a verdict per module
("creates", "inherits", "not judged") go to ``replay.json`` beside
``dump.json`` (:mod:`graphprobe.replay.judge`). docs/diagnose.md ("Replay")
describes the rule and the file.

This package file imports nothing, so that :mod:`graphprobe.config` can read
:mod:`graphprobe.replay.config` without loading torch-side code.
"""
