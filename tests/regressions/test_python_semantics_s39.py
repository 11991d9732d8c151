"""Python semantics the trace answered wrongly, found and fixed by the lead in session 39 (issue 11)."""

import gc
import types
import weakref

import torch

import stillframe
from stillframe.check.parity import assert_parity


def _view_across_a_break(kind):
    def f(x):
        mapping = {}
        view = getattr(mapping, kind)()
        print("break")  # the dict and its view are live objects from here on; the trace models the dict
        mapping["key"] = 1  # a write into the model, replayed on the live dict only after the graph
        out = [list(view), tuple(view), [v for v in view], len(view)]
        for v in view:
            out.append(v)
        mapping["b"] = 2
        out.append(list(view))
        return x + 1, out
    return f


def _view_of_an_argument(x, mapping, view):
    before = list(view)
    mapping["k2"] = 3
    return x + 1, before, list(view), len(view)


def _mappingproxy_views(x):
    # CPython's test_types MappingProxyTests.test_views: MappingProxyType(...) and .keys() run for real
    mapping = {}
    view = types.MappingProxyType(mapping)
    keys, values, items = view.keys(), view.values(), view.items()
    before = (list(keys), list(values), list(items))
    mapping["key"] = "value"
    return x + 1, before, list(keys), list(values), list(items)


def test_a_live_view_of_a_dict_the_trace_writes_into_sees_the_writes():
    # silent: list(view) was [] (the live view of the still-empty live dict, guarded LEN 0) where eager has the key
    for kind in ("keys", "values", "items"):
        assert_parity(_view_across_a_break(kind), lambda: (torch.ones(1),), calls=2)


def test_a_view_passed_with_its_dict_sees_the_trace_s_writes_into_the_dict():
    for kind in ("keys", "values", "items"):
        def make(kind=kind):
            mapping = {}
            return torch.ones(1), mapping, getattr(mapping, kind)()
        assert_parity(_view_of_an_argument, make, calls=2)


def test_mappingproxy_views_see_later_writes():
    assert_parity(_mappingproxy_views, lambda: (torch.ones(1),), calls=2)


class _Str(str):
    pass


class _Int(int):
    pass


def _attribute_of_a_str_subclass(x, s):
    return x + 1, s.tag, len(s), s.upper()


def test_an_instance_of_a_scalar_subclass_with_a_dict_is_an_object_not_a_constant():
    # silent: `class S(str): pass` instances were baked in as constants behind an EQUALS guard, so `s.tag` of a
    # second, equal S answered the first one's, the result was not the argument itself, and the plan kept the first
    # call's instance (and all it refers to) alive (CPython's test_memoryview test_gc: `wr() is None` was False)
    compiled = stillframe.compile(_attribute_of_a_str_subclass, backend="eager")
    for tag in (1, 2, 3):  # equal strings, different attributes: the harness would give both sides the same tag
        s = _Str("ab")
        s.tag = tag
        assert compiled(torch.ones(1), s)[1:] == _attribute_of_a_str_subclass(torch.ones(1), s)[1:] == (tag, 2, "AB")
    assert_parity(_attribute_of_a_str_subclass, lambda: (torch.ones(1), _tagged(_Str("ab"))), calls=2)


def _tagged(s):
    s.tag = 7
    return s


def _sets_an_attribute(x, n):
    n.seen = x.sum().item() > 0
    return x + n, n.seen


def test_an_int_subclass_written_in_the_trace_keeps_its_identity():
    assert_parity(_sets_an_attribute, lambda: (torch.ones(1), _Int(3)), calls=3)


class _Holder(bytes):
    pass


class _Payload:
    pass


def _kept_alive(x):
    b = _Holder(b"abc")
    o = _Payload()
    b.o = o
    wr = weakref.ref(o)
    b = o = None
    gc.collect()
    return x + 1, wr() is None


def test_a_scalar_subclass_instance_dies_when_eager_s_does():
    assert_parity(_kept_alive, lambda: (torch.ones(1),), calls=3)


def _complex_in_a_loop(x):
    # complex() breaks the graph; the plan after it was guarded `z == 1j`, which complex(-0.0, 1.0) passes
    out = []
    for a in (0.0, -0.0, float("inf")):
        for b in (0.0, -0.0):
            z = complex(a, b)
            out.append((repr(z.real), repr(z.imag)))
    return x + 1, out


def test_a_guard_on_a_complex_tells_a_negative_zero_apart():
    # silent: CPython's test_complex test_constructor_special_numbers
    assert_parity(_complex_in_a_loop, lambda: (torch.ones(1),), calls=2)


def _slice_after_a_break(x, t):
    print("break")
    return x + 1, repr(t), [type(v).__name__ for v in (t.start, t.stop, t.step)]


def test_a_guard_on_a_slice_checks_the_types_of_its_parts():
    # silent: slice(1, 2) == slice(True, 2) == slice(1.0, 2), so one plan served all three
    compiled = stillframe.compile(_slice_after_a_break, backend="eager")
    for t in (slice(1, 2), slice(True, 2), slice(1.0, 2), slice(0.0, 1), slice(-0.0, 1)):
        assert compiled(torch.ones(1), t)[1:] == _slice_after_a_break(torch.ones(1), t)[1:]


def _buffer_export_held_by_a_dead_local(x):
    b = bytearray(range(10))
    v = memoryview(b)  # never read again: eager's frame holds it (and the export) to its end
    out = []
    for step in (lambda: b.extend(b"x"), lambda: b.pop(0), lambda: b.__setitem__(slice(1, -1), b"ab")):
        try:
            step()
        except BufferError as e:
            out.append(str(e))
    return x + 1, out, bytes(b)


def test_a_dead_local_holding_a_live_object_lives_to_the_frame_s_end():
    # silent: the rebuilt frame dropped `v`, releasing the export, and the bytearray was resized (test_bytes
    # test_resize_forbidden)
    assert_parity(_buffer_export_held_by_a_dead_local, lambda: (torch.ones(1),), calls=2)


def _zeros_after_an_item(x):
    # torch.zeros is on the stack at the break .item() makes, and dropped by the call after it
    return torch.zeros(int(x.sum().item() > 0) + x.shape[0]) + 1


def test_a_weak_reference_to_a_module_s_c_function_does_not_break_the_graph():
    # a module's C function lives on in its module: a weak reference the user (or torch.jit) holds to it sees
    # nothing die with a frame's reference. Taken for a bound method, every segment holding torch.zeros broke the
    # graph ("the last reference to a value that runs code when collected"; found at the merge, after
    # tests/dynamic's jit tests left one)
    registry = weakref.WeakKeyDictionary()
    registry[torch.zeros] = "kept"
    report = assert_parity(_zeros_after_an_item, lambda: (torch.ones(3),), calls=2)
    breaks = [e.graph_break for v in report.compiled.all_cache_entries().values() for e in v if e.graph_break]
    assert breaks and all(b.kind == "data_dependent" for b in breaks), [b.format() for b in breaks]
    assert registry[torch.zeros] == "kept"
