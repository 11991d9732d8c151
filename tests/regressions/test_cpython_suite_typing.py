"""Divergences found by running CPython's typing and class tests compiled (``python -m stillframe.check.cpython_tests``
on test_typing, test_dataclasses, test_descr, test_enum; issue 11), each checked against eager."""

import torch

from stillframe.check.parity import assert_parity


class _SetItemAsSetAttr(dict):
    __setattr__ = dict.__setitem__
    __delattr__ = dict.__delitem__


def _store_and_delete_through_c_hooks(x):
    o = _SetItemAsSetAttr()
    o.y = 42
    o.z = 1
    del o.z
    return x + 1, dict(o)


def test_a_setattr_that_is_a_c_method_is_called():
    # was: only a __setattr__/__delattr__ written in Python was called; dict.__setitem__ as __setattr__ was passed
    # over and the value went into the instance __dict__ (test_descr test_mixing_slot_wrappers: KeyError 'y')
    assert_parity(_store_and_delete_through_c_hooks, lambda: (torch.randn(2),))
