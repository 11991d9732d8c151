"""Tests of the eager-parity checker itself, with hand-written "compiled" callables (no stillframe tracing).

Each wrong callable below differs from eager in exactly one observable way;
the checker must name it. The same checker must accept the eager function as
its own compiled version.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import warnings

import pytest
import torch

from stillframe.check import ParityReport, assert_parity, compare
from stillframe.errors import StillframeWarning


def scale(x, y):
    return x * 2 + y


def make_xy():
    return torch.randn(3, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)


def failing(report: ParityReport, *needles: str) -> str:
    """Assert the report failed and that its text mentions every needle; return the text."""
    assert not report.ok, report.format()
    text = report.format()
    for needle in needles:
        assert needle in text, f"{needle!r} not in:\n{text}"
    return text


class Affine(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x):
        return torch.tanh(self.linear(x))


# ---------------------------------------------------------------- it accepts the eager program itself


@pytest.mark.parametrize("calls", [1, 3])
def test_passes_for_fn_itself(calls):
    report = assert_parity(scale, make_xy, compiled=scale, calls=calls)
    assert report.ok and report.mismatches == []
    assert len(report.eager_results) == calls
    assert isinstance(report.compiled_result, torch.Tensor)


def test_passes_for_module_itself_and_a_deep_copy():
    module = Affine()
    assert_parity(module, lambda: (torch.randn(2, 4),), compiled=module)
    assert_parity(module, lambda: (torch.randn(2, 4),), compiled=copy.deepcopy(module), calls=2)


def test_random_inputs_are_identical_on_both_sides_and_fresh_per_call():
    seen = []

    def make():
        x = torch.randn(5)
        seen.append(x.clone())
        return (x,)

    assert_parity(lambda x: x.exp(), make, compiled=lambda x: x.exp(), calls=2)
    assert len(seen) == 4
    assert torch.equal(seen[0], seen[1]) and torch.equal(seen[2], seen[3])
    assert not torch.equal(seen[0], seen[2])


def test_make_args_forms_kwargs_and_call_index():
    def f(x, *, alpha=1.0):
        return x * alpha

    assert_parity(f, lambda: ((torch.randn(3),), {"alpha": 3.0}), compiled=f)
    shapes = []

    def make(i):
        shapes.append(i + 2)
        return (torch.randn(i + 2),)

    assert_parity(f, make, compiled=f, calls=3)
    assert shapes == [2, 2, 3, 3, 4, 4]
    # a bare tensor, or a list, is one positional argument
    assert_parity(f, lambda: torch.randn(2), compiled=f)
    assert_parity(lambda xs: xs[0] + xs[1], lambda: [torch.randn(2), torch.randn(2)],
                  compiled=lambda xs: xs[0] + xs[1])


def test_passes_for_nested_results_with_scalars_and_identity():
    def f(x, y):
        z = x + y
        Pair = collections.namedtuple("Pair", "a b")
        return {"z": z, "again": z, "x": x, "meta": (x.shape, x.dtype, 3, 2.5, "s", None), "p": Pair(z, [y])}

    # a namedtuple type made per call is a different type each time: use one shared type instead
    Pair = collections.namedtuple("Pair", "a b")

    def g(x, y):
        z = x + y
        return {"z": z, "again": z, "x": x, "meta": (x.shape, x.dtype, 3, 2.5, "s", None), "p": Pair(z, [y])}

    assert_parity(g, make_xy, compiled=g)
    report = compare(f, make_xy, compiled=f)
    failing(report, "type differs")


@dataclasses.dataclass
class _Batch:
    x: torch.Tensor
    n: int


def test_dataclasses_holding_tensors_are_compared_field_by_field():
    # a dataclass's generated __eq__ compares its fields as tuples, and a tensor field refuses bool(): the
    # checker said "cannot compare" for equal values
    def f(x):
        return _Batch(x * 2, 3)

    assert_parity(f, lambda: (torch.randn(3),), compiled=f)
    failing(compare(f, lambda: (torch.randn(3),), compiled=lambda x: _Batch(x * 2 + 1e-3, 3)), "result.x",
            "values differ")
    failing(compare(f, lambda: (torch.randn(3),), compiled=lambda x: _Batch(x * 2, 4)), "result.n")


def test_passes_when_both_raise_the_same_error():
    def f(x):
        return x @ torch.randn(5, 2)

    report = assert_parity(f, lambda: (torch.randn(3, 4),), compiled=f)
    assert isinstance(report.eager_result, RuntimeError)


# ---------------------------------------------------------------- it catches each kind of difference


def test_catches_wrong_value():
    failing(compare(scale, make_xy, compiled=lambda x, y: x * 2 + y + 1e-3), "result", "values differ")


def test_tolerances_are_honoured_for_floats_but_not_for_integers():
    assert_parity(scale, make_xy, compiled=lambda x, y: x * 2 + y + 1e-6, atol=1e-4, rtol=0)

    def ints():
        return (torch.randint(0, 10, (4,)),)

    failing(compare(lambda x: x * 1, ints, compiled=lambda x: x + 1, atol=10, rtol=10), "values differ")
    failing(compare(lambda x: x > 0, ints, compiled=lambda x: x >= 0), "values differ")


def test_catches_wrong_dtype_and_shape():
    failing(compare(scale, make_xy, compiled=lambda x, y: (x * 2 + y).double()), "dtype differs")
    failing(compare(scale, make_xy, compiled=lambda x, y: (x * 2 + y)[None]), "shape differs")


def test_catches_wrong_requires_grad():
    failing(compare(scale, make_xy, compiled=lambda x, y: (x * 2 + y).detach()), "requires_grad differs")


def test_catches_wrong_is_leaf_and_grad_fn():
    failing(compare(scale, make_xy, compiled=lambda x, y: (x * 2 + y).detach().requires_grad_()),
            "is_leaf differs", "grad_fn is None differs")


def _view_whose_is_leaf_raises(x, y):
    with torch.no_grad():
        v = y.detach().unsqueeze(0)  # a no_grad view of a tensor that then takes history in place
    base = v._base
    base.mul_(x)
    return [v]


def test_a_view_whose_autograd_reads_raise_is_compared_by_the_error():
    """Reading ``is_leaf`` of a view made under ``no_grad`` whose base was then written in grad mode raises in
    eager: both sides' errors are compared as values (fuzz 32:672 made the checker itself fail)."""
    assert compare(_view_whose_is_leaf_raises, make_xy, compiled=_view_whose_is_leaf_raises, grad=False).ok
    failing(compare(_view_whose_is_leaf_raises, make_xy, grad=False,
                    compiled=lambda x, y: [y.detach().unsqueeze(0) * x]), "is_leaf differs")


