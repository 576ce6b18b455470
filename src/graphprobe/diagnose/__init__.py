"""``graphprobe diagnose``: from "numbers differ in graph mode" to the module
that creates the error and the compiler stage that causes it.

Example::

    graphprobe diagnose -o diag -- python train.py

runs ``train.py`` (which wires ``AclGraphDumper()`` as usual; diagnose
supplies its configuration through ``$GRAPHPROBE_CONFIG``) in four stages:

1. *screen* (:mod:`.screen`): the reference (the same command with
   ``TORCHDYNAMO_DISABLE=1``, or ``--reference-cmd``) and the target at L0,
   compared; the first divergence;
2. *attribute* (:mod:`.attribute`): the target again with replay on the
   first divergent module and its submodules; the origin is the deepest
   module whose verdict is "creates";
3. *bisect* (:mod:`.bisect`): torch's CompilerBisector, one subprocess per
   test, with replay's verdict on the origin as the pass/fail predicate;
4. *report* (:mod:`.report`): a text summary, ``report.html`` and
   ``diagnosis.json`` (schema: docs/diagnose.md), and a repro
   (:mod:`.repro`).

The registrar (:mod:`.command`) imports nothing heavy; the stages import
torch only where they need it (the bisect).
"""
