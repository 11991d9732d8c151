"""Higher-order ops inside one another (issue 13): an autograd.Function, a checkpoint or a vmap around or
inside a cond, grad of a cond; each is captured where torch can run it, and runs for real where not."""

import pytest
import torch
import torch.utils.checkpoint as ck
from torch.func import grad, vmap

from stillframe.check.parity import assert_parity

from .autograd_programs import Exp, Scale


def af_in_cond(x):
    return torch.cond(x.sum() > 0, lambda a: Scale.apply(a, 2.0).sin(), lambda a: Exp.apply(a) * 1, (x,))


def ckpt_in_cond(x):
    return torch.cond(x.sum() > 0, lambda a: ck.checkpoint(torch.sin, a * 1, use_reentrant=False) * 1,
                      lambda a: a.cos(), (x,))


def vmap_of_cond(x):
    return vmap(lambda a: torch.cond(a.sum() > 0, lambda b: b.sin(), lambda b: b.cos(), (a,)))(x)


def cond_in_ckpt(x):
    """The checkpoint op recomputes under a dispatch mode cond has no rule for: checkpoint runs for real."""
    return ck.checkpoint(lambda a: torch.cond(a.sum() > 0, lambda b: b.sin(), lambda b: b.cos(), (a,)) * 2, x,
                         use_reentrant=False)


def grad_of_cond(x):
    """functorch's grad has no rule for cond (KeyError): the transform runs for real."""
    return grad(lambda a: torch.cond(a.sum() > 0, lambda b: b.sin().sum(), lambda b: b.cos().sum(), (a,)))(x)


def af_in_vmap(x):
    """A Function without vmap support: eager raises, and so does the real step."""
    return vmap(lambda a: Exp.apply(a))(x)


CASES = {af_in_cond: 1, ckpt_in_cond: 1, vmap_of_cond: 1, cond_in_ckpt: 0, grad_of_cond: 0, af_in_vmap: 0}


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_nested_higher_order_ops(fn, backend):
    report = assert_parity(fn, lambda: (torch.randn(3, 4, requires_grad=True),), calls=2, backend=backend)
    entries = [e for es in report.compiled.all_cache_entries().values() for e in es]
    breaks = [e.graph_break.kind for e in entries if e.graph_break]
    assert breaks == ([] if CASES[fn] else ["higher_order"])
