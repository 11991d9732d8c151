"""More divergences found by running PyTorch's own Dynamo tests through stillframe (issue 16)."""

import pytest
import torch

import stillframe
from stillframe.check.parity import assert_parity


def storage_class_checks(x):
    s = torch.BoolStorage.from_buffer(bytearray([0, 1, 2, 3]), "big")
    return x + 1, isinstance(s, torch.BoolStorage), isinstance(s, torch.FloatStorage), isinstance(s, torch.TypedStorage)


def test_isinstance_of_a_storage_made_in_the_function():
    # was False: the class relation (TypedStorage is no subclass of BoolStorage) answered instead of the
    # metaclass, which compares the storage's dtype and device
    assert_parity(storage_class_checks, lambda: (torch.ones(2),), calls=2)


def storage_argument_checks(s, x):
    return x + 1, isinstance(s, torch.BoolStorage), isinstance(s, (torch.LongStorage, torch.FloatStorage))


@pytest.mark.parametrize("make_storage", [
    lambda: torch.BoolStorage(3),
    lambda: torch.TypedStorage(3, dtype=torch.bool),
    lambda: torch.TypedStorage(3, dtype=torch.float32),
    lambda: torch.TypedStorage(3, dtype=torch.int64),
    lambda: torch.ones(2).untyped_storage(),
])
def test_isinstance_of_a_storage_argument(make_storage):
    assert_parity(storage_argument_checks, lambda: (make_storage(), torch.ones(2)), calls=2, fullgraph=True)


def test_a_storage_of_another_dtype_is_checked_again():
    # the plan for a bool TypedStorage must not answer for a float one (its dtype is guarded)
    compiled = stillframe.compile(storage_argument_checks, backend="eager", fullgraph=True)
    for dtype in (torch.bool, torch.float32, torch.bool, torch.int64):
        s = torch.TypedStorage(3, dtype=dtype)
        assert compiled(s, torch.ones(2))[1:] == storage_argument_checks(s, torch.ones(2))[1:]
