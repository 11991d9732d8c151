"""Divergences found by running PyTorch's own Dynamo tests through stillframe (issue 16)."""

import pytest
import torch
from torch import nn

import stillframe
from stillframe.check.parity import assert_parity


def legacy_tensor_types(x, y):
    return (x + 1, isinstance(x, torch.FloatTensor), isinstance(y, torch.LongTensor),
            isinstance(x, (torch.LongTensor, torch.DoubleTensor)), isinstance(y, torch.FloatTensor))


def test_isinstance_of_a_legacy_tensor_type_checks_dtype_and_device():
    # was False for every tensor: the check asked whether torch.Tensor subclasses torch.FloatTensor
    assert_parity(legacy_tensor_types, lambda: (torch.randn(2), torch.arange(3)), calls=2, fullgraph=True)


class MethodBeforeSubmodule(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self._modules["relu"] = nn.ReLU()  # a submodule under the name of a method of the class

    def relu(self, x):
        return x * 1.2

    def forward(self, x):
        return self.relu(self.lin(x))


def test_a_class_attribute_wins_over_a_submodule_of_the_same_name():
    # as Python: nn.Module.__getattr__ (the registries) is asked only when ordinary lookup fails; the trace
    # called the ReLU submodule instead of the method
    assert_parity(MethodBeforeSubmodule(), lambda: (torch.randn(2),), calls=2, fullgraph=True)


def test_saved_tensor_hooks_run_as_often_as_in_eager():
    # the fake tensors autograd saved while tracing went through the user's pack hook too (6 packs, not 3)
    def f(x, w):
        return (x * w).sin().sum()

    counts = []
    for fn in (f, stillframe.compile(f, backend="eager")):
        for _ in range(2):
            packed = []
            x, w = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
            with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(1) or t, lambda t: t):
                y = fn(x, w)
            y.backward()
            counts.append((len(packed), x.grad is not None))
    assert counts[2:] == counts[:2]


def numpy_scalar_arguments(a, b, c):
    return a + (4096 % b), a * c, (a.int() + b).dtype


def test_numpy_scalars_in_tensor_ops():
    # the graph's code named np.int64(0), and 'np' is not defined there (an internal NameError, every call)
    import numpy as np

    assert_parity(numpy_scalar_arguments, lambda: (torch.ones(2), np.int64(8), np.float32(2.5)), calls=2,
                  fullgraph=True)


class Base:
    pass


class Derived(Base):
    pass


def subclasses_of_a_class(x):
    subs = Base.__subclasses__()
    return x + len(subs), subs


def test_a_metaclass_attribute_of_a_class_is_read():
    # Base.__subclasses__ raised an AttributeError inside the trace (then ran eagerly; under fullgraph an error)
    assert_parity(subclasses_of_a_class, lambda: (torch.ones(2),), calls=2)


class StaticForward(nn.Module):
    @staticmethod
    def forward(x):
        return x * torch.sigmoid(x)


class HoldsStaticForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = StaticForward()

    def forward(self, x):
        return self.act(x) + 1


def test_a_submodule_with_a_staticmethod_forward():
    # its forward was called with the module as an extra first argument (a TypeError, then an eager fallback)
    assert_parity(HoldsStaticForward(), lambda: (torch.randn(3),), calls=2, fullgraph=True)


def size_numel(a):
    return a + 1, torch.Size([10, 8]).numel(), a.size().numel(), a.shape.numel()


def device_value(a):
    return a.to(torch.device("cpu")) + 1


def class_name_of_a_tensor(a):
    return a + 1 if f"{a.__class__.__name__} foo".startswith("Tensor") else a


def typing_annotation_on_an_inner_function(a):
    import typing

    def inner(y: typing.List[int], f: typing.Callable[[int], int]) -> typing.Optional[torch.Tensor]:
        return a + len(y)

    return inner([1], abs)


def jit_annotate(a):
    import typing

    return torch.jit.annotate(typing.Any, a + 1) + 2


def slice_argument(a, s):
    return a[s] + 1


@pytest.mark.parametrize("fn, make_args", [
    (size_numel, lambda: (torch.randn(2, 3),)),
    (device_value, lambda: (torch.randn(2, 3),)),
    (class_name_of_a_tensor, lambda: (torch.randn(2, 3),)),
    (typing_annotation_on_an_inner_function, lambda: (torch.randn(2, 3),)),
    (jit_annotate, lambda: (torch.randn(2, 3),)),
    (slice_argument, lambda: (torch.randn(5), slice(0, 2, 1))),
], ids=lambda v: getattr(v, "__name__", ""))
def test_captured_in_one_graph(fn, make_args):
    # each was a graph break (an error under fullgraph) where torch.compile captures one graph
    assert_parity(fn, make_args, calls=2, fullgraph=True)
