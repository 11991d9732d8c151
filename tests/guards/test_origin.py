"""Guard.origin: the user's line that installed each guard, shown by explain() and the recompile log."""

import inspect
import logging

import torch

import stillframe


def scaled(x, cfg):
    y = x + 1
    if cfg["scale"] > 2:  # the line that reads cfg["scale"]
        return y * cfg["scale"]
    return y


def _line(fn, marker):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def test_explain_names_the_line_that_installed_each_guard():
    report = stillframe.explain(scaled)(torch.ones(2), {"scale": 3})
    text = str(report)
    where = f"{__file__}:{_line(scaled, 'the line that reads')}"
    assert f"L['cfg']['scale'] == 3  (from {where})" in text
    assert f"L['x'] is a Tensor(" in text and f"(from {__file__}:{_line(scaled, 'y = x + 1')})" in text
    # The guards every entry has (grad mode, default dtype ...) come from no line of the user's.
    assert "torch.is_grad_enabled() == True\n" in text + "\n"


def test_recompile_log_names_the_guard_and_its_line(caplog):
    compiled = stillframe.compile(scaled, backend="eager")
    with caplog.at_level(logging.DEBUG, logger="stillframe"):
        expected = [scaled(torch.ones(2), {"scale": s}) for s in (3, 4)]
        got = [compiled(torch.ones(2), {"scale": s}) for s in (3, 4)]
    for e, c in zip(expected, got):
        torch.testing.assert_close(c, e)
    recompiles = [r.getMessage() for r in caplog.records if "recompiling" in r.getMessage()]
    assert recompiles, [r.getMessage() for r in caplog.records]
    assert f"(from {__file__}:{_line(scaled, 'the line that reads')})" in recompiles[0]
