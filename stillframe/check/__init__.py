"""Eager-parity checking: the oracle every behavioural test of stillframe uses (DESIGN invariant 7).

    >>> import torch
    >>> from stillframe.check import assert_parity
    >>> def f(x):
    ...     return torch.relu(x) * 2
    >>> assert_parity(f, lambda: (torch.randn(4, requires_grad=True),), compiled=f).ok
    True

See :mod:`stillframe.check.parity` for everything that is compared.
"""

from stillframe.check.parity import ParityReport, assert_parity, compare

__all__ = ["ParityReport", "assert_parity", "compare"]
