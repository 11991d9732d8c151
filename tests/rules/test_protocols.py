"""Protocol coverage (issue 10): every VariableTracker kind has, in every protocol table, a rule or a reason.

Adding a kind without deciding what each protocol does with it fails here, instead of
becoming a silent graph break at the end of an isinstance ladder.
"""

import pytest
import torch

import stillframe.runtime.compiler  # noqa: F401  (imports every rules module, so every protocol is built)
from stillframe.check.parity import assert_parity
from stillframe.errors import InternalError
from stillframe.rules.protocol import PROTOCOLS, Protocol, variable_kinds
from stillframe.variables.base import ConstantVariable, VariableTracker


def test_the_protocols_are_built():
    assert {p.name for p in PROTOCOLS} >= {"truthiness", "const_value", "is_const", "iteration", "subscript", "getattr", "call", "rebuild", "identity"}


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.name)
def test_every_kind_has_a_rule_or_a_reason(protocol):
    missing = sorted(k.__name__ for k in variable_kinds() if k not in protocol.rules and k not in protocol.reasons)
    assert missing == []


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.name)
def test_every_reason_says_something(protocol):
    assert all(len(reason) > 20 for reason in protocol.reasons.values())


def test_a_kind_with_neither_is_our_internal_error():
    class Unlisted(VariableTracker):
        pass

    try:
        protocol = Protocol("probe", lambda tx, var, reason: reason)
        protocol.rule(ConstantVariable)(lambda tx, var: var.value)
        assert protocol(None, ConstantVariable(3)) == 3
        with pytest.raises(InternalError, match="probe protocol has no rule and no reason for Unlisted"):
            protocol(None, Unlisted())
    finally:
        PROTOCOLS.remove(protocol)
        del Unlisted


class Plain:
    def __init__(self, v):
        self.v = v


def truth_of_plain_objects_and_functions(x):
    obj = Plain(2)
    fn = lambda: 1  # noqa: E731
    out = x
    if obj:  # a user object with neither __bool__ nor __len__ is true
        out = out + obj.v
    if fn:
        out = out * 2
    if slice(0, 1):
        out = out - 1
    return out


def test_truth_of_objects_without_bool_or_len_is_captured():
    report = assert_parity(truth_of_plain_objects_and_functions, lambda: (torch.randn(3),), calls=2)
    assert report.warnings == []
    assert all(e.graph_break is None for e in report.compiled.cache_entries())


def slice_and_range_fields(x):
    s, r = slice(1, None, 2), range(2, 9, 3)
    return x[s.start:s.stop:s.step] * (r.start + r.stop + r.step), s.stop is None


def test_slice_and_range_fields_are_read_in_the_trace():
    report = assert_parity(slice_and_range_fields, lambda: (torch.randn(5),), calls=2)
    assert report.warnings == []
    assert all(e.graph_break is None for e in report.compiled.cache_entries())


def missing_slice_field(x):
    return x * slice(1, 2).begin


def test_a_missing_field_raises_attribute_error_as_eager():
    assert_parity(missing_slice_field, lambda: (torch.randn(2),))
