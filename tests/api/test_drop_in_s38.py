"""Drop-in gaps of issue 15 measured side by side with torch.compile (session 38): ``p.grad = tensor`` inside a
compiled function, ``compile(opt.zero_grad)``, ``torch.compiler.disable(fn, recursive=False)`` and hooks of a
compiled module.

Each behaviour test compares with eager (``assert_parity``) and, where the behaviour is torch.compile's, runs the
same program under torch.compile in the same test and compares the graph counts and what
``torch.compiler.is_compiling()`` answered.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo
from torch import nn

import stillframe
from stillframe.check.parity import assert_parity
from py_cases import counting_backend
from stillframe.errors import StillframeWarning



def _side_by_side(program, make_args, calls=2):
    """Graph counts of ``program`` under torch.compile and stillframe (``calls`` calls each, fresh inputs)."""
    counts = {}
    for name, compile_ in (("torch", torch.compile), ("stillframe", stillframe.compile)):
        torch._dynamo.reset()
        graphs, backend = counting_backend()
        compiled = compile_(program, backend=backend)
        for i in range(calls):
            compiled(*make_args(i))
        counts[name] = len(graphs)
    return counts


# --- p.grad = tensor -----------------------------------------------------------------------------------------------

def set_grad(p, g):
    p.grad = g * 2
    return p.grad.sum() + p.sum()


def set_grads(ps, g):
    for p in ps:
        p.grad = g.expand_as(p).clone()
    return [p.grad for p in ps]


def set_grad_to_input(p, g):
    p.grad = g
    return p.grad is g, p.grad


def _param_and_grad(i=0):
    return nn.Parameter(torch.randn(3)), torch.randn(3)


def _params_and_scalar(i=0):
    return [nn.Parameter(torch.randn(3, 3)), nn.Parameter(torch.randn(3))], torch.randn(())


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("program,make_args", [(set_grad, _param_and_grad), (set_grads, _params_and_scalar),
                                               (set_grad_to_input, _param_and_grad)])
def test_assigning_a_tensor_to_grad_is_traced_as_under_torch_compile(backend, program, make_args):
    assert_parity(program, make_args, backend=backend, calls=2)
    report = stillframe.explain(program)(*make_args())
    assert report.graph_count == 1 and report.break_count == 0, report
    counts = _side_by_side(program, make_args)  # (p.grad = g alone: no op, no graph for the backend on either)
    assert counts == {"torch": int(program is not set_grad_to_input), "stillframe": counts["torch"]}


def _refused_grads(i):
    p = nn.Parameter(torch.randn(3))
    return [(p, torch.randn(2)), (p, torch.randn(3, dtype=torch.float64)), (p, p), (p, 3),
            (p, torch.randn(3, device="meta"))][i]


def set_grad_as_is(p, g):
    p.grad = g
    return p.sum()


@pytest.mark.parametrize("case", range(5))
def test_a_grad_eager_refuses_raises_eagers_error(case):
    # size, dtype, the tensor itself, an int, another device: eager's own RuntimeError / TypeError
    assert_parity(set_grad_as_is, lambda i: _refused_grads(case), calls=2)


def set_grad_then_write(p, g, x):
    p.grad = g
    x.add_(1)  # eager never gets here where the assignment raises
    return p.sum()


def _grad_dtype_changes(i):
    p = nn.Parameter(torch.randn(3))
    if i == 1:
        p.grad_dtype = torch.float64  # eager refuses a float32 grad from now on
    elif i == 2:
        p.grad_dtype = None  # and takes any dtype
    return p, torch.randn(3, dtype=torch.float64 if i == 3 else torch.float32), torch.zeros(2)


def test_a_grad_assignment_is_guarded_on_grad_dtype():
    assert_parity(set_grad_then_write, _grad_dtype_changes, calls=4)


# --- compile(opt.zero_grad) ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("set_to_none", [True, False])
def test_compiled_zero_grad_runs_silently_as_under_torch_compile(set_to_none):
    results = {}
    for name, compile_ in (("eager", None), ("torch", torch.compile), ("stillframe", stillframe.compile)):
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = nn.Linear(3, 3)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        graphs, backend = counting_backend()
        zero_grad = opt.zero_grad if compile_ is None else compile_(opt.zero_grad, backend=backend)
        seen = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                model(torch.ones(3)).sum().backward()
                zero_grad(set_to_none=set_to_none)
                seen.append([None if p.grad is None else p.grad.clone() for p in model.parameters()])
        assert not [w for w in caught if issubclass(w.category, StillframeWarning)], [str(w.message) for w in caught]
        results[name] = (seen, len(graphs))
    for name in ("torch", "stillframe"):
        for eager_step, step in zip(results["eager"][0], results[name][0]):
            assert [g is None for g in eager_step] == [g is None for g in step]
            for a, b in zip(eager_step, step):
                if a is not None:
                    torch.testing.assert_close(a, b)
    assert results["torch"][1] == results["stillframe"][1] == 0


# --- torch.compiler.disable(fn, recursive=False) --------------------------------------------------------------------

SEEN: list = []  # (where, torch.compiler.is_compiling()) call by call
RECORD = True  # off where graphs are counted: torch.compile guards on len(SEEN) and recompiles at every append


def helper(x):
    RECORD and SEEN.append(("helper", torch.compiler.is_compiling()))
    return x * 2


class Scale(nn.Module):
    def forward(self, x):
        RECORD and SEEN.append(("module", torch.compiler.is_compiling()))
        return x * 3


SCALE = Scale()


class Holder:
    def method(self, x):
        RECORD and SEEN.append(("method", torch.compiler.is_compiling()))
        return x - 1

    @torch.compiler.disable(recursive=False)
    def shallow_method(self, x):
        RECORD and SEEN.append(("shallow_method", torch.compiler.is_compiling()))
        return self.method(x) + 1


HOLDER = Holder()


@torch.compiler.disable(recursive=False)
def shallow(x, k=2):
    RECORD and SEEN.append(("shallow", torch.compiler.is_compiling()))
    y = helper(x) + k
    for i in range(2):
        y = SCALE(y) + i
    return HOLDER.method(y)


def calls_shallow(x):
    y = shallow(x.sin(), k=3)
    return HOLDER.shallow_method(y).cos()


@torch.compiler.disable(recursive=False)
def shallow_raises(x):
    helper(x)
    try:
        return x[5]
    except IndexError:
        RECORD and SEEN.append(("handled", torch.compiler.is_compiling()))
    raise ValueError("from the shallow frame")


def calls_shallow_raises(x):
    return shallow_raises(x + 1)


def _seen_under(compile_, program, calls=3, record=True):
    global RECORD
    RECORD = record
    SEEN.clear()
    torch._dynamo.reset()
    graphs, backend = counting_backend()
    compiled = compile_(program, backend=backend)
    for _ in range(calls):
        try:
            compiled(torch.ones(3))
        except ValueError:
            pass
    return list(SEEN), len(graphs), compiled


@pytest.mark.parametrize("program", [calls_shallow, calls_shallow_raises])
def test_a_nonrecursive_disable_compiles_what_its_frame_calls_as_torch_compile_does(program):
    assert_parity(program, lambda i: (torch.randn(3),), calls=3)
    eager_seen, _, _ = _seen_under(lambda fn, backend: fn, program)
    tc_seen, _, _ = _seen_under(torch.compile, program)
    ours_seen, _, _ = _seen_under(stillframe.compile, program)
    # the disabled frames see False, what they call (a function, a module, a method) True, on both compilers
    assert ours_seen == tc_seen != eager_seen
    assert {seen for where, seen in ours_seen if where.startswith("shallow") or where == "handled"} == {False}
    assert {seen for where, seen in ours_seen if where in ("helper", "module", "method")} == {True}
    (_, tc_graphs, _), (_, ours_graphs, compiled) = [_seen_under(compile_, program, record=False)
                                                      for compile_ in (torch.compile, stillframe.compile)]
    assert ours_graphs == tc_graphs
    traces = compiled.traces
    compiled(torch.ones(3)) if program is calls_shallow else None
    assert compiled.traces == traces  # a steady state: the callees' compiled functions are kept


# --- forward hooks and pre-hooks of a compiled module ----------------------------------------------------------------

def pre_hook(module, args):
    RECORD and SEEN.append(("pre_hook", torch.compiler.is_compiling()))
    return args[0] * 2  # not a tuple: made a 1-tuple


def kwargs_pre_hook(module, args, kwargs):
    RECORD and SEEN.append(("kwargs_pre_hook", torch.compiler.is_compiling()))
    return args, {**kwargs, "shift": kwargs.get("shift", 0.0) + 1.0}


def forward_hook(module, args, output):
    RECORD and SEEN.append(("forward_hook", torch.compiler.is_compiling()))
    return output + args[0].sum()


def kwargs_forward_hook(module, args, kwargs, output):
    RECORD and SEEN.append(("kwargs_forward_hook", torch.compiler.is_compiling()))
    return output * kwargs["shift"]


def bad_pre_hook(module, args, kwargs):
    return args  # eager: RuntimeError, a pre-hook with kwargs must return (args, kwargs)


class Hooked(nn.Module):
    def __init__(self, hooks):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        for register, hook, with_kwargs in hooks:
            getattr(self, register)(hook, with_kwargs=with_kwargs)

    def forward(self, x, shift=0.0):
        RECORD and SEEN.append(("forward", torch.compiler.is_compiling()))
        return self.linear(x).relu() + shift


HOOKS = {
    "plain": [("register_forward_pre_hook", pre_hook, False), ("register_forward_hook", forward_hook, False)],
    "kwargs": [("register_forward_pre_hook", kwargs_pre_hook, True), ("register_forward_pre_hook", pre_hook, False),
               ("register_forward_hook", kwargs_forward_hook, True), ("register_forward_hook", forward_hook, False)],
}


def _modules_side_by_side(make_module, call) -> dict:
    """``found[frontend, record]``: with ``record``, what each frontend's run (eager, torch.compile, stillframe) of
    three calls appended to SEEN; without, how many graphs its backend got (torch's state reset before each)."""
    global RECORD
    found = {}
    for name, compile_ in (("eager", None), ("torch", torch.compile), ("stillframe", stillframe.compile)):
        for record in (True, False):
            RECORD = record
            SEEN.clear()
            torch._dynamo.reset()
            torch.manual_seed(0)
            graphs, backend = counting_backend()
            module = make_module()
            compiled = module if compile_ is None else compile_(module, backend=backend)
            for _ in range(3):
                call(compiled)
            found[name, record] = list(SEEN) if record else len(graphs)
    RECORD = True
    return found


@pytest.mark.parametrize("hooks", sorted(HOOKS))
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_hooks_of_a_compiled_module_are_compiled_as_under_torch_compile(hooks, backend):
    global RECORD
    RECORD = False
    assert_parity(Hooked(HOOKS[hooks]), lambda i: ((torch.randn(2, 4),), {"shift": 0.5}), backend=backend, calls=3)
    found = _modules_side_by_side(lambda: Hooked(HOOKS[hooks]), lambda compiled: compiled(torch.ones(2, 4), shift=0.5))
    # every hook and the forward see is_compiling() True, as under torch.compile; each hook with a tensor op is a
    # graph of its own (the forward's, and one per hook but kwargs_pre_hook, which has none)
    assert found["stillframe", True] == found["torch", True] != found["eager", True]
    assert {seen for _, seen in found["stillframe", True]} == {True}
    assert found["stillframe", False] == found["torch", False] == {"plain": 3, "kwargs": 4}[hooks]


def test_a_kwargs_pre_hook_returning_something_else_raises_eagers_error():
    assert_parity(Hooked([("register_forward_pre_hook", bad_pre_hook, True)]), lambda i: (torch.randn(2, 4),))


class ShallowForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = Scale()

    @torch.compiler.disable(recursive=False)
    def forward(self, x):
        RECORD and SEEN.append(("shallow_forward", torch.compiler.is_compiling()))
        return helper(self.scale(x)) + 1


def test_a_compiled_modules_nonrecursive_disabled_forward_compiles_what_it_calls_as_torch_compile_does():
    global RECORD
    RECORD = False
    assert_parity(ShallowForward(), lambda i: (torch.randn(3),), calls=3)
    found = _modules_side_by_side(ShallowForward, lambda compiled: compiled(torch.ones(3)))
    assert found["stillframe", True] == found["torch", True] != found["eager", True]
    assert found["stillframe", False] == found["torch", False] == 2  # the submodule's forward, helper
