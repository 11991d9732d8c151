"""Regressions found by hand-written parity probes: attribute lookup on user objects and classes (data
descriptors, a NamedTuple's property, a class with no ``__module__``, ``getattr`` on a builtin with a default),
abstract classes, and list methods that compare with a user ``__eq__``. Each is compared with eager on both
backends."""

from __future__ import annotations

import abc
import typing

import pytest
import torch

import stillframe
from stillframe.check.parity import assert_parity

BACKENDS = ["eager", "aot_eager"]


def _args(i=0):
    return (torch.randn(2, 3) + i,)


class _Scaled:
    """A data descriptor: ``__set__`` stores ``v - 1`` on the instance, ``__get__`` reads it times ten."""

    def __get__(self, obj, objtype=None):
        return self if obj is None else obj._v * 10

    def __set__(self, obj, v):
        obj._v = v - 1


class _WithScaled:
    a = _Scaled()


@pytest.mark.parametrize("backend", BACKENDS)
def test_data_descriptor_wins_over_the_instance_dict(backend):
    # `h.a = x` stored x in the instance dict and `h.a` read it back: a data descriptor on the class (one that
    # defines __set__ or __delete__) wins over the instance dict, so eager runs __set__ and __get__
    def fn(x):
        h = _WithScaled()
        h.a = x
        return h.a, sorted(h.__dict__)

    assert_parity(fn, _args, backend=backend, calls=3)


class _Deletable:
    def __get__(self, obj, objtype=None):
        return self if obj is None else ("got", getattr(obj, "_s", None) is not None, getattr(obj, "_deleted", False))

    def __set__(self, obj, v):
        obj._s = v

    def __delete__(self, obj):
        obj._deleted = True


class _WithDeletable:
    d = _Deletable()


