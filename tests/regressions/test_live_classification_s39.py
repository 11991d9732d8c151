"""Live values classified by their real type inside stillframe (issue 11, item 4: never break the user's program).

CPython's ``isinstance(v, C)`` reads ``v.__class__`` when ``type(v)`` is no subclass of ``C``: a ``__class__``
property, a proxy's ``__getattribute__`` or a ``Mock(spec=...)`` runs, and may raise or lie. CPython's own checks
(``raise``, ``except``, ``id``, ``repr``, attribute lookup, ``len``) go by the real type. Each test here is a
program where stillframe's own ``isinstance`` on a live value (a VT's ``.value``, a bound method's ``__self__``, a
class attribute, the classes of an ``except``) ran the user's ``__class__``: an answer other than eager's, an
internal error and a fallback, or more reads of ``__class__`` than eager makes. All are classified by
``variables.builder.of_type`` now.

The parity harness is not used: it classifies the values it compares with ``isinstance`` itself.
"""

import abc
import collections
import copy
import enum
import functools
import io
import logging
import types
import warnings
import weakref

import pytest
import torch

import stillframe
from stillframe.check.parity import assert_parity


class _Shows:
    """An object whose ``__class__`` shows ``shown`` and counts its reads (on the instance: no ``__class__`` read)."""

    def __init__(self, shown, items=()):
        self.shown = shown
        self.items = list(items)
        self.reads = 0
        self.a = 1

    @property
    def __class__(self):
        self.reads += 1
        return self.shown

    def __iter__(self):
        return iter(self.items)


class _ShowsDeque(collections.deque):
    reads = 0

    @property
    def __class__(self):
        _ShowsDeque.reads += 1
        return list


def _reads(values) -> int:
    """The ``__class__`` reads of the ``_Shows`` among ``values``, in frozensets and bound methods too."""
    total = 0
    for v in values:
        if issubclass(type(v), _Shows):
            total += v.reads
        elif type(v) is frozenset:
            total += _reads(v)
        elif type(v) in (types.MethodType, types.BuiltinMethodType):
            total += _reads([v.__self__, getattr(v, "__func__", None)])
    return total


