"""Regressions found by hand-written parity probes: containers mutated while they are iterated, across graph breaks
(dict, OrderedDict, defaultdict, deque, set, reversed views). Each is compared with eager on both backends: the
same values, the same exception at the same point; a gap that remains is a strict xfail naming what it needs."""

from __future__ import annotations

import collections

import pytest
import torch

from stillframe.check.parity import assert_parity

BACKENDS = ["eager", "aot_eager"]


def _args(i=0):
    return (torch.randn(2, 3) + i,)


def _opaque():
    print(end="")  # a graph break


def _strict_xfail(reason: str):
    return pytest.mark.xfail(strict=True, reason=reason)


# ------------------------------------------------------------------ dict


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_key_deleted_and_added_again_after_a_break_raises(backend):
    # eager: the second next finds k0's new entry when it expects no more items ('dictionary keys changed during
    # iteration'); the stand-in iterator over the rebuilt dict could not see a delete and re-add, and finished
    def fn(x):
        d = {"k0": x, "k1": x + 1}
        seen = []
        try:
            for k in d.keys():
                _opaque()
                v = d.pop(k)
                d[k] = v
                seen.append(k)
        except RuntimeError as e:
            return x + 1, seen, str(e), d
        return x - 1, seen, "no error", d

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_items_renamed_after_a_break_follow_the_rebuilt_table(backend):
    # each key is renamed (same size): the third insertion rebuilds CPython's table, and the iterator ends without
    # an error; the stand-in raised 'dictionary keys changed during iteration'
    def fn(x):
        d = {"a": x, "b": 2, "c": 3}
        seen = []
        try:
            for k, v in d.items():
                _opaque()
                d[k + "z"] = d.pop(k)
                seen.append(k)
        except RuntimeError as e:
            return x + 1, seen, str(e), list(d)
        return x - 1, seen, "no error", list(d)

    assert_parity(fn, _args, backend=backend, calls=3)


def _readd_each(d, x):
    seen = []
    try:
        for k in d:
            _opaque()
            d[k] = d.pop(k)
            seen.append(k)
    except RuntimeError as e:
        return x + 1, seen, str(e)
    return x - 1, seen, "no error"


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_from_a_caller_key_readded_after_a_break_raises(backend):
    # the dict is made in the caller, iterated in an inlined callee
    def fn(x):
        return _readd_each({"k0": 1, "k1": 2}, x)

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_argument_key_readded_after_a_break_raises(backend):
    # a dict from outside: the rebuilt iterator is CPython's own over the caller's dict
    def fn(x, d):
        return _readd_each(d, x)

    assert_parity(fn, lambda i=0: (torch.randn(2) + i, {"k0": 1, "k1": 2}), backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_iterator_next_after_a_break_and_a_readd_raises(backend):
    def fn(x):
        d = {"a": 1, "b": 2, "c": 3}
        it = iter(d)
        first = next(it)
        _opaque()
        del d["a"]
        d["a"] = 1
        try:
            return x + 1, first, list(it)
        except RuntimeError as e:
            return x - 1, first, str(e)

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_grown_after_a_break_error_is_sticky(backend):
    # CPython's iterator keeps raising 'changed size' (di_used = -1); it does not stop
    def fn(x):
        d = {"a": 1, "b": 2}
        it = iter(d)
        next(it)
        _opaque()
        d["c"] = 3
        del d["c"]
        errors = []
        for _ in range(3):
            try:
                errors.append(next(it))
            except (RuntimeError, StopIteration) as e:
                errors.append(type(e).__name__ + str(e))
        return x + 1, errors

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_value_overwritten_after_a_break_is_read(backend):
    # a value written (keys unchanged) is no structural change: it is read by the next items
    def fn(x):
        d = {"a": 1, "b": 2, "c": 3}
        seen = []
        for k, v in d.items():
            _opaque()
            d["c"] = v * 10
            seen.append((k, v))
        return x + 1, seen, d

    assert_parity(fn, _args, backend=backend, calls=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_key_readded_before_a_break_raises(backend):
    # the change comes before the break: the iterator cannot be rebuilt where eager's stands, the frame runs for real
    def fn(x):
        d = {"k0": 1, "k1": 2}
        seen = []
        try:
            for k in d:
                d[k] = d.pop(k)
                _opaque()
                seen.append(k)
        except RuntimeError as e:
            return x + 1, seen, str(e)
        return x - 1, seen, "no error"

    assert_parity(fn, _args, backend=backend, calls=3, expect_fallback=True)
