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


def test_fuzz_hasattr_sees_an_attribute_set_by_a_computed_name():
    # fuzz 2026:49 (and eight more of that run): setattr(OBJ, 'attr' + str(k), t) on an outside object, then
    # hasattr(OBJ, 'attr2'): the trace asked the live object, which the recorded write had not reached (False)
    assert_like_eager(program('''
def f(x, y, w, k):
    setattr(OBJ, 'attr' + str(k), w)
    OUT.append([hasattr(OBJ, 'attr' + str(j)) for j in range(4)])
    if hasattr(OBJ, 'attr1'):
        del OBJ.attr1
    OUT.append(hasattr(OBJ, 'attr1'))
    return getattr(OBJ, 'attr' + str(k)) * 2
''', ks=(1, 2, 1)))


def test_fuzz_unset_slot_of_an_object_made_in_the_trace():
    # fuzz 2026:37: hasattr(o, 'b') for a __slots__ slot never assigned raised an internal AttributeError
    # ('NoneType' object has no attribute 'b') and f ran eagerly
    assert_like_eager(program('''
def f(x, y, w, k):
    o = Slotted(w)
    OUT.append((hasattr(o, 'b'), hasattr(o, '__dict__')))
    try:
        OUT.append(o.b)
    except AttributeError as e:
        OUT.append(str(e))
    o.b = o.a * 2
    return o.a + o.b
'''))


def test_fuzz_assigning_a_name_that_is_not_a_slot_inside_try():
    # fuzz 2026:129: o.c = 1 on a __slots__ object was recorded, then replayed after the graph, outside the
    # user's try: AttributeError reached the caller and the rest of f never ran
    assert_like_eager(program('''
def f(x, y, w, k):
    o = Slotted(y)
    try:
        o.c = 1
    except AttributeError as e:
        OUT.append(str(e))
    STATE['n'] = STATE.get('n', 0) + 1
    return o.a * k
'''))


def test_fuzz_random_op_with_a_generator_object():
    # fuzz 2026:48: torch.rand(shape, generator=g) put the Generator in the graph as a constant (invalid
    # syntax in the generated code: f ran eagerly with a warning); a Generator's state is an effect: it breaks
    assert_like_eager(program('''
def f(x, y, w, k):
    g = torch.Generator().manual_seed(k)
    a = torch.rand(y.shape, generator=g)
    b = torch.rand(y.shape, generator=g)
    OUT.append(g.initial_seed())
    return a + b + x
''', ks=(1, 2, 3)))


@pytest.mark.xfail(strict=True, reason="side effects traced before an op that raises only when the graph runs "
                                       "are replayed after the graph, so they are lost (torch.compile loses "
                                       "them too)")
def test_fuzz_side_effect_before_an_op_that_raises_at_run_time():
    # fuzz 7:128 (there through one of torch's internal asserts): eager appends to OUT, then raises IndexError
    assert_like_eager(program('''
def f(x, y, w, k):
    OUT.append(k)
    STATE['n'] = STATE.get('n', 0) + 1
    return w[torch.tensor([0, 5])]
''', ks=(1, 2, 3)))


@pytest.mark.xfail(strict=True, reason="an index out of bounds raises only when the graph runs, after the trace "
                                       "left the user's try block")
def test_fuzz_index_out_of_bounds_inside_try():
    # fuzz 7:52: t1 has shape (1, n, n); t1[torch.tensor([0, 1])] += w raises IndexError in eager, in the try
    assert_like_eager(program('''
def f(x, y, w, k):
    t1 = x * 2
    t1.unsqueeze_(0)
    try:
        t1[torch.tensor([0, 1])] += w
    except IndexError as e:
        OUT.append(str(e))
    return t1
''', n=3))
