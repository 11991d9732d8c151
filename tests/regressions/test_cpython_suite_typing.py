"""Divergences found by running CPython's typing and class tests compiled (``python -m stillframe.check.cpython_tests``
on test_typing, test_dataclasses, test_descr, test_enum; issue 11), each checked against eager."""

import typing

import pytest
import torch

import stillframe

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


_LOG = []


class _LoggingModule(type(torch)):
    def __getattribute__(self, name):
        _LOG.append(("getattr", name))
        return type(torch).__getattribute__(self, name)

    def __setattr__(self, name, value):
        _LOG.append(("setattr", name, value))
        type(torch).__setattr__(self, name, value)

    def __delattr__(self, name):
        _LOG.append(("delattr", name))
        type(torch).__delattr__(self, name)


def _module_subclass_attributes(x):
    _LOG.clear()
    a = _LoggingModule("a")
    a.foo = 12
    y = a.foo
    del a.foo
    return x + y, list(_LOG)


def test_a_module_subclass_with_its_own_getattribute_sees_each_read_once():
    # was: a module's attributes were read around its class's __getattribute__ (twice: hasattr, then getattr),
    # and every wrap of the module ran it with '__class__' (isinstance reads obj.__class__ when the type does not
    # match): the log held 105 reads of __class__ and two of foo (test_descr test_module_subclasses)
    assert_parity(_module_subclass_attributes, lambda: (torch.randn(2),))


class _ShowsClass:
    @property
    def __class__(self):  # a lazy object's __class__ loads it: the trace must not
        _LOG.append("__class__")
        return _ShowsClass

    def __init__(self, n):
        self.n = n


def _read_n(obj, x):
    return x + obj.n, len(_LOG)


def _fresh_shows_class():
    _LOG.clear()  # (the parity checker's own reads of the argument's __class__ after the call are not counted)
    return _ShowsClass(2), torch.randn(2)


def test_wrapping_an_argument_does_not_read_its_class_property():
    # was: wrapping the argument ran each isinstance test of the builder through its __class__ property (16 reads)
    assert_parity(_read_n, _fresh_shows_class)


@typing.runtime_checkable
class _HasMeth(typing.Protocol):
    def meth(self): ...


class _NotRuntime(typing.Protocol):
    def meth(self): ...


class _MethOnInstance:
    def __init__(self):
        self.meth = lambda: None


def _isinstance_or_error(x, obj, cls):
    y = x + 1
    try:
        return y, isinstance(obj, cls)
    except TypeError as e:
        return y, str(e)


@pytest.mark.parametrize("obj,cls", [(42, typing.Any), (_MethOnInstance(), _HasMeth), (_MethOnInstance(), _NotRuntime),
                                     (3, typing.SupportsInt), ("a", typing.SupportsInt)],
                         ids=["any", "protocol-instance-attr", "protocol-not-runtime", "supports-int", "str-not-int"])
def test_isinstance_runs_typings_own_instancecheck(obj, cls):
    # was: typing's metaclasses were answered by the class relation alone, as ABCMeta is: isinstance(42, Any) was
    # False where CPython raises TypeError (test_typing AnyTests.test_any_instance_type_error), a runtime protocol
    # met by an instance attribute was not met, and a protocol without @runtime_checkable did not refuse
    # (ProtocolTests.test_protocols_isinstance)
    assert_parity(_isinstance_or_error, lambda: (torch.randn(2), obj, cls))


def _loop_over_dict_with_a_break(x, d):
    for k in d:
        x = x + d[k]
        print(k)  # a graph break in the body: the loop's iterator crosses it, rebuilt as stillframe's stand-in
    x = x * 2
    return x + 1


def test_stillframes_own_iterator_stand_in_is_no_finalizer():
    # was: the stand-in for a dict's iterator holds a weakref.finalize of stillframe's own, taken for the user's
    # (its weak reference's callback is the finalize object, of module 'weakref'), so each instruction that
    # dropped a reference to it broke the graph: 16 graphs for this loop, 105 for a @dataclass (test_dataclasses,
    # whose tests ran past the runner's timeout)
    assert_parity(_loop_over_dict_with_a_break, lambda: (torch.randn(2), {"a": 1, "b": 2}))
    report = stillframe.explain(_loop_over_dict_with_a_break, backend="eager")(torch.randn(2), {"a": 1, "b": 2})
    assert report.graph_count <= 4, report.format()