def test_catches_wrong_stride():
    def transposed_layout(x, y):
        out = x * 2 + y
        return out.t().contiguous().t()

    failing(compare(scale, make_xy, compiled=transposed_layout), "stride differs")


def test_strides_of_size_one_dims_do_not_matter():
    def f(x):
        return x.sum(dim=1, keepdim=True)

    def g(x):
        return f(x).as_strided((3, 1), (1, 7))

    assert_parity(f, lambda: (torch.randn(3, 4),), compiled=g)


def test_catches_missing_input_mutation():
    def eager(x):
        x.add_(1)
        return x * 2

    def compiled(x):
        return (x + 1) * 2

    failing(compare(eager, lambda: (torch.randn(3),), compiled=compiled), "args[0] after the call", "values differ")


def test_catches_missing_metadata_mutation():
    def eager(x, y):
        x.t_()
        y.t_()
        return (x + y,)

    def compiled(x, y):
        return (x.t() + y.t(),)

    report = compare(eager, lambda: (torch.randn(2, 3), torch.randn(2, 3)), compiled=compiled)
    failing(report, "args[0] after the call: shape differs", "args[1] after the call: shape differs")
    assert not [m for m in report.mismatches if m.startswith("result")]  # the result itself matched


def test_catches_storage_offset_and_requires_grad_of_inputs():
    def eager(x):
        x.set_(x.untyped_storage(), 1, (2,), (1,))
        return None

    def compiled(x):
        x.set_(x.untyped_storage(), 0, (2,), (1,))
        return None

    failing(compare(eager, lambda: (torch.arange(4.0),), compiled=compiled), "storage_offset differs")

    def eager_rg(x):
        x.requires_grad_()

    failing(compare(eager_rg, lambda: (torch.randn(2),), compiled=lambda x: None), "requires_grad differs")


