"""The traceback of a user's exception from compiled code is eager's: the user's frames, lines and carets, and
none of stillframe's (``config.verbose_tracebacks`` keeps them, for debugging stillframe).
"""

from __future__ import annotations

import os
import traceback
import warnings

import pytest
import torch

import stillframe

STILLFRAME = os.path.dirname(stillframe.__file__)


def lookup(d):
    return d["missing"]


def breaks_then_fails(x, d):
    y = x + 1
    print("", end="")  # a graph break: what follows is a resumed plan and real steps
    z = lookup(d)
    return y * z


def raises_on_data(x):
    if x.sum() > 0:  # a data-dependent branch: the raise runs for real
        raise ValueError("positive sum")
    return x


def fails_in_a_graph(x):
    return x @ torch.ones(5, 5)  # a shape error: the traced op raises, the call runs eagerly


def _frames(call, *args):
    """The traceback below this test's own frame: (file, line, function, source, columns) per frame."""
    try:
        call(*args)
    except Exception as e:  # noqa: BLE001
        summary = traceback.extract_tb(e.__traceback__)[1:]
        text = "".join(traceback.format_exception_only(type(e), e))
        return [(f.filename, f.lineno, f.name, f.line, f.colno, f.end_colno) for f in summary], text
    raise AssertionError("nothing was raised")


@pytest.mark.parametrize("fn, args", [(breaks_then_fails, (torch.ones(2), {})), (raises_on_data, (torch.ones(2),)),
                                      (fails_in_a_graph, (torch.ones(2, 3),))],
                         ids=["after_a_break", "raise_for_real", "shape_error"])
def test_the_traceback_is_eagers(fn, args, capsys):
    eager = _frames(fn, *args)
    compiled = stillframe.compile(fn, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stillframe.StillframeWarning)
        for _ in range(2):  # traced, then from the cache
            ours = _frames(compiled, *args)
            assert not any(f[0].startswith(STILLFRAME) for f in ours[0]), ours[0]
            assert ours == eager


def test_verbose_tracebacks_keep_stillframes_frames(capsys):
    stillframe.config.verbose_tracebacks = True
    frames, _ = _frames(stillframe.compile(breaks_then_fails, backend="eager"), torch.ones(2), {})
    assert any(f[0].startswith(STILLFRAME) for f in frames)
    assert [f[2] for f in frames if f[0] == __file__][-2:] == ["breaks_then_fails", "lookup"]


class Looking(torch.nn.Module):
    def forward(self, x, d):
        return breaks_then_fails(x, d) * 2


@pytest.mark.parametrize("hooked", [False, True], ids=["plain", "hooked_wrapper"])
def test_the_traceback_through_a_compiled_module_is_eagers(hooked, capsys):
    """As from a compiled function: none of stillframe's frames (the wrapper's ``__call__`` and ``forward`` were
    left in), and the user's frames are eager's; torch's own (``nn.Module._call_impl``) may be there or not."""
    module = Looking()
    compiled = stillframe.compile(module, backend="eager")
    if hooked:  # a hook on the wrapper: the call goes through nn.Module.__call__
        compiled.register_forward_pre_hook(lambda m, args: None)
    eager = _frames(module, torch.ones(2), {})
    for _ in range(2):
        ours = _frames(compiled, torch.ones(2), {})
        assert not any(f[0].startswith(STILLFRAME) for f in ours[0]), ours[0]
        assert [f for f in ours[0] if f[0] == __file__] == [f for f in eager[0] if f[0] == __file__]
        assert ours[1] == eager[1]
