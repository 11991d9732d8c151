"""Divergences the differential fuzzer (``python -m stillframe.check.fuzz``) found, minimized by hand.

Each test is one generated program cut down to what shows the divergence, checked as the fuzzer checks it
(:func:`stillframe.check.fuzz.check_program`: three calls with changing inputs, every observable compared
with eager: values and metadata of the result, inputs after the call, gradients, the outside list, dict and
object the program writes, printed text, exceptions). A program that still diverges is a strict xfail that
names the gap; ``tests/check/test_fuzz.py`` lists which fuzzer programs each one stands for.
"""

from __future__ import annotations

import pytest

from stillframe.check.fuzz import check_program
from stillframe.check.program_writer import HEADER
from stillframe.check.programs import load


def program(body: str, *, n: int = 2, x_rg: bool = True, w_rg: bool = True, ks=(2, 2, 2)) -> str:
    """A fuzzer program: the usual outside state and ``make_args``, then ``body`` (which defines ``f``)."""
    return HEADER % {"n0": n, "n2": n, "x_rg": x_rg, "w_rg": w_rg, "ks": ks} + "\n\n" + body


def assert_like_eager(source: str, compiler: str = "stillframe"):
    finding = check_program(load(source), compiler)
    assert finding.kind == "ok", finding.format()


def test_fuzz_local_bound_by_one_branch_then_graph_break():
    # fuzz 2026:104 and 2026:114: the plan after the break was made where the ``if`` bound t1; on a call where
    # it did not, the rebuild read the missing local (KeyError '0:t1' reached the user; the frame's
    # ``no_grad`` was left on)
    assert_like_eager(program('''
def h(p, k):
    t5 = p.detach()
    print('t5', f'{float(t5.sum()):.2f}', file=BUF)


def f(x, y, w, k):
    if y.sum() > 0:
        t1 = w - y
    with torch.no_grad():
        t7 = h(w, k)
    return w * 2
''', n=4, ks=(1, 2, 3)))


@pytest.mark.xfail(strict=True, reason="an in-place op on an expanded tensor raises only when the graph runs, "
                                       "after the trace left the user's try block (fake propagation of "
                                       "autograd.grad's result misses the internal overlap)")
def test_fuzz_inplace_on_expanded_grad_inside_try():
    # fuzz 2026:26, 1:7: torch.autograd.grad(w.sum(), [w]) is an expanded tensor; neg_ on it raises, in the try
    assert_like_eager(program('''
def f(x, y, w, k):
    g1, = torch.autograd.grad(w.sum(), [w], retain_graph=True)
    try:
        g1.neg_()
    except RuntimeError as e:
        print(type(e).__name__, file=BUF)
    return g1 * 2
'''))


@pytest.mark.xfail(strict=True, reason="copy_ from an overlapping view raises only when the graph runs, after "
                                       "the trace left the user's try block (torch.compile diverges the same way)")
def test_fuzz_overlapping_copy_inside_try():
    # fuzz 1:143: t.copy_(t.narrow(0, 0, 1)) raises in eager (partial overlap), inside the try
    assert_like_eager(program('''
def f(x, y, w, k):
    t = w.sin()
    try:
        t.copy_(t.narrow(0, 0, 1))
    except RuntimeError as e:
        print(type(e).__name__, file=BUF)
    return t
'''))
