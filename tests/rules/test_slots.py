"""Objects of classes with ``__slots__`` made in traced code (issue 11: ``hasattr(obj, "__dict__")`` was True)."""

import torch

from stillframe.check.parity import assert_parity


class Slotted:
    __slots__ = ("a",)

    def __init__(self):
        self.a = 1


class SlottedWithDict:
    __slots__ = ("a", "__dict__")

    def __init__(self):
        self.a = 1
        self.b = 2


class Plain:
    def __init__(self):
        self.a = 1


def slots_and_instance_dicts(x):
    s, d, p = Slotted(), SlottedWithDict(), Plain()
    return x + s.a + d.b, hasattr(s, "__dict__"), hasattr(d, "__dict__"), hasattr(p, "__dict__"), sorted(vars(p))


def test_hasattr_dict_follows_slots_as_eager():
    report = assert_parity(slots_and_instance_dicts, lambda: (torch.ones(2),), calls=2)
    assert report.warnings == []
