"""Regressions found by hand-written parity probes (session 28): a break in a callee or in an ``except`` block,
and builtins that read their caller's frame. Each is compared with eager on both backends."""

from __future__ import annotations

import io
import sys

import pytest
import torch

from stillframe.check.parity import assert_parity

BACKENDS = ["eager", "aot_eager"]
BUF = io.StringIO()


def _args(i=0):
    return (torch.randn(2, 3) + i,)


@pytest.mark.parametrize("backend", BACKENDS)
def test_local_read_only_by_the_handler_of_a_call_that_breaks_and_raises(backend):
    # `x` is read only by the handler of `return inner(x)`; at the break inside inner, the caller's frame stood
    # past the call (its return), where x is dead, so x was not rebuilt and the handler raised UnboundLocalError
    def fn(x):
        def inner(t):
            print("inner", file=BUF)
            raise RuntimeError("boom")

        try:
            return inner(x)
        except RuntimeError as e:
            return x + 1, str(e)

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bare_raise_after_a_break_inside_an_except_block(backend):
    # the continuation of a break inside `except KeyError:` did not know the exception being handled, so the
    # bare `raise` after it raised TypeError: exceptions must derive from BaseException
    def fn(x):
        try:
            try:
                raise KeyError("k")
            except KeyError:
                print("handling", file=BUF)
                y = x * 2
                raise
        except KeyError as e:
            return y + 1, repr(e)

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_raise_inside_an_except_block_after_a_break_chains_the_handled_exception(backend):
    # a new exception raised in an `except` block after a break has the handled one as __context__, as eager
    def fn(x):
        try:
            try:
                raise KeyError("k")
            except KeyError:
                print("handling", file=BUF)
                raise ValueError("v")
        except ValueError as e:
            return x - 1, repr(e.__context__), e.__suppress_context__

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_locals_globals_vars_and_dir_read_the_users_frame(backend):
    # run for real, locals() returned the locals of stillframe's call helper (['______', '___a', ...]) and
    # globals() its globals
    def fn(x):
        a = 1
        y = x + a
        return y, sorted(locals()), "BUF" in globals(), sorted(vars()), dir(), locals()["a"]

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_locals_sees_closure_cells(backend):
    def fn(x):
        c = x * 2

        def inner():
            return c

        names = sorted(locals())
        return inner() + 1, names

    assert_parity(fn, _args, backend=backend, calls=3)


@torch.compiler.disable
def _opaque():
    return torch.ones(3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_locals_named_like_stack_slots_at_a_break(backend):
    # a resumed trace named stack slot j of frame i '{i}:s{j}', as it names local s0 '{i}:s0': the local
    # overwrote the slot, so y read s0's value (silently), and a = _opaque() read s0's tensor
    def fn(x):
        s0 = 3
        s1 = x * 2
        y = x.sum().item()
        a = _opaque()
        yields = x - 1
        return s0, y, a, s1, yields

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_locals_whose_graph_input_names_sanitize_alike(backend):
    # fuzz 42:14: after the break, L['0:___x'] and L['0:x'] both became the graph input L_0_x, and the graph's
    # code had a duplicate argument (a SyntaxError: the frame ran instruction by instruction with a warning)
    def fn(x):
        ___x = x + 1
        y = x.sum().item()
        return ___x - x, y

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_generator_state_saved_in_a_local_named_s0(backend):
    def fn(x):
        g = torch.Generator().manual_seed(3)
        s0 = g.get_state()
        a = torch.rand(3, generator=g)
        g.set_state(s0)
        b = torch.rand(3, generator=g)
        return x + a.sum(), a, b

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.xfail(sys.version_info < (3, 13), strict=True,
                   reason="on 3.11/3.12 locals() is one dict per frame that each call refreshes in place; a real "
                          "step's locals() makes a new dict each time (runtime/executors._frame_locals; torch.compile "
                          "too). From 3.13 (PEP 667) each call is a new snapshot, as stillframe's")
def test_locals_is_one_dict_per_frame_refreshed_by_each_call(backend):
    # fuzz (generator family locals): loc = locals(); t = x * 2; loc is locals() -> eager (3.11) True, and loc has t
    def fn(x):
        loc = locals()
        t = x * 2
        return t, loc is locals(), sorted(loc)

    assert_parity(fn, lambda i=0: (torch.randn(2) + i,), backend=backend, calls=3)