def _outcome(fn, args):
    try:
        return fn(*args)
    except Exception as e:  # (an error of the program's: compared by type and message)
        return type(e), str(e)


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if type(a) is torch.Tensor:
        return torch.equal(a, b)
    if type(a) in (tuple, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _assert_like_eager(fn, make_args, calls=2):
    """``fn`` compiled gives eager's results (or exception, by type and message) and reads each argument's
    ``__class__`` as often as eager, on every call, with no fallback warning (an internal error)."""
    compiled = stillframe.compile(fn, backend="eager")
    for call in range(calls):
        args = make_args()
        eager = _outcome(fn, args)
        eager_reads = _reads(args)
        args = make_args()
        with warnings.catch_warnings():
            warnings.simplefilter("error", stillframe.StillframeWarning)
            got = _outcome(compiled, args)
        assert _same(got, eager), (call, got, eager)
        assert _reads(args) == eager_reads, (call, _reads(args), eager_reads)


# -- silent divergences: an answer other than eager's, with no error -----------------------------------------------


def _id_of(x, o):
    return x + 1, id(o)


def test_id_of_an_object_showing_a_class_is_its_own_on_every_call():
    # was: isinstance(o, (type, ModuleType)) took o for a class, and id(o) was baked into the plan, guarded by
    # o's type alone: the second call returned the first object's id (rules/builtin_calls._id)
    compiled = stillframe.compile(_id_of, backend="eager")
    kept = []
    for _ in range(3):
        o = _Shows(type)
        kept.append(o)
        assert compiled(torch.ones(2), o)[1] == id(o)
        assert o.reads == 0


def _text_of(x, o):
    return x + 1, repr(o), str(o)


def test_repr_of_an_object_showing_a_function_is_its_own_on_every_call():
    # was: folded at trace time as a function's text (rules/builtin_calls.call_builtin): the next object's repr
    # was the first one's, address and all
    compiled = stillframe.compile(_text_of, backend="eager")
    kept = []
    for _ in range(3):
        o = _Shows(types.FunctionType)
        kept.append(o)
        assert compiled(torch.ones(2), o)[1:] == (repr(o), str(o))
        assert o.reads == 0


def _items_of(x, o):
    return x + 1, list(o)


def test_an_object_showing_enummeta_is_iterated_on_every_call():
    # was: taken for an Enum class, its items were iterated at trace time and baked in, guarded by type alone:
    # the second call returned the first object's items (rules/known._object_items)
    compiled = stillframe.compile(_items_of, backend="eager")
    for items in ([1, 2], [3, 4]):
        o = _Shows(enum.EnumMeta, items)
        assert compiled(torch.ones(2), o)[1] == items
        assert o.reads == 0


def _raise_from(x, o):
    try:
        raise ValueError("v") from o
    except Exception as e:
        return x + 1, type(e), str(e)


@pytest.mark.parametrize("shown", [RuntimeError, type], ids=["exception", "type"])
def test_a_cause_showing_an_exception_or_a_class_is_refused_as_eager_refuses_it(shown):
    # was: ValueError raised with o as its cause (shown RuntimeError; silent), or "issubclass() arg 1 must be a
    # class" inside stillframe (shown type); eager raises TypeError "exception causes must derive from
    # BaseException" (do_raise checks the real type) (rules/exceptions._is_exception_value, raise_value)
    _assert_like_eager(_raise_from, lambda: (torch.ones(2), _Shows(shown)))


class _Virtual(Exception, metaclass=abc.ABCMeta):
    pass


_Virtual.register(ValueError)


def _except_virtual(x):
    try:
        raise ValueError("v")
    except _Virtual:
        return x + 1
    except ValueError:
        return x - 1


def test_except_matches_by_the_real_class_not_a_registered_virtual_subclass():
    # CPython's except clause asks the exception's MRO (PyErr_GivenExceptionMatches), never __subclasscheck__:
    # was: issubclass() answered True through ABCMeta, and the wrong handler ran (trace CHECK_EXC_MATCH)
    assert issubclass(ValueError, _Virtual)
    _assert_like_eager(_except_virtual, lambda: (torch.ones(2),))


class _ShowsDict(_Shows):
    pass


def _attribute_or_default(x, o):
    return x + 1, getattr(o, "zz", 3)


def test_a_class_attribute_added_later_is_seen_through_the_real_class():
    # was: the guard that no class of o's MRO gained "zz" read L['o'].__class__.__mro__, the class o shows
    # (dict), not its own: after _ShowsDict.zz was set the plan still returned the default
    # (rules/objects.guard_not_on_class)
    compiled = stillframe.compile(_attribute_or_default, backend="eager")
    try:
        assert compiled(torch.ones(2), _ShowsDict(dict))[1] == 3
        _ShowsDict.zz = 9
        o = _ShowsDict(dict)
        assert compiled(torch.ones(2), o)[1] == _attribute_or_default(torch.ones(2), o)[1] == 9
    finally:
        del _ShowsDict.zz


class _Message:
    def __init__(self):
        self.t = torch.zeros(1)

    def __str__(self):
        return f"{self.t.item()}"

    @property
    def __class__(self):
        return type


_LOGGER = logging.getLogger("stillframe.tests.s39")


def _logs_then_changes(x, m):
    _LOGGER.warning("%s", m)
    m.t.add_(1)  # (in the graph)
    return x + 1


def test_a_logged_object_showing_a_class_is_formatted_where_the_call_is():
    # was: taken for a class (immutable), the logging call was deferred past the graph and formatted the
    # object after the graph changed it: "1.0" was logged where eager logs "0.0" (rules/calls
    # _defer_log_call)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)  # (a plain handler: stillframe may defer a call that meets only it)
    _LOGGER.addHandler(handler)
    _LOGGER.propagate = False
    try:
        _logs_then_changes(torch.ones(2), _Message())
        eager = stream.getvalue()
        stream.truncate(0)
        stream.seek(0)
        stillframe.compile(_logs_then_changes, backend="eager")(torch.ones(2), _Message())
        assert stream.getvalue() == eager == "0.0\n"
    finally:
        _LOGGER.removeHandler(handler)
        _LOGGER.propagate = True


def _deep_copied(x, o):
    c = copy.deepcopy(o)
    return x + 1, c is o, c.a


def test_deepcopy_of_an_object_showing_a_class_copies_it():
    # was: taken for a class (which deepcopy keeps), the object itself was returned: c is o was True, eager's
    # copy.deepcopy goes by type(o) and copies it (rules/objects.deepcopy_var)
    _assert_like_eager(_deep_copied, lambda: (torch.ones(2), _Shows(type)))


# -- internal errors: an exception of stillframe's, a fallback with a warning ---------------------------------------


def _length(x, o):
    try:
        return x + 1, len(o)
    except TypeError as e:
        return x - 1, str(e)


def test_len_of_an_object_showing_list():
    # was: len() of the live object at trace time, TypeError inside stillframe (rules/builtin_calls._len)
    _assert_like_eager(_length, lambda: (torch.ones(2), _Shows(list)))


def _raise_it(x, o):
    try:
        raise o
    except TypeError as e:
        return x + 1, str(e)


@pytest.mark.parametrize("shown", [type, RuntimeError], ids=["type", "exception"])
def test_raise_of_an_object_showing_a_class_or_an_exception(shown):
    # was: "issubclass() arg 1 must be a class" inside stillframe (shown type), or reads of __class__ eager does
    # not make (rules/exceptions.raise_value)
    _assert_like_eager(_raise_it, lambda: (torch.ones(2), _Shows(shown)))


def _raise_given_from(x, e, o):
    try:
        raise e from o
    except TypeError as err:
        return x + 1, str(err)


def test_a_real_raise_refuses_a_cause_showing_a_class():
    # an exception made outside the trace is raised for real (runtime/executors.RAISE_VARARGS): was
    # issubclass(o, BaseException) on o taken for a class, "issubclass() arg 1 must be a class" where eager says
    # "exception causes must derive from BaseException"
    _assert_like_eager(_raise_given_from, lambda: (torch.ones(2), ValueError("v"), _Shows(type)))


class _Base:
    def m(self):
        return 1


class _SubShowingType(_Base):
    reads = 0

    @property
    def __class__(self):
        _SubShowingType.reads += 1
        return type

    def m(self):
        return super().m() + 1


def _calls_super(x, o):
    return x + o.m()


def test_super_in_a_method_of_an_object_showing_type():
    # was: self taken for a class: issubclass(self, _SubShowingType) raised inside stillframe (rules/attrs
    # super_attr)
    compiled = stillframe.compile(_calls_super, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("error", stillframe.StillframeWarning)
        for _ in range(2):
            _SubShowingType.reads = 0
            assert torch.equal(compiled(torch.ones(2), _SubShowingType()), torch.full((2,), 3.0))
            assert _SubShowingType.reads == 0


class _CallableShows(_Shows):
    def __call__(self, *args):
        return 7


def _call_it(x, m):
    return x + 1, m()


def test_a_method_object_whose_function_shows_a_function():
    # was: MethodType(callable, obj) whose callable shows FunctionType was taken for a Python method, and
    # "'PythonObjectVariable' object has no attribute 'fn'" (variables/builder._wrap_live_marker)
    _assert_like_eager(_call_it, lambda: (torch.ones(2), types.MethodType(_CallableShows(types.FunctionType), 5)))


def _deletes_then_reads(x, o):
    o.a = 3
    del o.a
    return x + 1, getattr(o, "a", 5)


def test_reading_an_attribute_deleted_from_an_object_showing_type():
    # was: "'_Shows' object has no attribute '__mro__'" inside stillframe: the object was taken for a class whose
    # bases' attributes the read would find (rules/objects)
    _assert_like_eager(_deletes_then_reads, lambda: (torch.ones(2), _Shows(type)))


# -- reads of __class__ eager does not make -------------------------------------------------------------------------


def _sizeof(x, m):
    return x + 1, m()


def _attrs(x, o):
    return x + o.a, getattr(o, "a", 3), hasattr(o, "zz")


def _set_attr(x, o):
    o.b = 5
    return x + 1


def _checks_against(x, o):
    try:
        return x + 1, isinstance(1, o)
    except TypeError as e:
        return x - 1, str(e)


def _keyed(x, o):
    return x + 1, {o: 1}[o], type(o).__name__


def _truth(x, o):
    return x + 1 if o else x - 1


def _partial_of(x, o):
    try:
        return x + 1, type(functools.partial(o))
    except TypeError as e:
        return x - 1, str(e)


def _to(x, o):
    try:
        return x.to(o)
    except TypeError as e:
        return str(e)


def _member(x, o):
    return x + 1, o in (o,), o in {1: 2}, o in [1, 2]


def _length_of_members(x, fs):
    return x + 1, len(fs)


def _except_it(x, o):
    try:
        raise ValueError
    except o:
        return x + 1


class _Holder:
    attr = _Shows(property)


def _class_attribute(x, h):
    return x + 1, h.attr is _Holder.attr, hasattr(h, "attr")


def test_a_class_attribute_is_classified_by_its_type():
    # rules/objects and builtin_calls asked isinstance(attr, property) of the class attribute found for h.attr
    compiled = stillframe.compile(_class_attribute, backend="eager")
    for _ in range(2):
        _Holder.attr.reads = 0
        assert compiled(torch.ones(2), _Holder())[1:] == (True, True)
        assert _Holder.attr.reads == 0


_READS = [
    ("bound C method", _sizeof, lambda: (torch.ones(2), _Shows(types.ModuleType).__sizeof__)),
    ("bound C method of one showing type", _sizeof, lambda: (torch.ones(2), _Shows(type).__sizeof__)),
    ("call", _call_it, lambda: (torch.ones(2), _CallableShows(type))),
    ("call showing partial", _call_it, lambda: (torch.ones(2), _CallableShows(functools.partial))),
    ("attributes", _attrs, lambda: (torch.ones(2), _Shows(dict))),
    ("attributes showing type", _attrs, lambda: (torch.ones(2), _Shows(type))),
    ("setattr", _set_attr, lambda: (torch.ones(2), _Shows(dict))),
    ("isinstance against it", _checks_against, lambda: (torch.ones(2), _Shows(type))),
    ("isinstance against one showing tuple", _checks_against, lambda: (torch.ones(2), _Shows(tuple))),
    ("isinstance against a callable one", _checks_against, lambda: (torch.ones(2), _CallableShows(type))),
    ("isinstance against a callable one showing tuple", _checks_against,
     lambda: (torch.ones(2), _CallableShows(tuple))),
    ("membership", _member, lambda: (torch.ones(2), _CallableShows(tuple))),
    ("dict key", _keyed, lambda: (torch.ones(2), _Shows(types.ModuleType))),
    ("partial", _partial_of, lambda: (torch.ones(2), _Shows(functools.partial))),
    ("tensor op argument", _to, lambda: (torch.ones(2), _Shows(torch.dtype))),
    ("frozenset member", _length_of_members, lambda: (torch.ones(2), frozenset({_Shows(int), 1}))),
    ("except clause", _except_it, lambda: (torch.ones(2), _Shows(type))),
]


@pytest.mark.parametrize("fn, make_args", [case[1:] for case in _READS], ids=[case[0] for case in _READS])
def test_class_reads_are_eagers(fn, make_args):
    # each ran __class__ inside stillframe (a rule's or the builder's isinstance on the live value), where eager
    # reads it as often as here: see the table in the commit that added this test
    _assert_like_eager(fn, make_args)


def test_truth_of_a_container_subclass_showing_list():
    # rules/truthiness: isinstance(o, (dict, list ...)) and isinstance(o, type) read a deque subclass's __class__
    compiled = stillframe.compile(_truth, backend="eager")
    for _ in range(2):
        _ShowsDeque.reads = 0
        assert torch.equal(compiled(torch.ones(2), _ShowsDeque([1])), torch.full((2,), 2.0))
        assert _ShowsDeque.reads == 0


class _Shown:
    reprs = 0
    reads = 0

    def __init__(self, v):
        self.v = v

    def __repr__(self):
        _Shown.reprs += 1
        return "shown"

    @property
    def __class__(self):
        _Shown.reads += 1
        return _Shown


class _ShownToo(_Shown):
    pass


def _reads_v(x, o):
    return x + o.v


def test_a_recompilation_runs_no_repr_and_reads_no_class_of_an_argument():
    # a recompilation notes the first failing guard and what the call passed (guards.actual): it ran the
    # argument's __repr__ and, through isinstance(value, torch.Tensor), its __class__, where eager runs neither
    compiled = stillframe.compile(_reads_v, backend="eager")
    compiled(torch.ones(2), _Shown(1))
    _Shown.reprs = _Shown.reads = 0
    assert torch.equal(compiled(torch.ones(2), _ShownToo(2)), torch.full((2,), 3.0))  # (TYPE guard: recompiled)
    assert (_Shown.reprs, _Shown.reads) == (0, 0)


class _Callback:
    reads = 0

    def __call__(self, ref):
        pass

    @property
    def __class__(self):
        _Callback.reads += 1
        return _Callback


class _Referent:
    pass


_CALLBACK = _Callback()


def _weakly_referred_across_a_break(x):
    o = _Referent()
    r = weakref.ref(o, _CALLBACK)
    print("", end="")  # (a break: whether the frame's objects are watched is asked of their weak references)
    return x + 1, r() is o


def test_a_weak_reference_callback_is_classified_by_its_type():
    # guards._observed_collection asked isinstance(callback, weakref.finalize) of the user's callback on each call
    compiled = stillframe.compile(_weakly_referred_across_a_break, backend="eager")
    for _ in range(2):
        _Callback.reads = 0
        assert compiled(torch.ones(2))[1] is True
        assert _Callback.reads == 0


def _returns_it(x, o):
    o.b = 2
    return x + 1, o


@pytest.mark.parametrize("shown", [dict, list, torch.Tensor, BaseException], ids=lambda c: c.__name__)
def test_the_parity_harness_compares_an_object_showing_a_class_by_its_real_type(shown):
    # check/values and check/parity classified the values they compare with isinstance: an object showing dict was
    # walked as a dict ("'_Shows' object is not subscriptable" from the harness), and the harness's own reads of
    # __class__ counted among the program's. Its attributes (reads among them) are compared now, as a user
    # object's are
    assert_parity(_returns_it, lambda: (torch.ones(2), _Shows(shown)))


def _alone(o):
    o.b = 2
    return o.a + 1


def test_the_parity_harness_takes_a_lone_argument_showing_tuple_as_one_argument():
    # make_args may return the one argument itself: check/parity._make_args asked isinstance(got, tuple) of it,
    # and an object showing tuple was taken for the argument tuple (its items became the arguments)
    assert_parity(_alone, lambda: _Shows(tuple, items=(1, 2)))


class _ShowsSubclass:
    @property
    def __class__(self):
        return _SubShowingType


def _super_of_a_shown_subclass(x, o):
    try:
        return x + super(_SubShowingType, o).m()
    except TypeError as e:
        return x - 1, str(e)


def test_super_accepts_an_object_whose_class_shows_a_subclass():
    # CPython's supercheck reads obj.__class__ when type(obj) is no subclass of C, and accepts a subclass there:
    # was TypeError "super(type, obj): obj must be an instance or subtype of type" (rules/builtin_calls
    # _checked_super); now the call runs for real. (The resumed segment then reads .m of the live super object
    # step by step, with a warning: not asserted here.)
    compiled = stillframe.compile(_super_of_a_shown_subclass, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stillframe.StillframeWarning)
        for _ in range(2):
            assert _same(compiled(torch.ones(2), _ShowsSubclass()), _super_of_a_shown_subclass(torch.ones(2),
                                                                                                 _ShowsSubclass()))