@pytest.mark.parametrize(
    "compiled, needle",
    [
        (lambda x: (_ for _ in ()).throw(RuntimeError("negative input")), "exception type differs"),
        (lambda x: (_ for _ in ()).throw(ValueError("other message")), "exception message differs"),
        (lambda x: x, "eager raised ValueError: negative input ; compiled returned normally"),
    ],
    ids=["type", "message", "missing"],
)
def test_catches_wrong_exception(compiled, needle):
    def eager(x):
        raise ValueError("negative input")

    failing(compare(eager, lambda: (torch.randn(2),), compiled=compiled), needle)


def test_catches_exception_raised_only_by_compiled():
    def compiled(x):
        raise RuntimeError("tracer exploded")

    failing(compare(lambda x: x + 1, lambda: (torch.randn(2),), compiled=compiled),
            "compiled raised RuntimeError: tracer exploded ; eager returned normally")


def test_catches_wrong_grad():
    def eager(x, y):
        return x * 2 + y

    def compiled(x, y):  # same value, same requires_grad, but d/dx is 1 instead of 2
        return x.detach() * 2 + (x - x.detach()) + y

    failing(compare(eager, make_xy, compiled=compiled), "grad of args[0]", "values differ")


def test_catches_grad_none_vs_tensor():
    failing(compare(scale, make_xy, compiled=lambda x, y: x * 2 + y.detach()),
            "grad of args[1]: eager a tensor, compiled None")


def test_catches_wrong_parameter_grad():
    eager = Affine()
    compiled = copy.deepcopy(eager)
    compiled.forward = lambda x: torch.tanh(x @ compiled.linear.weight.detach().t() + compiled.linear.bias)
    failing(compare(eager, lambda: (torch.randn(2, 4),), compiled=compiled),
            "grad of self.linear.weight: eager a tensor, compiled None")


def test_grad_false_skips_gradients():
    assert_parity(scale, make_xy, compiled=lambda x, y: x.detach() * 2 + (x - x.detach()) + y, grad=False)


def test_catches_missing_module_state_mutation():
    class Counting(Affine):
        def forward(self, x):
            self.steps.add_(1)
            self.calls = getattr(self, "calls", 0) + 1
            return super().forward(x)

    eager = Counting()
    compiled = Affine()
    compiled.load_state_dict(eager.state_dict())
    text = failing(compare(eager, lambda: (torch.randn(2, 4),), compiled=compiled), "self.steps after the call")
    assert "self.calls: attribute present on one side only" in text


@pytest.mark.parametrize(
    "eager, compiled, needle",
    [
        (lambda x: x, lambda x: x.clone(), "eager returns input args[0], compiled returns a new object"),
        (lambda x: (x * 2,) * 2, lambda x: (x * 2, x * 2),
         "eager returns the same object as result[0], compiled returns a new object"),
        (lambda x: x.view(-1), lambda x: x.reshape(-1).clone(), "aliasing differs"),
        (lambda x: [x + 1], lambda x: (x + 1,), "type differs"),
        (lambda x: {"a": x + 1, "b": 1}, lambda x: {"b": 1, "a": x + 1}, "dict keys differ"),
        (lambda x: (x + 1, 2), lambda x: (x + 1, 2.0), "type differs"),
        (lambda x: (x + 1, x.shape), lambda x: (x + 1, torch.Size([9])), "result[1]"),
        (lambda x: None, lambda x: x + 1, "result: eager None"),
    ],
    ids=["input-returned", "same-twice", "view-of-input", "list-vs-tuple", "dict-order", "int-vs-float",
         "size", "none"],
)
def test_catches_broken_structure_and_identity(eager, compiled, needle):
    failing(compare(eager, lambda: (torch.randn(2, 3),), compiled=compiled), needle)


