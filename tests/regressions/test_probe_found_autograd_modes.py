"""Regressions found by parity probes of what the user hooks into autograd and torch's dispatch (session 32):
saved-tensor hooks, module hooks registered after the first call, torch function and dispatch modes. Each
scenario runs eagerly and compiled on both backends; what it observes (values, gradients, the hooks' and modes'
logs) must be the same."""

from __future__ import annotations

import pytest
import torch
import torch.utils.checkpoint
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import stillframe

BACKENDS = ["eager", "aot_eager"]


def _same(eager, compiled, path="observed"):
    """Assert that two observations agree: tensors in value and requires_grad, everything else by ``==``."""
    if isinstance(eager, torch.Tensor):
        assert isinstance(compiled, torch.Tensor), f"{path}: {compiled!r} is not a tensor"
        assert compiled.requires_grad == eager.requires_grad, f"{path}: requires_grad differs"
        torch.testing.assert_close(compiled.detach(), eager.detach(), msg=lambda m: f"{path}: {m}")
    elif isinstance(eager, (list, tuple)):
        assert type(compiled) is type(eager) and len(compiled) == len(eager), f"{path}: {compiled!r} != {eager!r}"
        for i, (e, c) in enumerate(zip(eager, compiled)):
            _same(e, c, f"{path}[{i}]")
    else:
        assert compiled == eager, f"{path}: {compiled!r} != {eager!r}"


def _parity(scenario, backend, **compile_kwargs):
    """Run ``scenario(compile)`` eagerly (``compile`` returns its argument) and compiled; compare what it returns."""
    torch.manual_seed(0)
    eager = scenario(lambda fn: fn)
    torch.manual_seed(0)
    compiled = scenario(lambda fn: stillframe.compile(fn, backend=backend, **compile_kwargs))
    _same(eager, compiled)


def _inputs(i):
    torch.manual_seed(i)
    return torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)


# ---------------------------------------------------------------- saved-tensor hooks
# An AOTAutograd graph is one autograd node that saves what its partitioner chose, not the tensors eager's ops
# save: hooks active while it ran packed 2 tensors where eager packs 3, and an unpack hook that changes the value
# gave other gradients. On the eager backend a captured checkpoint saved differently too. A compiled call made
# while such hooks are active runs for real now, and so does the code between entering and leaving them.

def _recording_hooks(log):
    def pack(t):
        log.append(("pack", tuple(t.shape)))
        return t

    def unpack(t):
        log.append("unpack")
        return t * 2

    return pack, unpack


def _saved_hooks_scenario(body, where, backward_inside=False):
    def scenario(compile):
        log = []
        pack, unpack = _recording_hooks(log)

        def inner(x, w):
            if where == "inside":
                with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
                    y = body(x, w)
            else:
                y = body(x, w)
            if backward_inside:
                y.sum().backward()
                return y.detach() + 1
            return y

        fn = compile(inner)
        observed = []
        for i in range(3):
            x, w = _inputs(i)
            if where == "around":
                with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
                    y = fn(x, w)
            else:
                y = fn(x, w)
            if not backward_inside:
                y.sum().backward()
            observed.append([y, x.grad, w.grad])
        return observed, log

    return scenario


def _mul_sin(x, w):
    return (x * w).sin()


def _checkpointed(x, w):
    return torch.utils.checkpoint.checkpoint(lambda a: (a * w).sin().cos(), x, use_reentrant=False)


