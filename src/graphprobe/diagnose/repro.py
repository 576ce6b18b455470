"""The repro for a bug report: the origin module's saved inputs, the module
(saved by the dumper at ``start()`` under ``$GRAPHPROBE_REPRO_MODULE``) and
a short script that shows eager vs compiled vs float64 on those inputs."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path
from typing import Any

from graphprobe.output_files import write_text_atomic

__all__ = ["run_repro", "write_repro"]

# Every value from the user's run enters the script as a Python literal (repr) assigned to a name, never
# inside a docstring, comment or f-string: a module path or class name holding quotes, braces or newlines
# (ModuleDict keys are any string without a dot) cannot change what the script runs.
_TEMPLATE = '''\
"""Repro written by `graphprobe diagnose`: the module _GP_MODULE (class
_GP_CLASS, below) on the inputs of its call _GP_ENTRY recorded in graph
mode, run eagerly, compiled and in float64.
Run: python repro.py [--backend BACKEND]
Exit 1: the compiled module creates the error; 0: no error beyond eager's;
2: the script could not run (the module cannot be rebuilt here, an exception)."""
import argparse
import copy
import importlib
import os
import sys

import torch
import torch._dynamo.config
import torch._functorch.config
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
        print(_GP_CANNOT + f" ({{type(e).__name__}}: {{e}})", file=sys.stderr)
        sys.exit(2)
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


def _gp_class(name):
    """The class ``name`` (``module.Qualname``) names; ``__main__.X``: this script's copy of it."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        if parts[:cut] == ["__main__"]:
            value = sys.modules["__main__"]
        else:
            try:
                value = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
        try:
            for part in parts[cut:]:
                value = getattr(value, part)
        except AttributeError:
            continue
        if isinstance(value, type):
            return value
    raise TypeError(f"the inputs hold an object of class {{name}}, which cannot be found here")


def _gp_objects(value):
    """``value`` with the objects the call was given back: inputs.pt holds
    each (a cache, say) as a dict of its attributes with ``"__class__"``."""
    if isinstance(value, (list, tuple)):
        return type(value)(_gp_objects(v) for v in value)
    if isinstance(value, dict):
        items = {{k: _gp_objects(v) for k, v in value.items() if k != "__class__"}}
        if not isinstance(value.get("__class__"), str):
            return items
        cls = _gp_class(value["__class__"])
        obj = cls.__new__(cls)
        obj.__dict__.update(items)
        return obj
    return value


def _gp_inputs(saved, dtype=None):
    """A fresh copy of the call's (args, kwargs), floating tensors cast to
    ``dtype``: the forward may update what it is given (a KV cache), so each
    run gets its own."""
    saved = _gp_objects(_gp_to(copy.deepcopy(saved), dtype))
    return saved.get("args", []), saved.get("kwargs", {{}})


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
    module = _gp_build().eval()
    with torch.no_grad():
        args, kwargs = _gp_inputs(saved)
        eager = _gp_first_tensor(module(*args, **kwargs))
        compiled_module = torch.compile(copy.deepcopy(module), backend=backend, fullgraph=False)
        args, kwargs = _gp_inputs(saved)
        compiled = _gp_first_tensor(compiled_module(*args, **kwargs))
        args, kwargs = _gp_inputs(saved, torch.float64)
        reference = _gp_first_tensor(copy.deepcopy(module).double()(*args, **kwargs))

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
    try:
        _gp_code = _gp_main()
    except Exception:  # noqa: BLE001  exit 1 means "creates": a failure to run must not read as one
        import traceback

        traceback.print_exc()
        sys.exit(2)
    sys.exit(_gp_code)
