"""Zero-argument ``super()`` in classmethods, ``autograd.Function`` subclasses and real steps (issue 11: the real
step raised ``RuntimeError: super(): __class__ cell not found``), and module globals of code run by ``exec``."""

import pytest
import torch

from stillframe.check.parity import assert_parity
from stillframe.rules.disable import disable


@disable
def graph_break():
    """Runs for real: the code after it resumes in a real step, then a new trace."""


class Base:
    scale = 2

    @classmethod
    def make(cls, x):
        return x * cls.scale


class Child(Base):
    scale = 3

    @classmethod
    def make(cls, x):
        y = super().make(x)
        graph_break()
        return super().make(y) + 1


def classmethod_super_across_a_break(x):
    return Child.make(x)


def test_zero_argument_super_in_a_classmethod_binds_the_class_across_a_break():
    report = assert_parity(classmethod_super_across_a_break, lambda: (torch.randn(3),), calls=2)
    assert report.warnings == []


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 + x * 0


class LoggedDouble(Double):
    @classmethod
    def apply(cls, x):
        graph_break()
        return super().apply(x)


def autograd_function_super_apply(x):
    return (LoggedDouble.apply(x) * x).sum()


def test_zero_argument_super_apply_of_an_autograd_function_subclass():
    assert_parity(autograd_function_super_apply, lambda: (torch.randn(4, requires_grad=True),), calls=2)


class Point:
    def __init__(self, v):
        self.v = v

    def scaled(self, x):
        graph_break()
        return x * self.v


class Point3(Point):
    def scaled(self, x):
        graph_break()
        return super().scaled(x) + 1


def method_super_in_a_real_step(x):
    return Point3(3).scaled(x)


def test_zero_argument_super_in_a_method_resumed_after_a_break():
    assert_parity(method_super_in_a_real_step, lambda: (torch.randn(3),), calls=2)


def super_of_the_wrong_type(x):
    return super(Point3, Base()).scaled(x)


def test_super_of_an_object_not_of_the_type_raises_as_eager():
    assert_parity(super_of_the_wrong_type, lambda: (torch.randn(3),))


SOURCE = """
import math
import torch

def scaled_by_pi(x, g):
    g()
    return x * math.pi + torch.ones(()).sum()
"""


@pytest.mark.parametrize("name", ["__main__", "not_a_module", None])
def test_globals_of_exec_code_are_its_own_in_real_steps(name):
    namespace = {} if name is None else {"__name__": name}
    exec(compile(SOURCE, "<fuzz>", "exec"), namespace)
    assert_parity(lambda x: namespace["scaled_by_pi"](x, graph_break), lambda: (torch.randn(2),), calls=2)