@pytest.mark.parametrize("where", ["inside", "around"])
@pytest.mark.parametrize("body", [_mul_sin, _checkpointed])
@pytest.mark.parametrize("backend", BACKENDS)
def test_saved_tensor_hooks(backend, body, where):
    _parity(_saved_hooks_scenario(body, where), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_saved_tensor_hooks_with_backward_inside(backend):
    _parity(_saved_hooks_scenario(_mul_sin, "inside", backward_inside=True), backend)


# ---------------------------------------------------------------- module hooks registered after the first call
# A module call traced without hooks was guarded to have no forward hooks only: a backward hook (or backward
# pre-hook) registered after the first call never ran, and one that changes the gradient was ignored. Its guard
# now also says the module has no backward hooks; a module with one is called for real.

class _SuperCall(nn.Module):
    """A subclass's ``__call__`` that reaches ``nn.Module.__call__`` through ``super()``."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def __call__(self, x):
        return super().__call__(x) * 2

    def forward(self, x):
        return self.lin(x).relu()


def _register(module, kind, log):
    if kind == "backward":
        return module.register_full_backward_hook(lambda mod, gin, gout: log.append(("backward", gout[0].sum())))
    if kind == "backward_pre":
        return module.register_full_backward_pre_hook(lambda mod, gout: log.append(("pre", gout[0].sum())))
    if kind == "backward_scaling":  # the hook's result replaces the module's input gradient
        return module.register_full_backward_hook(lambda mod, gin, gout: (gin[0] * 3,))
    raise ValueError(kind)


def _module_hook_scenario(kind, style, target):
    def scenario(compile):
        log = []
        m = nn.Sequential(_SuperCall() if target == "super_call" else nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
        hooked = m if target == "outer" else m[0]
        if style == "function":
            fn = compile(lambda x: m(x).sum())
        else:  # the compiled module itself
            compiled = compile(m)
            fn = lambda x: compiled(x).sum()  # noqa: E731
        observed = []
        x = torch.randn(2, 4, requires_grad=True)
        for step in range(5):
            if step == 1:
                handle = _register(hooked, kind, log)
            if step == 3:
                handle.remove()
            y = fn(x)
            y.backward()
            observed.append([y, x.grad.clone(), m[-1].weight.grad.clone(), len(log)])
        return observed, log

    return scenario


@pytest.mark.parametrize("target", ["inner", "outer", "super_call"])
@pytest.mark.parametrize("style", ["function", "module"])
@pytest.mark.parametrize("kind", ["backward", "backward_pre", "backward_scaling"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_module_backward_hook_registered_after_the_first_call(backend, kind, style, target):
    _parity(_module_hook_scenario(kind, style, target), backend)


# ---------------------------------------------------------------- torch function and dispatch modes
# A mode active around a compiled call saw stillframe's own torch calls (the guards' reads of sizes and strides,
# the fetch of inputs, AOTAutograd's ops), and a mode entered inside the compiled function saw the guards of the
# code after it. A compiled call made while a mode is active runs for real now, and so does the code while one
# entered inside is active.

class _FunctionLog(TorchFunctionMode):
    def __init__(self, log):
        super().__init__()
        self.log = log

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.log.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


class _DispatchLog(TorchDispatchMode):
    def __init__(self, log):
        super().__init__()
        self.log = log

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.log.append(str(func))
        return func(*args, **(kwargs or {}))


def _mode_scenario(mode, where):
    def scenario(compile):
        log = []

        def inner(x, w):
            y = x * 2
            if where == "inside":
                with mode(log):
                    y = (y * w).sin()
            else:
                y = (y * w).sin()
            return y.cos().sum() + 1

        fn = compile(inner)
        observed = []
        for i in range(3):
            x, w = _inputs(i)
            if where == "around":
                with mode(log):
                    y = fn(x, w)
            else:
                y = fn(x, w)
            y.backward()
            observed.append([y, x.grad, w.grad])
        return observed, log

    return scenario


@pytest.mark.parametrize("where", ["inside", "around"])
@pytest.mark.parametrize("mode", [_FunctionLog, _DispatchLog])
@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_modes_see_only_eager_calls(backend, mode, where):
    _parity(_mode_scenario(mode, where), backend)


def test_code_after_a_mode_is_left_is_captured_again():
    # the code after the `with` block runs through a plan again, traced once and then reused
    log = []

    def inner(x):
        with _FunctionLog(log):
            x = x + 1
        return x * 2

    compiled = stillframe.compile(inner, backend="eager")
    for _ in range(3):
        torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), 4.0))
    assert log == ["add"] * 3
    graphs = [entry.graph_module.code for entries in compiled.all_cache_entries().values() for entry in entries
              if entry.graph_module is not None]
    assert any("mul" in code for code in graphs), graphs
    assert stillframe.counters["traces"] <= 3


@pytest.mark.parametrize("mode", [_FunctionLog, _DispatchLog])
def test_fullgraph_call_under_a_mode_is_unsupported(mode):
    compiled = stillframe.compile(lambda x: x.sin() + 1, backend="eager", fullgraph=True)
    with mode([]):
        with pytest.raises(stillframe.Unsupported, match="is active"):
            compiled(torch.ones(2))


# ---------------------------------------------------------------- torch.device as a context
# torch.device(...) as a context (torch.set_default_device) is a function mode of torch's that the trace follows
# rather than runs for real. Its device was not guarded: a plan traced inside `with torch.device("meta")` made
# meta tensors outside it too. And stillframe's own tensors took its device: a float argument that changes
# (passed as a float64 0-dim tensor) was made on meta, and the aot_eager backend raised a device mismatch.

def _factories(x, n):
    return torch.arange(n).float().sum() + x.sum().to("cpu"), torch.zeros(2) + 1, torch.empty(1).device.type


def _scaled(x, lr):
    return x * lr + torch.ones(2, device="cpu")


@pytest.mark.parametrize("fn", [_factories, _scaled])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_device_context_around_the_call(backend, fn):
    def scenario(compile):
        compiled = compile(fn)
        observed = []
        for i, (inside, value) in enumerate([(True, 3), (True, 4), (False, 5), (True, 6), (False, 7)]):
            x = torch.ones(2, device="cpu") * (i + 1)
            args = (x, value if fn is _factories else value / 8)
            if inside:
                with torch.device("meta"):
                    result = compiled(*args)
            else:
                result = compiled(*args)
            observed.append([(t.device.type, t.shape, t.tolist() if t.device.type != "meta" else None)
                             if isinstance(t, torch.Tensor) else t for t in result])
        return observed

    _parity(scenario, backend)