class _Sentinel:
    def __init__(self, name):
        self.name = name


_FIRST, _SECOND, _THIRD = _Sentinel("first"), _Sentinel("second"), _Sentinel("third")


class _Field:
    def __init__(self, kind):
        self.kind = kind


def _kind_in(x, field):
    made = _Sentinel("made")
    return x + 1, field.kind in (_FIRST, _SECOND), field.kind in [0, "a", None, _THIRD], made in (_FIRST, made)


@pytest.mark.parametrize("kind", [_FIRST, _THIRD], ids=["in", "not-in"])
def test_in_a_tuple_of_sentinels_compares_by_identity_in_the_graph(kind):
    # was: `f._field_type in (_FIELD_CLASSVAR, _FIELD_INITVAR)` (dataclasses' sentinels, of a class keeping object's
    # __eq__) needed the object as a constant: a graph break in every field of every @dataclass (test_dataclasses)
    assert_parity(_kind_in, lambda: (torch.randn(2), _Field(kind)), fullgraph=True)


def _is_first(x, field):
    return x + 1, field.kind is _FIRST, field.kind is not _SECOND


@pytest.mark.parametrize("fn", [_is_first, _kind_in], ids=["is", "in"])
def test_is_against_a_live_sentinel_is_guarded(fn):
    # was: `obj is SENTINEL` of two live objects (guarded by their types only) was answered once and not guarded:
    # the plan made for _FIRST answered True for _THIRD too (issue 11)
    compiled = stillframe.compile(fn, backend="eager")
    for kind in (_FIRST, _THIRD, _SECOND, _FIRST):
        assert_parity(fn, lambda: (torch.randn(2), _Field(kind)), compiled=compiled)


class _Hinted:
    def __init__(self, length, hint):
        self.length, self.hint, self.log = length, hint, []

    def __iter__(self):
        self.log.append("iter")
        return iter([1, 2])

    def __length_hint__(self):
        self.log.append("hint")
        return self.hint


class _Sized(_Hinted):
    def __len__(self):
        self.log.append("len")
        return self.length


def _materialize(make, x):
    obj = make()
    try:
        return x + 1, list(obj), tuple(obj), obj.log
    except (TypeError, ValueError) as e:
        return x + 1, str(e), obj.log


@pytest.mark.parametrize("make", [lambda: _Hinted(0, 2), lambda: _Hinted(0, "x"), lambda: _Hinted(0, -1),
                                  lambda: _Hinted(0, NotImplemented), lambda: _Sized(2, 0), lambda: _Sized("x", 5),
                                  lambda: _Sized(-1, 5)],
                         ids=["hint", "hint-str", "hint-negative", "hint-notimplemented", "len", "len-str-then-hint",
                              "len-negative"])
def test_list_and_tuple_ask_a_user_object_for_its_length_hint(make):
    # was: list(obj) and tuple(obj) iterated without asking __len__ / __length_hint__, so their effects were lost
    # and a bad hint raised nothing (test_descr test_special_method_lookup)
    assert_parity(_materialize, lambda: (make, torch.randn(2)))


class _RecordingDescriptor:
    def __init__(self, impl, log):
        self.impl, self.log = impl, log

    def __get__(self, obj, owner):
        self.log.append("get")
        return self.impl.__get__(obj, owner)


def _missing_value(self, key):
    return 4


def _missing_through_a_descriptor(x):
    log = []

    class Sub(dict):
        __missing__ = _RecordingDescriptor(_missing_value, log)
    return x + 1, Sub()["hi"], log


def test_a_missing_that_is_a_descriptor_is_bound_once_by_the_real_lookup():
    # was: `cls.__missing__` read at trace time ran the descriptor's __get__ three times for real (hasattr, then
    # twice more) before the lookup broke the graph (test_descr test_special_method_lookup: [1, 1, 1] != [1])
    assert_parity(_missing_through_a_descriptor, lambda: (torch.randn(2),))
