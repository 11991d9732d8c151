"""Liveness of fast locals (stillframe/bytecode/liveness.py): what a graph break rebuilds.

Each case names the locals that must be live before the call of ``mark()`` in a function, read from the
function's own bytecode on this Python version; a local reported dead there would be missing when the code
after a break reads it, so every read the code can make keeps it live.
"""

from __future__ import annotations

import pytest
import torch

import stillframe
from stillframe.bytecode.liveness import live_locals
from stillframe.bytecode.reader import read


def mark():
    return None


def _at_mark(fn) -> frozenset | None:
    """The live set before the ``CALL`` that calls ``mark`` (the first call after loading it)."""
    code = read(fn.__code__)
    loads = [i for i in code.instructions if i.opname == "LOAD_GLOBAL" and i.argval == "mark"]
    assert len(loads) == 1
    call = next(i for i in code.instructions[loads[0].index:] if i.opname == "CALL")
    return live_locals(code, call.index)


def _straight(x, y):
    a = x + 1
    b = y + 1
    mark()
    return b


def _loop(x, n):
    total = x
    for i in range(n):
        mark()
        total = total + i
    return total


def _handler(x):
    a = x + 1
    try:
        mark()
        b = a
    except Exception:
        return a
    return b


def _deleted(x):
    a = x + 1
    mark()
    del a
    return x


def _reads_locals(x):
    a = x + 1
    mark()
    return locals()


def _overwritten(x):
    a = x + 1
    mark()
    a = 2
    return a


class _Base:
    def scale(self, t):
        return t


class _Child(_Base):
    def scale(self, t):
        u = t * 2
        mark()
        return super().scale(u)


@pytest.mark.parametrize("fn, live", [
    (_straight, {"b"}),  # x, y and a are not read again
    (_loop, {"total", "i"}),  # the back edge reads total; i is read after the call (n: range(n) ran already)
    (_handler, {"a"}),  # read on both paths
    (_deleted, {"a", "x"}),  # del reads it (it raises when unbound)
    (_overwritten, set()),
    (_Child.scale, {"self", "u"}),  # zero-argument super() reads the first argument's slot
])
def test_live_locals_before_a_call(fn, live):
    assert _at_mark(fn) == frozenset(live)


def test_code_that_reads_its_locals_by_name_keeps_all():
    assert _at_mark(_reads_locals) is None


def _dead_tensor_across_a_break(x, w):
    t = x * 2  # dead after this line: not a graph output
    torch.autograd.backward([w.sum()])  # a graph break (runs for real)
    return w * 3


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_dead_tensor_local_is_not_an_output_of_the_graph_before_a_break(backend):
    """The graph before the break outputs what the code after it reads (``w.sum()`` for the real step), not
    ``t``: as an output of AOTAutograd's single autograd node it gave ``x`` a zero ``.grad`` where eager leaves
    ``None``."""
    seen = []
    for fn in (_dead_tensor_across_a_break, stillframe.compile(_dead_tensor_across_a_break, backend=backend)):
        x = torch.randn(3, requires_grad=True)
        w = torch.randn(3, requires_grad=True)
        out = fn(x, w)
        seen.append((x.grad, w.grad.clone(), out.detach()))
    (eager_xg, eager_wg, eager_out), (got_xg, got_wg, got_out) = seen
    assert eager_xg is None and got_xg is None
    torch.testing.assert_close(got_wg, eager_wg, rtol=0, atol=0)
    assert got_out.shape == eager_out.shape
