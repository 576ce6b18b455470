#!/usr/bin/env python3
"""Issue #37's acceptance on held-out transformers models: runs `graphprobe diagnose`
on each case of scripts/diagnose_heldout/ (models the test suite does not otherwise
use), one at a time, and checks the diagnosis against what the case plants.

    .venv/bin/python scripts/diagnose_heldout.py [--out DIR] [--timeout S] [CASE ...]

CASE: a b c d e (default: all, cheapest first). Each case runs
`.venv/bin/python -m graphprobe diagnose -o DIR/CASE --timeout S -- .venv/bin/python CASE.py`
and prints: expected and diagnosed origin, verdict, the bisect's backend /
subsystem / debug info, repro.reproduces (+ note), every "not judged" reason,
stage times, wall time, the load average before and after, and PASS/FAIL.
DIR/CASE.result.json keeps the same. Exit 0 when every case run passes.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES_DIR = REPO / "scripts" / "diagnose_heldout"
PY = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv" / "bin" / "python").exists() else sys.executable

# case -> script, model, fault, expectation
CASES = {
    "a": dict(script="a_phi3_attention.py", model="Phi3Model (2 layers, hidden 32, 1x8 tokens, default DynamicCache)",
              fault="graph-only forward hook x1.001 on layers.1.self_attn's output",
              origin="layers.1.self_attn", backward=False, reproduces=True),
    "b": dict(script="b_olmoe_routing.py", model="OlmoeModel (2 layers, hidden 32, 4 experts top-2, 1x8 tokens)",
              fault="graph-only routing flip: token 3's router logits reversed in layers.0.mlp.gate",
              origin="layers.0.mlp.gate", backward=False, reproduces=True),
    "c": dict(script="c_stablelm_backward.py", model="StableLmModel (2 layers, hidden 32), SGD training, "
              "optimizer.step() before dumper.step()",
              fault="graph-only gradient x1.002 at layers.1.mlp.down_proj's output (autograd Function)",
              origin="layers.1.mlp.down_proj", backward=True, reproduces=None),
    "d": dict(script="d_bloom_lowering.py", model="BloomModel (2 layers, hidden 32, BloomGelu, 1x8 tokens, default cache)",
              fault="inductor lowering of aten.tanh replaced by tanh(x) * 1.001",
              origin="h.0.mlp.gelu_impl", backward=False, backend="inductor", subsystem="lowerings", debug="tanh",
              reproduces=False),
    "e": dict(script="e_falcon_decomposition.py", model="FalconModel (2 layers, hidden 32, 1x8 tokens, default cache)",
              fault="inductor's decomposition of aten.native_layer_norm returns its output x1.001",
              origin="h.0.input_layernorm", backward=False, backend="aot_eager_decomp_partition",
              subsystem="decomposition", debug="native_layer_norm", reproduces=False),
    "f": dict(script="f_phi3_patched_forward.py", model="Phi3Model (as (a))",
              fault="layers.1.self_attn.forward replaced on the instance by a closure: output x1.001 when compiling",
              origin=None, backward=False, reproduces=None,
              not_judged={"layers.1.self_attn": "replaced on the instance"}, why="layers.1.self_attn's own code"),
}


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def check(case: dict, d: dict) -> list[str]:
    """What differs from the expectation (empty: PASS)."""
    bad = []
    origin = d.get("origin") or {}
    if origin.get("module") != case["origin"]:
        bad.append(f"origin {origin.get('module')!r}, expected {case['origin']!r}")
    if case["origin"] is not None and origin.get("verdict") != "creates":
        bad.append(f"origin verdict {origin.get('verdict')!r}")
    modules = {m["module"]: m for m in (d.get("attribution") or {}).get("modules") or []}
    for name, words in case.get("not_judged", {}).items():
        m = modules.get(name) or {}
        if m.get("verdict") != "not judged" or words not in (m.get("reason") or ""):
            bad.append(f"{name}: {m.get('verdict')!r} ({m.get('reason')!r}), expected not judged, {words!r}")
    if "why" in case and case["why"] not in ((d.get("attribution") or {}).get("why") or ""):
        bad.append(f"attribution.why does not say {case['why']!r}")
    if case["backward"] and ".backward." not in (origin.get("entry") or ""):
        bad.append(f"origin entry {origin.get('entry')!r} is not a backward call")
    b = d.get("bisect") or {}
    if "backend" in case and b.get("backend") != case["backend"]:
        bad.append(f"bisect backend {b.get('backend')!r}, expected {case['backend']!r}")
    if "subsystem" in case and b.get("subsystem") != case["subsystem"]:
        bad.append(f"bisect subsystem {b.get('subsystem')!r}, expected {case['subsystem']!r}")
    if "debug" in case and case["debug"] not in str(b.get("debug_info")):
        bad.append(f"bisect debug info {b.get('debug_info')!r} does not name {case['debug']!r}")
    repro = d.get("repro") or {}
    if case["reproduces"] is not None and repro.get("reproduces") is not case["reproduces"]:
        bad.append(f"repro.reproduces {repro.get('reproduces')!r}, expected {case['reproduces']!r}")
    if case["reproduces"] is False and not repro.get("reproduces_note"):
        bad.append("repro.reproduces false without a reason")
    att = d.get("attribution") or {}
    unjudged = [m for m in att.get("modules") or [] if m.get("verdict") == "not judged"]
    if unjudged and "outside the scope" in (att.get("why") or "") + (d.get("conclusion") or ""):
        bad.append("says 'outside the scope' while a module in the scope was not judged")
    return bad


def run(name: str, out_root: Path, timeout: int, src: Path) -> dict:
    case = CASES[name]
    out = out_root / name
    argv = [PY, "-m", "graphprobe", "diagnose", "-o", str(out), "--timeout", str(timeout), "--",
            PY, str(CASES_DIR / case["script"])]
    # One compile thread: no pool of compile workers started in every run (as the acceptance tests do).
    env = dict(os.environ, PYTHONPATH=str(src), TORCHINDUCTOR_COMPILE_THREADS="1")
    before, t0 = load(), time.time()
    proc = subprocess.run(argv, env=env, cwd=out_root, capture_output=True, text=True)
    wall, after = time.time() - t0, load()
    (out_root / f"{name}.stdout.txt").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    try:
        d = json.loads((out / "diagnosis.json").read_text())
    except (OSError, ValueError) as exc:
        d = {"error": f"no diagnosis.json ({exc})"}
    b = d.get("bisect") or {}
    repro = d.get("repro") or {}
    att = d.get("attribution") or {}
    result = {
        "case": name, "model": case["model"], "fault": case["fault"], "expected": case["origin"],
        "command": " ".join(argv), "src": str(src), "exit_code": proc.returncode, "error": d.get("error"),
        "first_divergence": (d.get("first_divergence") or {}).get("entry"),
        "diagnosed": (d.get("origin") or {}).get("module"), "entry": (d.get("origin") or {}).get("entry"),
        "verdict": (d.get("origin") or {}).get("verdict"), "conclusion": d.get("conclusion"),
        "why": att.get("why"),
        "verdicts": {m["module"]: m["verdict"] for m in att.get("modules") or []},
        "not_judged": {m["module"]: m.get("reason") for m in att.get("modules") or [] if m["verdict"] == "not judged"},
        "backend": b.get("backend"), "subsystem": b.get("subsystem"), "bisect_number": b.get("bisect_number"),
        "debug_info": b.get("debug_info"), "bisect_note": b.get("note"),
        "bisect_tests": f"{sum(1 for t in b.get('tests') or [] if t.get('used'))} asked + "
                        f"{sum(1 for t in b.get('tests') or [] if not t.get('used'))} ahead" if b else None,
        "reproduces": repro.get("reproduces"), "reproduces_note": repro.get("reproduces_note"),
        "stages": d.get("stages"), "commands": len(d.get("commands") or []), "wall_s": round(wall, 1),
        "load_before": before, "load_after": after,
    }
    bad = check(case, d)
    result["pass"] = not bad
    result["failures"] = bad
    (out_root / f"{name}.result.json").write_text(json.dumps(result, indent=1))
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="*", default=["a", "b", "c", "e", "d"], choices=sorted(CASES))
    ap.add_argument("--out", default="/tmp/graphprobe_heldout")
    ap.add_argument("--timeout", type=int, default=600, help="diagnose's --timeout per command (s)")
    ap.add_argument("--src", default=str(REPO / "src"),
                    help="the graphprobe package folder to run (default: this checkout's src; a copy keeps a run "
                         "independent of changes made to the checkout meanwhile)")
    args = ap.parse_args()
    out_root = Path(args.out).resolve()
    out_root.mkdir(parents=True, exist_ok=True)
    ok = True
    for name in args.cases:
        print(f"== case {name}: {CASES[name]['model']}; fault: {CASES[name]['fault']}", flush=True)
        r = run(name, out_root, args.timeout, Path(args.src).resolve())
        for k in ("expected", "diagnosed", "entry", "verdict", "first_divergence", "backend", "subsystem",
                  "bisect_number", "debug_info", "bisect_tests", "reproduces", "reproduces_note", "not_judged",
                  "why", "stages", "commands", "wall_s", "load_before", "load_after", "exit_code", "error"):
            print(f"  {k}: {r[k]}")
        print(f"  {'PASS' if r['pass'] else 'FAIL: ' + '; '.join(r['failures'])}", flush=True)
        ok &= r["pass"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
