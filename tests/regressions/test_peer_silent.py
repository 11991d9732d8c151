"""Silent wrong results found by running PyTorch's own Dynamo tests through stillframe (issue 16)."""

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