'''


def _one_definition(source: str) -> bool:
    """Whether ``source`` is one class or function definition (decorated or
    not), or comments only."""
    try:
        body = ast.parse(source).body
    except (SyntaxError, ValueError):
        return False
    return not body or (len(body) == 1 and isinstance(body[0], (ast.ClassDef, ast.FunctionDef,
                                                                 ast.AsyncFunctionDef)))


def _one_binding(line: str) -> bool:
    """Whether ``line`` is one import or one assignment of a constant to a name."""
    try:
        body = ast.parse(line).body
    except (SyntaxError, ValueError):
        return False
    if len(body) != 1:
        return False
    node = body[0]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    return (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            and (isinstance(node.value, ast.Constant) or (
                isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                and node.value.func.id == "float" and len(node.value.args) == 1
                and isinstance(node.value.args[0], ast.Constant) and not node.value.keywords)))


def _checked_sources(sources: Any) -> str:
    """The script's copied sources, each a whole definition: anything else
    (a comment line that a class name with a newline ended early, and the
    statement after it) is left out, and says so without repeating it."""
    kept = []
    for src in sources if isinstance(sources, list) else []:
        if isinstance(src, str) and _one_definition(src):
            kept.append(src)
        else:
            kept.append("# left out: a copied source that is not one class or function definition "
                        "(a name holding a line break or other control characters?)\n")
    return "\n\n".join(kept)


def _checked_constants(names: Any) -> str:
    """The imports and constants, one line each, each one binding."""
    if not isinstance(names, dict):
        return ""
    lines = []
    for key in sorted(names, key=str):
        line = str(names[key])
        lines.append(line if _one_binding(line) else f"# left out: the line for the name {str(key)!r}: not one "
                     "import or constant (a name holding a line break?)")
    return "\n".join(lines)


def _checked_config(text: Any) -> str:
    """The compile options (torch's ``codegen_config``: imports and
    assignments), kept only when they are nothing else."""
    if not isinstance(text, str):
        return "# (not known)"
    try:
        body = ast.parse(text).body
    except (SyntaxError, ValueError):
        body = None
    if body is None or not all(isinstance(n, (ast.Import, ast.ImportFrom, ast.Assign)) for n in body):
        return "# left out: the compile options were not only imports and assignments"
    return text


def write_repro(out: Path, origin: Any, inputs: Path | None, saved_module: Path, scope: str) -> dict[str, Any]:
    """Writes ``out/repro/`` (inputs.pt, module.pt, state_dict.pt,
    repro.py, README.txt); returns the ``repro`` object of diagnosis.json."""
    folder = out / "repro"
    folder.mkdir(parents=True, exist_ok=True)
    missing = []
    if inputs is not None and inputs.is_file():
        shutil.copyfile(inputs, folder / "inputs.pt")
    elif ".backward." in origin.entry:
        # replay saves a forward call's inputs; the backward's are the gradients, judged within the run.
        missing.append(f"a forward call that shows the error: the error is created in the origin's backward "
                       f"({origin.entry}), and the repro runs a module's forward only (replay judged that backward "
                       "on the gradients it received in graph mode, in the attribute run)")
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
    # Every value from the user's run enters the script as a repr literal (the template), or as copied code
    # checked to be whole definitions and single bindings: a class __qualname__ with a newline in it reaches the
    # "source could not be read" comment of module.json, and must not end it and add a statement.
    constants = _checked_constants(info.get("main_names", {}))
    text = _TEMPLATE.format(module=origin.module, cls=cls, entry=origin.entry, compile_config=_checked_config(info.get(
        "compile_config", "# (not known)")), constants=constants or "# (none)",
        sources=_checked_sources(info.get("main_sources", [])) or "# (none)", scope=scope, origin_rel=rel,
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
            "rebuildable": bool(info.get("pickled")) and not missing, "reproduces": None,
            "reproduces_note": "not run"}


def _why_it_does_not(bisect: dict[str, Any] | None) -> str:
    """Why a repro that ran shows no error, from what the bisect found."""
    b = bisect or {}
    backend, sub, info = b.get("backend"), b.get("subsystem"), b.get("debug_info")
    outside = ("so the cause lies outside the module and its inputs: process state of your script the repro does "
               "not carry")
    if backend and sub:
        return (f"the module compiled alone on the recorded inputs shows no error beyond eager's, and the bisect "
                f"points at {backend}'s {sub!r}" + (f" ({info})" if info else "") + f": {outside} (a lowering or "
                "decomposition table, a registry such as attention functions, a patched torch function), or the "
                "graph it is compiled in with its neighbours (a fusion across modules)")
    if backend:
        return (f"the module compiled alone on the recorded inputs shows no error beyond eager's, and the bisect "
                f"answers backend {backend!r} (no subsystem): {outside} (a global flag, a patched function, a "
                "registry), or the graph it is compiled in with its neighbours")
    return (f"the module compiled alone on the recorded inputs shows no error beyond eager's: {outside} (lowering "
            "or decomposition tables, registries), or the graph it is compiled in with its neighbours"
            + ("" if bisect else "; the bisect (without --no-bisect) names the compiler stage"))


def run_repro(runner: Any, repro: dict[str, Any], bisect: dict[str, Any] | None) -> tuple[bool | None, str]:
    """Runs ``repro.py`` as a user would (``python repro.py``) through
    ``runner`` (stage ``repro``); returns (reproduces, note): True when it
    exits 1 (the compiled module creates the error), False when it exits 0
    (with the reason, from ``bisect``, the ``bisect`` object of
    diagnosis.json), None when it could not run or was not run."""
    import sys

    if repro.get("missing"):
        return None, "not run: the repro misses " + "; ".join(repro["missing"])
    rec = runner.run("repro", [sys.executable, repro["script"]], {})
    if rec.exit_code == 1:
        return True, f"python repro.py exits 1: the compiled module creates the error on the recorded inputs " \
                     f"(log {rec.log})"
    if rec.exit_code == 0:
        why = _why_it_does_not(bisect)
        if repro.get("hooks_dropped"):
            why = ("the module's hooks could not be pickled and are not in the repro (README.txt): a fault in a "
                   "hook does not show there; if the fault is not in a hook: " + why)
        return False, why + f" (log {rec.log})"
    why = rec.note or f"exit {rec.exit_code}"
    return None, f"the repro could not run ({why}; exit 2: the module cannot be rebuilt here, or an exception); " \
                 f"log {rec.log}"
