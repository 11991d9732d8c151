"""torch.func programs (issue 13): vmap (nested, in_dims/out_dims, in_dims=None), grad, grad_and_value,
jacrev, jacfwd, functional_call."""

import torch
from torch.func import functional_call, grad, grad_and_value, hessian, jacfwd, jacrev, vmap


def vmap_dot(x, y):
    return vmap(torch.dot)(x, y)


def vmap_nested(x, y):
    return vmap(vmap(lambda a, b: (a * b).sin()))(x, y)


def vmap_in_dims_none(x, w):
    return vmap(lambda a, b: a @ b, in_dims=(0, None))(x, w)


def vmap_out_dims(x):
    return vmap(lambda a: a.cos() * 2, in_dims=1, out_dims=1)(x)


def grad_of_loss(x, w):
    return grad(lambda w_: ((x @ w_).tanh() ** 2).sum())(w)


def grad_and_value_two(x, w):
    g, v = grad_and_value(lambda w_, x_: (x_ @ w_).sin().sum(), argnums=0)(w, x)
    return g, v


def jacobians(x):
    f = lambda a: a.sin() * a.sum()  # noqa: E731
    return jacrev(f)(x), jacfwd(f)(x)


def hessian_of_energy(x):
    return hessian(lambda a: (a.sin() * a).sum())(x)


def per_sample_grads(x, w):
    def loss(w_, xi):
        return (xi @ w_).pow(2).sum()

    return vmap(grad(loss), in_dims=(None, 0))(w, x)


LIN = torch.nn.Linear(3, 2)


def functional(x, weight):
    return functional_call(LIN, {"weight": weight, "bias": torch.zeros(2)}, (x,))


PROGRAMS = {
    vmap_dot: lambda: (torch.randn(4, 3), torch.randn(4, 3)),
    vmap_nested: lambda: (torch.randn(2, 3, 4), torch.randn(2, 3, 4)),
    vmap_in_dims_none: lambda: (torch.randn(5, 3), torch.randn(3, 2)),
    vmap_out_dims: lambda: (torch.randn(3, 4),),
    grad_of_loss: lambda: (torch.randn(4, 3), torch.randn(3, 2)),
    grad_and_value_two: lambda: (torch.randn(4, 3), torch.randn(3, 2)),
    jacobians: lambda: (torch.randn(3),),
    hessian_of_energy: lambda: (torch.randn(3),),
    per_sample_grads: lambda: (torch.randn(5, 3), torch.randn(3, 2)),
    functional: lambda: (torch.randn(4, 3), torch.randn(2, 3, requires_grad=True)),
}
