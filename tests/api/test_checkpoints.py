"""Checkpoints and pickling of compiled modules and functions, side by side with torch.compile's wrapper.

A compiled module names its parameters and buffers under ``_orig_mod.`` exactly as ``OptimizedModule`` does,
so ``state_dict()`` checkpoints move between stillframe and torch.compile in both directions, nested in a
parent or not; a checkpoint of the original (uncompiled) module also loads, strict or not. Pickling,
``copy.deepcopy`` and ``torch.save`` keep the module and the compile arguments; the copy traces afresh.
"""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
import torch._dynamo
from torch import nn

import stillframe


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.norm = nn.BatchNorm1d(3)  # a buffer (running_mean) and a non-tensor entry (num_batches_tracked)

    def forward(self, x):
        return self.norm(self.lin(x)).relu()


class Parent(nn.Module):
    def __init__(self, compile_child):
        super().__init__()
        self.child = compile_child(Net())
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        return self.head(self.child(x))


def ours(m):
    return stillframe.compile(m, backend="eager")


def theirs(m):
    return torch.compile(m, backend="eager")


def plain(m):
    return m


@pytest.fixture(autouse=True)
def _reset_dynamo():
    yield
    torch._dynamo.reset()


def _fresh(seed):
    torch.manual_seed(seed)
    return Net()


def _assert_same_state(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for k in sa:
        torch.testing.assert_close(sa[k], sb[k], msg=k)


def test_names_are_torch_compiles():
    o, t = ours(_fresh(0)), theirs(_fresh(0))
    assert list(o.state_dict()) == list(t.state_dict())
    assert list(o.state_dict())[0] == "_orig_mod.lin.weight"
    assert [n for n, _ in o.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in o.named_buffers()] == [n for n, _ in t.named_buffers()]
    assert [n for n, _ in o.named_modules()] == [n for n, _ in t.named_modules()]
    assert o._orig_mod is o.original_module


@pytest.mark.parametrize("save, load", [(ours, theirs), (theirs, ours), (ours, ours)],
                         ids=["ours_into_torch", "torch_into_ours", "ours_into_ours"])
@pytest.mark.parametrize("strict", [True, False])
def test_checkpoints_move_between_stillframe_and_torch_compile(save, load, strict):
    source, target = save(_fresh(1)), load(_fresh(2))
    result = target.load_state_dict(source.state_dict(), strict=strict)
    assert result.missing_keys == [] and result.unexpected_keys == []
    _assert_same_state(target._orig_mod, source._orig_mod)
    x = torch.randn(5, 4)
    torch.testing.assert_close(target(x), source._orig_mod(x))


@pytest.mark.parametrize("save, load", [(ours, ours), (theirs, ours), (ours, theirs)],
                         ids=["own", "torch_into_ours", "ours_into_torch"])
def test_a_parent_holding_a_compiled_child_round_trips(save, load):
    torch.manual_seed(3)
    source = Parent(save)
    torch.manual_seed(4)
    target = Parent(load)
    assert list(source.state_dict())[0] == "child._orig_mod.lin.weight"
    target.load_state_dict(source.state_dict())
    _assert_same_state(target, source)
    source.load_state_dict(source.state_dict())  # its own checkpoint
    x = torch.randn(5, 4)
    torch.testing.assert_close(target(x), source(x))


@pytest.mark.parametrize("strict", [True, False])
def test_a_checkpoint_of_the_uncompiled_module_loads_and_is_not_silently_ignored(strict):
    original, target = _fresh(5), ours(_fresh(6))
    result = target.load_state_dict(original.state_dict(), strict=strict)
    assert result.missing_keys == [] and result.unexpected_keys == []
    _assert_same_state(target._orig_mod, original)
    parent_plain, parent = Parent(plain), Parent(ours)  # nested: "child.lin.weight" into "child._orig_mod..."
    parent.load_state_dict(parent_plain.state_dict(), strict=strict)
    _assert_same_state(parent.child._orig_mod, parent_plain.child)


def test_a_compiled_checkpoint_into_the_uncompiled_module_fails_as_with_torch_compile():
    for compile_ in (ours, theirs):
        with pytest.raises(RuntimeError, match="Missing key"):
            _fresh(7).load_state_dict(compile_(_fresh(8)).state_dict())


def _pickled(m):
    return pickle.loads(pickle.dumps(m))


def _saved(m):
    buffer = io.BytesIO()
    torch.save(m, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


@pytest.mark.parametrize("copier", [_pickled, _saved, copy.deepcopy], ids=["pickle", "torch_save", "deepcopy"])
def test_a_compiled_module_pickles_as_torch_compiles_does(copier):
    compiled = stillframe.compile(_fresh(9), backend="eager").eval()
    x = torch.randn(5, 4)
    expected = compiled(x)  # traced before copying: the copy must not carry the cache
    copied = copier(compiled)
    theirs_copied = copier(theirs(_fresh(9)).eval())
    assert type(copied) is stillframe.CompiledModule and type(theirs_copied).__name__ == "OptimizedModule"
    assert copied._orig_mod is not compiled._orig_mod and not copied.training
    assert copied.cache_entries() == []
    torch.testing.assert_close(copied(x), expected)
    torch.testing.assert_close(theirs_copied(x), expected)
    assert len(copied.cache_entries()) == 1  # it compiled lazily, with the same backend
    _assert_same_state(copied, theirs_copied)


@stillframe.compile(backend="eager")
def decorated(x):
    return x.sin() * 2


def undecorated(x):
    return x.cos() + 1


def test_compiled_functions_pickle():
    x = torch.randn(3)
    decorated(x)
    assert pickle.loads(pickle.dumps(decorated)) is decorated  # by name, as torch.compile's decorated wrapper
    compiled = stillframe.compile(undecorated, backend="eager")  # torch.compile's wrapper cannot pickle this one
    compiled(x)
    copied = _pickled(compiled)
    assert isinstance(copied, stillframe.CompiledFunction) and copied is not compiled
    assert copied.cache_entries() == []
    torch.testing.assert_close(copied(x), undecorated(x))
    assert len(copied.cache_entries()) == 1
