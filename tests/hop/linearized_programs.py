"""torch.func.vjp, jvp and linearize programs (issue 13): torch.compile 2.13 captures vjp and jvp in one graph
and breaks on linearize."""

import torch
from torch.func import jvp, linearize, vjp

W = torch.randn(3, requires_grad=True)


def vjp_sin(x):
    out, vjp_fn = vjp(torch.sin, x)
    return out, vjp_fn(torch.ones_like(out))


def vjp_two_primals(x, y):
    out, vjp_fn = vjp(lambda a, b: (a * b).sum(0), x, y)
    gx, gy = vjp_fn(torch.ones_like(out))
    return out, gx, gy


def vjp_tuple_output_closed_over(x):
    out, vjp_fn = vjp(lambda a: (a * W, (a + W).cos()), x)
    return out, vjp_fn((torch.ones(3), torch.full((3,), 2.0)))


def vjp_has_aux(x):
    out, vjp_fn, aux = vjp(lambda a: (a.sin().sum(), a.cos()), x, has_aux=True)
    return out, aux, vjp_fn(torch.tensor(1.0))


def vjp_fn_called_twice(x):
    out, vjp_fn = vjp(lambda a: a.exp() * 2, x)
    (g1,) = vjp_fn(torch.ones(3))
    (g2,) = vjp_fn(out)
    return g1 + g2


def jvp_sin(x, t):
    return jvp(torch.sin, (x,), (t,))


def jvp_two_primals_closed_over(x, y):
    return jvp(lambda a, b: (a * b * W).tanh(), (x, y), (torch.ones(3), torch.zeros(3)))


def jvp_has_aux(x, t):
    out, tangent, aux = jvp(lambda a: (a.sin(), a.cos()), (x,), (t,), has_aux=True)
    return out, tangent, aux


def linearize_sin(x, t):
    w = W.detach()
    out, jvp_fn = linearize(lambda a: a.sin() * w, x)
    return out, jvp_fn(t), jvp_fn(t * 2)


def linearize_of_tensors_requiring_grad(x, t):
    out, jvp_fn = linearize(lambda a: a.sin() * W, x)
    return out, jvp_fn(t)


PROGRAMS = {
    vjp_sin: lambda: (torch.randn(3, requires_grad=True),),
    vjp_two_primals: lambda: (torch.randn(2, 3, requires_grad=True), torch.randn(2, 3)),
    vjp_tuple_output_closed_over: lambda: (torch.randn(3, requires_grad=True),),
    vjp_has_aux: lambda: (torch.randn(3, requires_grad=True),),
    vjp_fn_called_twice: lambda: (torch.randn(3, requires_grad=True),),
    jvp_sin: lambda: (torch.randn(3, requires_grad=True), torch.randn(3)),
    jvp_two_primals_closed_over: lambda: (torch.randn(3, requires_grad=True), torch.randn(3)),
    jvp_has_aux: lambda: (torch.randn(3), torch.randn(3)),
    linearize_sin: lambda: (torch.randn(3), torch.randn(3, requires_grad=True)),
}
#: torch.compile's graph count for each (torch 2.13: linearize breaks at disallow_in_graph, and again inside)
TORCH_COMPILE_GRAPHS = {fn: 4 if fn is linearize_sin else 1 for fn in PROGRAMS}