@pytest.mark.parametrize("backend", BACKENDS)
def test_data_descriptor_delete_then_read(backend):
    # `del h.d` did not run __delete__ (it raised AttributeError: there was no `d` in the instance dict), and
    # reading `h.d` fell back with an internal error (AttributeError: 'NoneType' object has no attribute 'd'):
    # the descriptor was read off the live object, which an object made in the trace does not have
    def fn(x):
        h = _WithDeletable()
        h.d = x
        del h.d
        return x + 1, h.d

    # fullgraph: a trace that raised where eager does not re-ran the call for real, silently
    assert_parity(fn, _args, backend=backend, calls=3, fullgraph=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_data_descriptor_on_an_argument(backend):
    # on an object from outside, `h.d = x` was recorded as an instance attribute (read back by `h.d`, __get__
    # bypassed), `del h.d` as its removal, and __get__ ran at trace time, before the pending writes
    def fn(x, h):
        h.d = x
        first = h.d
        del h.d
        return x + 1, first, h.d

    assert_parity(fn, lambda i=0: (*_args(i), _WithDeletable()), backend=backend, calls=3, fullgraph=True)


class _DictDeletable:
    def __get__(self, obj, objtype=None):
        return self if obj is None else "got"

    def __set__(self, obj, v):
        obj.__dict__["_s"] = v  # a write through __dict__: the graph breaks, `h` is a live object after it

    def __delete__(self, obj):
        obj.__dict__["_deleted"] = True


class _WithDictDeletable:
    d = _DictDeletable()


@pytest.mark.parametrize("backend", BACKENDS)
def test_data_descriptor_delete_then_read_on_a_live_object(backend):
    # the probe's program: `h.d` after `del h.d` fell back with an internal error (see above)
    def fn(x):
        h = _WithDictDeletable()
        h.d = x
        del h.d
        return x + 1, h.d, h.__dict__.get("_deleted", False)

    assert_parity(fn, _args, backend=backend, calls=3)


class _NT(typing.NamedTuple):
    a: torch.Tensor

    @property
    def neg(self):
        return -self.a


@pytest.mark.parametrize("backend", BACKENDS)
def test_namedtuple_property(backend):
    # a @property written in a typing.NamedTuple subclass returned the property object, not its getter's value
    def fn(x):
        return _NT(x).neg

    assert_parity(fn, _args, backend=backend, calls=3)


class _Abstract(abc.ABC):
    @abc.abstractmethod
    def go(self): ...


@pytest.mark.parametrize("backend", BACKENDS)
def test_instantiating_an_abstract_class_raises(backend):
    # the trace made an instance of a class with abstract methods; eager's object.__new__ raises TypeError
    def fn(x):
        try:
            _Abstract()
            return x + 1, "instantiated"
        except TypeError as e:
            return x - 1, str(e)

    assert_parity(fn, _args, backend=backend, calls=3)


class _K:
    def __init__(self, k):
        self.k = k

    def __eq__(self, other):
        return isinstance(other, _K) and self.k == other.k


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_count_and_remove_compare_with_user_eq(backend):
    # list.count / remove (and tuple.count) compared by identity where eager calls the items' __eq__
    # (count gave 0, remove raised ValueError)
    def fn(x):
        ks = [_K(1), _K(2), _K(1)]
        r = [ks.count(_K(1)), tuple(ks).count(_K(2))]
        ks.remove(_K(2))
        return x + 1, r, len(ks), [k.k for k in ks]

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_getattr_of_a_builtin_with_a_default(backend):
    # getattr(object, name, default) raised AttributeError inside stillframe (a fallback, "type object 'object'
    # has no attribute '__dataclass_fields__'", reached from a @dataclass defined in the compiled function)
    # instead of returning the default
    def fn(x):
        fields = getattr(object, "__dataclass_fields__", None)
        try:
            getattr(int, "no_such_attribute")
        except AttributeError as e:
            return x * 2, fields, str(e)
        return x, fields, ""

    assert_parity(fn, _args, backend=backend, calls=3)


_NO_MODULE = {}
exec("K = type('K', (object,), {'scale': 3})", _NO_MODULE)  # globals without __name__: K has no __module__


@pytest.mark.parametrize("backend", BACKENDS)
def test_class_without_module_attribute(backend):
    # reading an attribute of a class with no __module__ (made by type() where globals lack __name__) leaked
    # the internal AttributeError('__module__') as a fallback; eager reads .scale, and .__module__ raises the
    # user's AttributeError
    klass = _NO_MODULE["K"]

    def fn(x):
        return x * klass.scale, getattr(klass, "__module__", "MISSING")

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_type_three_arguments_sets_module(backend):
    # type(name, bases, ns) sets __module__ from its caller's globals' __name__, as eager: the real step called it
    # through a trampoline whose globals had no __name__ (runtime/trampoline.py)
    def fn(x):
        K = type("K", (object,), {"scale": 3})
        return x * K.scale, getattr(K, "__module__", "MISSING")

    assert_parity(fn, _args, backend=backend, calls=3)


_EXEC_CLASSES = {}
exec(compile("""
class Slotted:
    __slots__ = ('a', 'b')
    def __init__(self, a):
        self.a = a
""", "<probe>", "exec"), _EXEC_CLASSES)  # a class statement without __name__ in its globals: __module__ 'builtins'


@pytest.mark.parametrize("backend", BACKENDS)
def test_user_class_whose_module_is_builtins(backend):
    # a class statement run by exec in globals without __name__ makes a user class with __module__ "builtins";
    # the trace took it for a C builtin (`cls.__module__ == "builtins"`), made the instance for real, and
    # answered hasattr on its unset slot `b` from a bare instance: True where eager says False
    klass = _EXEC_CLASSES["Slotted"]
    assert klass.__module__ == "builtins"

    def fn(x):
        s = klass(x)
        unset = hasattr(s, "b")
        s.b = 2
        return s.a * s.b, unset, hasattr(s, "__dict__")

    assert_parity(fn, _args, backend=backend, calls=3)


class _CountingGetattr:
    """A ``__getattr__`` with an effect before it raises (it counts its calls), and answers names with a 'w'."""

    def __init__(self):
        self.calls = 0

    def __getattr__(self, name):
        self.calls += 1
        if name.startswith("w"):
            return len(name)
        raise AttributeError(name)


def _counting_args(i=0):
    return torch.randn(2 + i, 3), _CountingGetattr()


_LOOKUPS_CAUGHT = {
    # a made instance: hasattr and getattr with a default rolled the trace back to before the call, and the
    # count its __getattr__ made before raising was lost (eager 1, compiled 0)
    "hasattr_then_count": lambda x, g: ((lambda o: (hasattr(o, "zz"), o.calls))(_CountingGetattr())),
    "getattr_default_then_count": lambda x, g: ((lambda o: (getattr(o, "zz", 5), o.calls))(_CountingGetattr())),
    # a live argument: hasattr looked the name up statically, without its __getattr__: False where eager's
    # __getattr__ answers True, and no count
    "hasattr_answered_by_getattr": lambda x, g: (hasattr(g, "www"), g.calls),
    "hasattr_on_an_argument": lambda x, g: (hasattr(g, "zz"), g.calls),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(_LOOKUPS_CAUGHT))
def test_getattr_hook_runs_and_keeps_its_effects(backend, case):
    lookup = _LOOKUPS_CAUGHT[case]

    def fn(x, g):
        found = lookup(x, g)
        print(end="")  # a graph break: the next one is traced from a resumed frame
        again = lookup(x, g)
        return x * 2, found, again, g.calls

    assert_parity(fn, _counting_args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_next_with_default_keeps_what_the_generator_did(backend):
    # next(gen, default) on a generator that appends and then returns: the append stays done
    def fn(x):
        log = []

        def gen():
            log.append(1)
            yield x * 2
            log.append(2)

        g = gen()
        a = next(g, None)
        b = next(g, None)
        return a, b, log

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("with_getattr_hook", [False, True])
def test_attribute_added_to_the_class_after_the_trace_found_none(backend, with_getattr_hook):
    # getattr(o, name, default) and hasattr(o, name) on an argument whose class had no `name` when traced: the plan
    # guarded only the instance's __dict__, so after `Cls.zz = 5` it still answered the default (eager: 5)
    class Base:
        pass

    class Cls(Base):
        if with_getattr_hook:
            def __getattr__(self, name):
                raise AttributeError(name)

    def fn(x, o):
        return x * getattr(o, "zz", 3), hasattr(o, "zz")

    compiled = stillframe.compile(fn, backend=backend)
    x = torch.ones(2)
    for change in (None, lambda: setattr(Base, "zz", 5), lambda: setattr(Cls, "zz", 7), lambda: delattr(Cls, "zz")):
        if change is not None:
            change()
        expected, got = fn(x, Cls()), compiled(x, Cls())
        assert got[1] == expected[1]
        torch.testing.assert_close(got[0], expected[0])
