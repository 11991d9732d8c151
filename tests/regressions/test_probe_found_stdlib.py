"""Regressions found by hand-written parity probes of the standard library and the language as model code uses them
(session 31). Each is compared with eager on both backends."""

from __future__ import annotations

import io
import logging
import os
import warnings

import pytest
import torch

import stillframe
from stillframe.check.parity import assert_parity

BACKENDS = ["eager", "aot_eager"]


def _item_inside_no_grad(x):
    with torch.no_grad():
        y = x * 2
        s = y.sum().item()
    return y, s


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_grad_block_left_after_a_break_restores_grad_mode(backend):
    # the plan after the .item() break was traced twice (a retry), and the first try's fetch had switched the
    # process's grad mode to the graph's; the second compared its traced mode with that one and never switched back:
    # the first call left autograd off for the caller. Each try now starts from the global state as found
    assert_parity(_item_inside_no_grad, lambda i=0: (torch.randn(3) + i,), backend=backend, calls=3)
    stillframe.reset()
    torch.set_grad_enabled(True)
    stillframe.compile(_item_inside_no_grad, backend=backend)(torch.randn(3))
    assert torch.is_grad_enabled()


def _warn_for_caller(t):
    warnings.warn("from a helper", DeprecationWarning, stacklevel=2)
    return t + 1


def _warning_names_the_helpers_caller(x):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        y = _warn_for_caller(x * 2)
    return y, [(os.path.basename(w.filename), w.lineno) for w in seen]


def _error_filter_on_this_module(x):
    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=DeprecationWarning, module=__name__)
        try:
            return _warn_for_caller(x)
        except DeprecationWarning:
            return x - 1


@pytest.mark.parametrize("fn", [_warning_names_the_helpers_caller, _error_filter_on_this_module])
@pytest.mark.parametrize("backend", BACKENDS)
def test_warning_with_stacklevel_names_the_callers_frame(backend, fn):
    # warnings.warn ran for real through a trampoline claiming the helper's line alone, so stacklevel=2 named
    # stillframe's executor (executors.py) instead of the helper's caller, and a filter on the user's module
    # missed it: the user's `except DeprecationWarning` never ran. A real step now calls through one trampoline per
    # user frame on the stack, inlined callers included
    assert_parity(fn, lambda i=0: (torch.ones(2) + i,), backend=backend, calls=2)


def _warn_once_per_location(x):
    warnings.warn("careful")
    return x + 1


@pytest.mark.parametrize("backend", ["eager"])
def test_warning_registry_is_the_users_module(backend):
    # the trampoline a real step runs through had globals of its own, so warnings kept its __warningregistry__
    # there: under the default filters a warning shown by an eager call was shown again by the compiled one.
    # (Not on aot_eager: AOTAutograd's compile on the first call enters warnings.catch_warnings, whose exit bumps
    # the filters' version, which empties every registry: the warning is shown again there, as torch.compile does)
    def shown(fn):
        with warnings.catch_warnings(record=True) as seen:
            warnings.resetwarnings()
            warnings.simplefilter("default")
            globals().pop("__warningregistry__", None)
            fn(torch.ones(1))
            fn(torch.ones(1))
        return [str(w.message) for w in seen], "__warningregistry__" in globals()

    stillframe.reset()
    compiled = stillframe.compile(_warn_once_per_location, backend=backend)
    assert shown(lambda x: (_warn_once_per_location(x), compiled(x))) == shown(
        lambda x: (_warn_once_per_location(x), _warn_once_per_location(x)))


class _Counting(logging.Filter):
    def __init__(self):
        super().__init__()
        self.seen = []

    def filter(self, record):
        self.seen.append(record.getMessage())
        return True


_COUNT = _Counting()
_FILTERED = logging.getLogger("stillframe.tests.stdlib.filtered")
_FILTERED.propagate = False
_FILTERED.addHandler(logging.NullHandler())
_FILTERED.addFilter(_COUNT)
_FILTERED.setLevel(logging.INFO)


def _log_then_read_what_a_filter_counted(x):
    before = len(_COUNT.seen)
    _FILTERED.info("step")
    return x + (len(_COUNT.seen) - before)


_BUF = io.StringIO()
_PLAIN = logging.getLogger("stillframe.tests.stdlib.plain")
_PLAIN.propagate = False
_PLAIN_HANDLER = logging.StreamHandler(_BUF)
_PLAIN_HANDLER.setFormatter(logging.Formatter("%(funcName)s:%(lineno)d %(message)s"))
_PLAIN.addHandler(_PLAIN_HANDLER)
_PLAIN.setLevel(logging.INFO)


def _log_exception_in_handler(x):
    start = len(_BUF.getvalue())
    try:
        raise KeyError("k")
    except KeyError:
        _PLAIN.exception("oops")
        _PLAIN.error("again", exc_info=True)
    return x * 2, _BUF.getvalue()[start:].count("KeyError")


def _log_for_caller(t):
    _PLAIN.info("hi", stacklevel=2)
    return t + 1


def _log_with_stacklevel(x):
    start = len(_BUF.getvalue())
    y = _log_for_caller(x)
    return y, _BUF.getvalue()[start:]


@pytest.mark.parametrize("fn", [_log_then_read_what_a_filter_counted, _log_exception_in_handler, _log_with_stacklevel])
@pytest.mark.parametrize("backend", BACKENDS)
def test_logging_calls_a_replay_would_change(backend, fn):
    # a logging call was deferred to after the graph whatever it met: a filter of the user's counted the record
    # after the function had read the count; logger.exception / exc_info=True logged "NoneType: None" (replayed
    # outside the handler); stacklevel=2 named stillframe's rebuild function. Only a call whose record meets no user
    # code (plain handlers and formatters, no filters: a guard checks it on every call) and that reads neither the
    # exception nor the stack is deferred now
    assert_parity(fn, lambda i=0: (torch.ones(2) + i,), backend=backend, calls=2)
