"""autograd.Function programs (issue 13's held-out kinds): custom forward/backward, ctx.save_for_backward,
non-tensor arguments, two outputs, straight-through estimators, gradient clipping, zero-argument super()."""

import torch

from stillframe import compat


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ctx.k + x * 0, None


def scale(x):
    return Scale.apply(x, 3.0).sin().sum()


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y


def exp_twice(x):
    return Exp.apply(Exp.apply(x) * 0.1) + x


class SplitTwo(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w, x + w

    @staticmethod
    def backward(ctx, ga, gb):
        x, w = ctx.saved_tensors
        return ga * w + gb, ga * x + gb


def two_outputs(x, w):
    a, b = SplitTwo.apply(x, w)
    return (a * b).sum()


class RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x * 4) / 4

    @staticmethod
    def backward(ctx, grad):
        return grad


def straight_through(x):
    return (RoundSTE.apply(x.tanh()) * x).sum()


class ClipGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bound: float):
        ctx.bound = bound
        return x.view_as(x) * 1

    @staticmethod
    def backward(ctx, grad):
        return grad.clamp(-ctx.bound, ctx.bound), None


def clip_grad(x):
    return (ClipGrad.apply(x * 10, bound=0.5) ** 2).sum()


class Base(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class Child(Base):
    @staticmethod
    def forward(ctx, x):
        return super(Child, Child).forward(ctx, x) + 1

    @classmethod
    def apply(cls, *args):
        return super().apply(*args)


def zero_arg_super(x):
    return Child.apply(x).pow(2).sum()


class MarkND(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        idx = x.argmax()
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(x, idx)
        return x * 2, idx

    @staticmethod
    def backward(ctx, grad, _gidx):
        x, idx = ctx.saved_tensors
        g = grad * 2
        return g


def non_differentiable(x):
    y, i = MarkND.apply(x)
    return y.sum() + i


class NeedsGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = g @ w.t() if ctx.needs_input_grad[0] else None
        gw = x.t() @ g if ctx.needs_input_grad[1] else None
        return gx, gw


def needs_input_grad(x, w):
    return NeedsGrad.apply(x, w).relu().sum()


class Once(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sigmoid()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = x.sigmoid()
        return g * s * (1 - s)


def once_differentiable(x):
    return Once.apply(x).sum()


PROGRAMS = {
    scale: lambda: (torch.randn(4, requires_grad=True),),
    exp_twice: lambda: (torch.randn(4, requires_grad=True),),
    two_outputs: lambda: (torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)),
    straight_through: lambda: (torch.randn(5, requires_grad=True),),
    clip_grad: lambda: (torch.randn(5, requires_grad=True),),
    zero_arg_super: lambda: (torch.randn(3, requires_grad=True),),
    non_differentiable: lambda: (torch.randn(4, requires_grad=True),),
    needs_input_grad: lambda: (torch.randn(2, 3, requires_grad=True), torch.randn(3, 2)),
    once_differentiable: lambda: (torch.randn(4, requires_grad=True),),
}


W = torch.randn(4, requires_grad=True)


class UsesGlobal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x  # stashed on ctx, not saved
        ctx.doubled = x * 2
        return x * W

    @staticmethod
    def backward(ctx, grad):
        return grad * W + ctx.doubled - ctx.x * 2


def global_and_stashed(x):
    return UsesGlobal.apply(x).sum()


class Affine(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.t() + bias

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        return g @ weight, g.t() @ x, g.sum(0)


class AffineModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3, 4))
        self.bias = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        for _ in range(2):
            x = Affine.apply(x, self.weight[:, :x.shape[1]].contiguous(), self.bias).tanh()
            x = torch.cat([x, x[:, :1]], dim=1)
        return x.sum()


class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


def returns_input(x):
    return Identity.apply(x) * 2


LOG = []


class Logs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        LOG.append(1)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def side_effect_in_forward(x):
    return Logs.apply(x).sum()


class TooMany(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2, g


def wrong_gradient_count(x):
    return TooMany.apply(x).sum()


class Dirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


def mark_dirty(x):
    return Dirty.apply(x.clone()).sum()


class MulSetup(torch.autograd.Function):
    @staticmethod
    def forward(x, k):
        return x * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, k = inputs
        ctx.save_for_backward(x)
        ctx.k = k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ctx.k + x * 0, None


def setup_context_style(x):
    return MulSetup.apply(x.tanh(), 3.0).sum()


def clip_grad_positional(x):
    return (ClipGrad.apply(x * 10, 0.5) ** 2).sum()


class NoMaterialize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, ga, gb):
        if gb is None:
            return ga * 2 if ga is not None else None
        return (ga * 2 if ga is not None else 0) + gb * 3


def no_materialize(x):
    a, _ = NoMaterialize.apply(x)
    return a.sum()


def under_no_grad(x):
    with torch.no_grad():
        y = Scale.apply(x, 2.0)
    return y + x


BREAKS = {
    returns_input: lambda: (torch.randn(3, requires_grad=True),),
    side_effect_in_forward: lambda: (torch.randn(3, requires_grad=True),),
    wrong_gradient_count: lambda: (torch.randn(3, requires_grad=True),),
    no_materialize: lambda: (torch.randn(3, requires_grad=True),),
}
PROGRAMS.update({
    mark_dirty: lambda: (torch.randn(3, requires_grad=True),),
    setup_context_style: lambda: (torch.randn(4, requires_grad=True),),
    clip_grad_positional: lambda: (torch.randn(5, requires_grad=True),),
    global_and_stashed: lambda: (torch.randn(4, requires_grad=True),),
    under_no_grad: lambda: (torch.randn(4, requires_grad=True),),
})
if not compat.autograd_function_apply_takes_kwargs():
    # torch 2.11: eager's apply raises TypeError on bound=0.5 (test_keyword_arguments_to_apply_as_eager checks it)
    del PROGRAMS[clip_grad]
