import pytest
import torch

from stillframe.check import assert_parity


def _foreach_same_tensor(x):
    torch._foreach_add_([x, x.view(3)], 1)
    return x + 1


def _foreach_one_tensor_twice(x):
    y = x * 1
    torch._foreach_mul_([y, y], 2)
    return y


@pytest.mark.parametrize("fn", [_foreach_same_tensor, _foreach_one_tensor_twice])
def test_foreach_writing_one_memory_twice(fn):
    # AOTAutograd's functional form computed each new value from the memory before the op: x + 1, not x + 2
    assert_parity(fn, lambda: (torch.ones(3),), backend="aot_eager", calls=2)
