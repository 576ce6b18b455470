"""The repro for a bug report: the origin module's saved inputs, the module
(saved by the dumper at ``start()`` under ``$GRAPHPROBE_REPRO_MODULE``) and
a short script that shows eager vs compiled vs float64 on those inputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from graphprobe.output_files import write_text_atomic

__all__ = ["write_repro"]

# Every value from the user's run enters the script as a Python literal (repr) assigned to a name, never
# inside a docstring, comment or f-string: a module path or class name holding quotes, braces or newlines
# (ModuleDict keys are any string without a dot) cannot change what the script runs.
_TEMPLATE = '''\
"""Repro written by `graphprobe diagnose`: the module _GP_MODULE (class
_GP_CLASS, below) on the inputs of its call _GP_ENTRY recorded in graph
mode, run eagerly, compiled and in float64.
Run: python repro.py [--backend BACKEND]"""
import argparse
import copy
import os
import sys

import torch
import torch._dynamo.config
import torch._inductor.config

_GP_HERE = os.path.dirname(os.path.abspath(__file__))

# Compile options the script had changed from their defaults:
{compile_config}

# Classes and functions defined in the script itself (its __main__), copied
# from it, with the imports and constants they read (the names of this
# script's own code start with _gp_ / _GP_, so that none is replaced):
{constants}
{sources}

_GP_MODULE = {module!r}
_GP_CLASS = {cls!r}
_GP_ENTRY = {entry!r}
_GP_SCOPE_MODULE = {scope!r}  # the module saved in module.pt
_GP_ORIGIN = {origin_rel!r}  # the origin, relative to it
_GP_CANNOT = {cannot!r}


def _gp_build():
    """The origin module with the weights it had when the dumper started."""
    try:
        scope = torch.load(os.path.join(_GP_HERE, "module.pt"), weights_only=False)
    except Exception as e:  # noqa: BLE001
        sys.exit(_GP_CANNOT + f" ({{type(e).__name__}}: {{e}})")
    return scope.get_submodule(_GP_ORIGIN) if _GP_ORIGIN else scope


def _gp_to(value, dtype=None):
    """``value`` with its floating tensors cast to ``dtype`` (None: unchanged), nested in lists/tuples/dicts."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if dtype is not None and value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(_gp_to(v, dtype) for v in value)
    if isinstance(value, dict):
        return {{k: _gp_to(v, dtype) for k, v in value.items()}}
    return value


def _gp_first_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (list, tuple)):
        for v in value:
            t = _gp_first_tensor(v)
            if t is not None:
                return t
    if isinstance(value, dict):
        return _gp_first_tensor(list(value.values()))
    return None


def _gp_main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="inductor")
    backend = parser.parse_args().backend
    saved = torch.load(os.path.join(_GP_HERE, "inputs.pt"), weights_only=True)
    args, kwargs = saved.get("args", []), saved.get("kwargs", {{}})
    module = _gp_build().eval()
    with torch.no_grad():
        eager = _gp_first_tensor(module(*args, **kwargs))
        compiled_module = torch.compile(copy.deepcopy(module), backend=backend, fullgraph=False)
        compiled = _gp_first_tensor(compiled_module(*args, **kwargs))
        reference = _gp_first_tensor(copy.deepcopy(module).double()(*_gp_to(args, torch.float64),
                                                                     **_gp_to(kwargs, torch.float64)))

    def err(x):
        d = (x.double() - reference).abs().max().item()
        return d / max(reference.abs().max().item(), 1e-30)

    print(f"module {{_GP_MODULE}} ({{_GP_CLASS}}), output 0 {{tuple(eager.shape)}} {{eager.dtype}}")
    print(f"  eager    vs float64: relative max error {{err(eager):.3e}}")
    print(f"  compiled vs float64: relative max error {{err(compiled):.3e}}   (backend {{backend}})")
    print(f"  compiled vs eager:   max abs difference {{(compiled - eager).abs().max().item():.3e}}")
    bad = err(compiled) > 4 * err(eager) + 1e-6
    print("  -> the compiled module creates the error" if bad else "  -> no error beyond eager's on these inputs")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(_gp_main())
'''


def write_repro(out: Path, origin: Any, inputs: Path | None, saved_module: Path, scope: str) -> dict[str, Any]:
    """Writes ``out/repro/`` (inputs.pt, module.pt, state_dict.pt,
    repro.py, README.txt); returns the ``repro`` object of diagnosis.json."""
    folder = out / "repro"
    folder.mkdir(parents=True, exist_ok=True)
    missing = []
    if inputs is not None and inputs.is_file():
        shutil.copyfile(inputs, folder / "inputs.pt")
    else:
        missing.append("the origin's inputs (the dumper saved no replay_inputs file for it)")
    info: dict[str, Any] = {}
    if (saved_module / "module.json").is_file():
        info = json.loads((saved_module / "module.json").read_text(encoding="utf-8"))
        for name in ("module.pt", "state_dict.pt", "module.json"):
            if (saved_module / name).is_file():
                shutil.copyfile(saved_module / name, folder / name)
    else:
        missing.append(f"the module (nothing saved under {saved_module})")
    rel = origin.module[len(scope):].lstrip(".") if scope else origin.module
    cls = origin.entry.split(".")[-3] if origin.entry.count(".") >= 3 else "?"
    cannot = (f"repro: module.pt cannot be rebuilt here: build the module {scope or 'model'} of your script "
              f"yourself, load state_dict.pt into it with load_state_dict, and return it from _gp_build() in repro.py")
    if not info.get("pickled", False):
        cannot += f"; saving it had failed: {info.get('pickle_error', 'not saved')}"
    names = info.get("main_names", {})
    constants = "\n".join(str(names[k]) for k in sorted(names)) if isinstance(names, dict) else ""
    text = _TEMPLATE.format(module=origin.module, cls=cls, entry=origin.entry, compile_config=info.get(
        "compile_config", "# (not known)"), constants=constants or "# (none)",
        sources="\n\n".join(info.get("main_sources", [])) or "# (none)", scope=scope, origin_rel=rel,
        cannot=cannot)
    write_text_atomic(str(folder / "repro.py"), text)
    readme = [f"graphprobe diagnose repro: module {origin.module} ({cls}), call {origin.entry}.",
              "Run: python repro.py   (eager vs compiled vs float64 on the recorded inputs)"]
    if info.get("hooks_dropped"):
        readme.append("The module's hooks could not be pickled and were left out of module.pt "
                      f"({info.get('pickle_error')}): a fault in a hook does not show in the repro.")
    if missing:
        readme.append("Missing: " + "; ".join(missing) + ".")
    write_text_atomic(str(folder / "README.txt"), "\n".join(readme) + "\n")
    return {"folder": str(folder), "script": str(folder / "repro.py"), "missing": missing,
            "hooks_dropped": bool(info.get("hooks_dropped")),
            "rebuildable": bool(info.get("pickled")) and not missing}
