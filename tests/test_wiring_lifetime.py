"""What the wiring holds and changes in the process: a dumper dropped without
``stop()`` does not keep its model alive, and the MHA fast-path switch is
restored to the user's value whatever order wirings are removed in."""

from __future__ import annotations

import pytest
import torch

from graphprobe.wiring.apis import ApiWiring

_mha = getattr(torch.backends, "mha", None)
needs_switch = pytest.mark.skipif(_mha is None or not hasattr(_mha, "set_fastpath_enabled"),
                                  reason="this torch has no MHA fast-path switch")


@pytest.fixture
def user_fastpath():
    """Restores the switch after the test, whatever the test did."""
    before = torch.backends.mha.get_fastpath_enabled()
    yield
    torch.backends.mha.set_fastpath_enabled(before)


@needs_switch
@pytest.mark.parametrize("user_value", [True, False])
@pytest.mark.parametrize("order", ["fifo", "lifo"])
def test_wirings_removed_in_any_order_restore_the_users_fastpath(user_value, order, user_fastpath):
    torch.backends.mha.set_fastpath_enabled(user_value)
    first = ApiWiring(torch.nn.Linear(2, 2), ())
    second = ApiWiring(torch.nn.Linear(2, 2), ())
    assert torch.backends.mha.get_fastpath_enabled() is False
    (first if order == "fifo" else second).remove()
    assert torch.backends.mha.get_fastpath_enabled() is False  # the other wiring still needs it off
    (second if order == "fifo" else first).remove()
    assert torch.backends.mha.get_fastpath_enabled() is user_value
    first.remove()  # idempotent: no second release
    assert torch.backends.mha.get_fastpath_enabled() is user_value


class _NoForwardAssignment(torch.nn.Linear):
    """A model whose ``forward`` cannot be replaced: ApiWiring's __init__ raises."""

    def __setattr__(self, name, value):
        if name == "forward":
            raise AttributeError("forward is read-only here")
        super().__setattr__(name, value)


@needs_switch
def test_a_wiring_whose_init_raises_leaves_the_fastpath_as_it_was(user_fastpath):
    torch.backends.mha.set_fastpath_enabled(True)
    with pytest.raises(AttributeError, match="read-only"):
        ApiWiring(_NoForwardAssignment(2, 2), ())
    assert torch.backends.mha.get_fastpath_enabled() is True
    wiring = ApiWiring(torch.nn.Linear(2, 2), ())  # the count was not left raised by the failed one
    wiring.remove()
    assert torch.backends.mha.get_fastpath_enabled() is True


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x)) * 2


@pytest.mark.parametrize("level", ["L0", "L1", "mix"])
def test_a_dumper_dropped_without_stop_does_not_keep_its_model_alive(level, write_config, read_step, tmp_path):
    import gc
    import warnings
    import weakref

    import graphprobe

    model = _Net()
    alive = weakref.ref(model)
    dumper = graphprobe.AclGraphDumper(write_config(level=level))
    dumper.start(model)
    model(torch.randn(2, 4))
    dumper.step()
    read_step(str(tmp_path / "dump"), 0)  # it recorded
    del dumper, model
    gc.collect()
    assert alive() is None, [type(r).__name__ for r in gc.get_referrers(alive())]
    # The next start() undoes the dropped dumper's wiring without its model.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the dropped dumper, the used dump_path
        other = _Net()
        dumper = graphprobe.AclGraphDumper(write_config(level=level, dump_path=str(tmp_path / "again")))
        dumper.start(other)
    other(torch.randn(2, 4))
    dumper.step()
    assert read_step(str(tmp_path / "again"), 0)["data"]
    dumper.stop()
    assert "forward" not in other.__dict__ and not other.fc._forward_hooks
