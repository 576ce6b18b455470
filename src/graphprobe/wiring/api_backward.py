"""L1 backward records: gradients around the torch API calls of the forward.

An API call ``Functional.linear.{n}.forward`` that takes a tensor requiring
grad, made while grad mode is on, gets the backward record
``Functional.linear.{n}.backward`` (msprobe's eager name, same ``{n}`` as the
forward call), built from the probe mechanism of wiring/backward.py: an
identity autograd function (:class:`~graphprobe.wiring.backward.GradProbe`)
around each tensor whose gradient is wanted, whose backward records the
gradient with ``graphprobe::record_stats``. Dynamo traces it, so the
probes are part of the compiled backward graph.

* ``output``: the gradients of the call's tensor inputs that require grad
  (positional arguments in the bound form the forward record shows — a
  tensor inside a list or tuple argument counted too —, then keyword
  arguments), in argument order, numbered over those tensors;
* ``input``: the gradients of the output's tensors that require grad.

msprobe records, instead, the gradients at the autograd node that produced
the output's first tensor (``grad_fn.register_hook``): ``input`` are its
``grad_outputs``, ``output`` its ``grad_inputs``, one per input *of that
node* (``AddmmBackward0`` of a 2-D ``F.linear``: bias, input, weight
transposed; a 3-D ``F.linear`` ends in a view node, whose one gradient is
that of the matmul's 2-D output). Those belong to the aten op that ran last
inside the API, and a compiled backward has no such node; the gradients of
the API's own inputs are what the user can compare, and are the same in
every mode. See docs/levels.md.

Not recorded (each also unrecorded by msprobe or explained in
docs/limitations.md):

* calls made under ``no_grad`` or on tensors that do not require grad;
* in-place APIs (``Tensor.__iadd__``, ``masked_fill_``, ...): probing
  their ``self`` would have to replace the user's tensor with the probe's
  output, which a compiled graph makes as a copy (GradProbe), so the
  in-place update would land in the copy and not in the user's tensor;
* ``Functional.dropout`` with ``p == 0`` (msprobe skips it too:
  ``PytorchHookManager._register_backward_pre_hook``).

The backward call is linked to its forward call at insertion
(``forward_site``), and the call assembly gives it the forward call's
``{n}`` (csrc/identity/call_assembly.cpp), as msprobe names it: a forward
call without backward (rotary embeddings computed under ``no_grad``) does
not shift the numbers of the others.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from graphprobe._ops import _C
from graphprobe.wiring import backward, probe

__all__ = ["backward_entry", "is_in_place", "wanted", "wrap_inputs"]

_DROPOUTS = ("Functional.dropout.", "Functional.dropout1d.", "Functional.dropout2d.", "Functional.dropout3d.")
_warned = False


def wanted(config: Any) -> bool:
    """Whether API calls get backward records under ``config`` (a
    :class:`graphprobe.config.Config`): L1 and mix with ``data_mode``
    ``all`` or ``backward``, as module calls (``Config.records_grads``, whose
    exception holds here too: not in msprobe's aclgraph tensor layout)."""
    if config.task == "tensor" and config.tensor_layout == "aclgraph":
        return False
    return bool(config.records_apis) and ("all" in config.data_mode or "backward" in config.data_mode)


def backward_entry(forward_entry: str) -> str:
    """``Functional.linear.{n}.forward`` -> ``Functional.linear.{n}.backward``."""
    return forward_entry[: -len(".forward")] + ".backward"


def is_in_place(forward_entry: str) -> bool:
    """Whether the API of ``forward_entry`` updates its ``self`` in place
    (``Tensor.__iadd__``, ``Tensor.masked_fill_``): those get no backward
    record (see the module docstring)."""
    api = forward_entry.split(".")[1]
    return api.startswith("__i") or (api.endswith("_") and not api.endswith("__"))


def _dropout_off(forward_entry: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """msprobe's rule: a dropout with ``p == 0`` has no backward record."""
    if not forward_entry.startswith(_DROPOUTS):
        return False
    p = args[1] if len(args) >= 2 else kwargs.get("p", 0.5)
    return isinstance(p, (int, float)) and p == 0


def wrap_inputs(
    forward_entry: str, forward_site: int, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any], str] | None:
    """Opens the backward call of one API call (linked to the forward call's
    input ``forward_site``) with the gradients of its tensor inputs that
    require grad, and returns the arguments with those tensors passed
    through a GradProbe, and the backward entry for :func:`wrap_output`.
    None when the call gets no backward record. Never raises in eager mode
    (a failure is warned once and the call runs unprobed)."""
    if torch.compiler.is_compiling():
        return _wrap_inputs(forward_entry, forward_site, args, kwargs)
    try:
        return _wrap_inputs(forward_entry, forward_site, args, kwargs)
    except Exception as exc:  # noqa: BLE001 - a probe must not break the forward
        global _warned
        if not _warned:
            _warned = True
            warnings.warn(f"graphprobe: the backward record of {forward_entry} could not be prepared ({exc}); "
                          "later failures are not reported", RuntimeWarning, stacklevel=3)
        return None


def _wrap_inputs(
    forward_entry: str, forward_site: int, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any], str] | None:
    if is_in_place(forward_entry) or _dropout_off(forward_entry, args, kwargs):
        return None
    # Where each tensor that wants a gradient sits: (argument, item or -1),
    # and its slot in ``output``: its argument's position (an item of a list
    # argument takes a slot of its own), so that an argument without a
    # gradient leaves its slot empty, as msprobe's null.
    where: list[tuple[int | str, int]] = []
    slots: list[int] = []
    empty: list[int] = []  # slots written as null: tensors (and an operator's number) without gradient
    operator = forward_entry.startswith("Tensor.__")
    slot = 0
    for i, a in enumerate(args):
        if backward._wants_grad(a):
            where.append((i, -1))
            slots.append(slot)
        elif isinstance(a, (list, tuple)) and a and all(isinstance(item, torch.Tensor) for item in a):
            for j, item in enumerate(a):
                if backward._wants_grad(item):
                    where.append((i, j))
                    slots.append(slot + j)
                else:
                    empty.append(slot + j)
            slot += len(a) - 1
        elif isinstance(a, torch.Tensor) or (operator and isinstance(a, (int, float, bool))):
            empty.append(slot)
        slot += 1
    for key, v in kwargs.items():
        if key == "out":  # written to, never differentiated: left as the user's tensor
            continue
        if backward._wants_grad(v):
            where.append((key, -1))
            slots.append(slot)
        elif isinstance(v, torch.Tensor):
            empty.append(slot)
        slot += 1
    if not where:
        return None
    entry = backward_entry(forward_entry)
    site = _register(entry, tuple(slots), tuple(empty), forward_site, probe._mode(), probe._session)
    tensors = [_get(args, kwargs, w) for w in where]
    outs = backward._apply(site, tensors)
    new_args, new_kwargs = list(args), dict(kwargs)
    for (key, j), o in zip(where, outs):
        holder: Any = new_kwargs if isinstance(key, str) else new_args
        if j < 0:
            holder[key] = o
        else:
            items = list(holder[key])
            items[j] = o
            holder[key] = type(holder[key])(items) if isinstance(holder[key], tuple) else items
    return tuple(new_args), new_kwargs, entry


def _get(args: tuple[Any, ...], kwargs: dict[str, Any], where: tuple[int | str, int]) -> torch.Tensor:
    key, j = where
    value = kwargs[key] if isinstance(key, str) else args[key]
    return value if j < 0 else value[j]


@torch._dynamo.assume_constant_result
def _register(entry: str, slots: tuple[int, ...], empty: tuple[int, ...], forward_site: int, mode: int,
              session: int) -> int:
    """Registers the ``output`` part (gradients of the inputs, at ``slots``;
    null at ``empty``) of a backward call; executed (not traced) by dynamo,
    once per trace."""
    program = backward._backward_program() if mode == probe._TRACED else 0
    places = tuple(("output", str(i)) for i in slots)
    leaves = tuple((("output", str(i)), i, "NoneType", None) for i in empty)
    n = len(slots)
    return int(_C.open_call(entry, places, slots, (False,) * n, leaves, mode, program, (), forward_site))