def test_identity_of_returned_parameter():
    class ReturnsWeight(Affine):
        def forward(self, x):
            return self.linear(x), self.linear.weight

    eager = ReturnsWeight()
    wrong = copy.deepcopy(eager)
    wrong.forward = lambda x: (wrong.linear(x), wrong.linear.weight * 1)
    assert_parity(eager, lambda: (torch.randn(2, 4),), compiled=copy.deepcopy(eager))
    failing(compare(eager, lambda: (torch.randn(2, 4),), compiled=wrong), "eager returns self.linear.weight")


def test_mismatch_on_a_later_call_is_prefixed_with_its_index():
    count = []

    def compiled(x):
        count.append(1)
        return x + (1 if len(count) == 2 else 0)

    text = failing(compare(lambda x: x + 0, lambda: (torch.randn(2),), compiled=compiled, calls=3), "call 1: result")
    assert "call 0:" not in text and "call 2:" not in text


# ---------------------------------------------------------------- warnings and fallbacks


def warns_fallback(x):
    warnings.warn("stillframe: fell back to eager at test.py:1", StillframeWarning)
    return x + 1


def test_unexpected_fallback_warning_is_a_mismatch():
    report = compare(lambda x: x + 1, lambda: (torch.randn(2),), compiled=warns_fallback)
    failing(report, "unexpected StillframeWarning", "test.py:1")
    assert len(report.warnings) == 1
    assert issubclass(report.warnings[0].category, StillframeWarning)


def test_expected_fallback():
    report = assert_parity(lambda x: x + 1, lambda: (torch.randn(2),), compiled=warns_fallback,
                           expect_fallback=True, calls=2)
    assert len(report.warnings) == 2
    failing(compare(lambda x: x + 1, lambda: (torch.randn(2),), compiled=lambda x: x + 1, expect_fallback=True),
            "expected a StillframeWarning")


def test_other_warnings_are_passed_on():
    def compiled(x):
        warnings.warn("user warning", UserWarning)
        return x + 1

    with pytest.warns(UserWarning, match="user warning"):
        report = assert_parity(lambda x: x + 1, lambda: (torch.randn(2),), compiled=compiled)
    assert report.warnings == []


# ---------------------------------------------------------------- the default compile path and the report text


def test_default_compiled_deep_copies_a_module(monkeypatch):
    import stillframe

    received = {}

    def fake_compile(model, **kwargs):
        received["model"], received["kwargs"] = model, kwargs
        return model

    monkeypatch.setattr(stillframe, "compile", fake_compile, raising=False)
    module = Affine()
    assert_parity(module, lambda: (torch.randn(2, 4),), backend="aot_eager", fullgraph=True,
                  compile_kwargs={"dynamic": False})
    copied = received["model"]
    assert copied is not module and type(copied) is Affine
    assert received["kwargs"] == {"backend": "aot_eager", "fullgraph": True, "dynamic": False}
    for (n1, p1), (n2, p2) in zip(module.named_parameters(), copied.named_parameters()):
        assert n1 == n2 and p1 is not p2 and torch.equal(p1, p2)


def test_format_shows_graphs_and_guards_and_bytecode():
    gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) + 1)

    class Entry:
        graph_module = gm
        guard_source = "def guard(L):\n    return L['x'].dtype == torch.float32"
        eager = False

    class FakeCompiled:
        def __call__(self, x):
            return torch.relu(x) + 2

        def cache_entries(self):
            return [Entry()]

    def f(x):
        return torch.relu(x) + 1

    report = compare(f, lambda: (torch.randn(3),), compiled=FakeCompiled())
    text = failing(report, "cache entries: 1", "L['x'].dtype", "relu", "bytecode of", "BINARY_OP")
    with pytest.raises(AssertionError) as info:
        assert_parity(f, lambda: (torch.randn(3),), compiled=FakeCompiled())
    assert str(info.value) == text


def test_format_survives_a_partial_api():
    class Broken:
        def __call__(self, x):
            return x

        def cache_entries(self):
            raise RuntimeError("not yet")

    report = compare(lambda x: x, lambda: (torch.randn(2),), compiled=Broken())
    assert report.ok
    assert "cache_entries() failed" in report.format()
    assert "parity OK" in compare(lambda x: x, lambda: (torch.randn(2),), compiled=lambda x: x).format()
