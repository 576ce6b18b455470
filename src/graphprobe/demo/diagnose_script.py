"""The script ``graphprobe demo --diagnose`` hands to ``graphprobe diagnose``:
the demo model under torch.compile, wired with ``AclGraphDumper()`` (whose
configuration diagnose supplies through ``$GRAPHPROBE_CONFIG``), with an
optional graph-only fault: MODULE's output scaled while
``torch.compiler.is_compiling()`` (so the reference, run with
``TORCHDYNAMO_DISABLE=1``, and replay's eager re-run do not see it).

Run: ``python -m graphprobe.demo.diagnose_script [--inject-fault MODULE[:SCALE]] [--steps N]``
"""

from __future__ import annotations

import argparse
import sys

import torch

from graphprobe.demo.model import build_demo_model, demo_inputs

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Runs the demo model for ``--steps`` recorded steps; returns 0."""
    from graphprobe.demo.run import parse_fault
    from graphprobe.dumper import AclGraphDumper

    p = argparse.ArgumentParser(prog="python -m graphprobe.demo.diagnose_script")
    p.add_argument("--inject-fault", metavar="MODULE[:SCALE]")
    p.add_argument("--steps", type=int, default=2)
    args = p.parse_args(argv)
    model = build_demo_model()
    if args.inject_fault:
        path, scale = parse_fault(args.inject_fault, model)

        def graph_only(module: torch.nn.Module, inputs: object, output: torch.Tensor) -> torch.Tensor:
            return output * scale if torch.compiler.is_compiling() else output

        model.get_submodule(path).register_forward_hook(graph_only)
    inputs = demo_inputs(args.steps)
    dumper = AclGraphDumper()
    dumper.start(model)
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        for tokens in inputs:
            compiled(tokens)
            dumper.step()
    dumper.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())


def demo_diagnose(out: str, inject_fault: str | None, steps: int) -> int:
    """``graphprobe demo --diagnose``: ``graphprobe diagnose`` on this
    script (torch.compile on the CPU) into ``out/diagnose``; returns
    diagnose's exit code (0 nothing diverges, 1 diagnosed, 2 error, 130
    interrupted). Raises ValueError for a bad ``inject_fault`` or an
    OUT/diagnose folder that is not an earlier diagnose's (nothing in it is
    removed)."""
    import os

    from graphprobe.demo.run import parse_fault
    from graphprobe.diagnose.pipeline import DiagnoseOptions, diagnose

    if inject_fault:
        parse_fault(inject_fault, build_demo_model())  # a bad MODULE[:SCALE] is a ValueError here, not a failed run
    target = os.path.join(out, "diagnose")
    if os.path.islink(target):  # diagnose resolves its OUT: a link here would have it write where it points
        raise ValueError(f"--out {out}: {target} is a symbolic link (to {os.readlink(target)!r}); the demo does not "
                         "follow links it did not make: nothing was changed; choose another --out")
    cmd = [sys.executable, "-m", "graphprobe.demo.diagnose_script", "--steps", str(steps)]
    if inject_fault:
        cmd += ["--inject-fault", inject_fault]
    code, _ = diagnose(DiagnoseOptions(command=cmd, out=target, steps=steps))
    return code
