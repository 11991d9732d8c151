"""A grad-mode context manager made in traced code and not entered yet at a graph break (issue 11:
``contextlib.ExitStack`` raised stillframe's ``FrozenInstanceError``, and leaving a rebuilt ``no_grad`` set the
opposite of its mode instead of the mode it found).

``torch.no_grad()`` and ``torch.enable_grad()`` hold no state before they are entered, so the rebuild makes a
new one, torch's own object, and the code after the break enters it as eager does (``@torch.no_grad()`` on a
nested function breaks the graph at the decoration with the object live). ``torch.set_grad_enabled(b)`` set the
mode when it was made and keeps the mode it restores: no stand-in can be both torch's own object and what the
trace knows of it, so that function runs eagerly, with one warning naming why, and matches eager."""

import contextlib

import torch

from stillframe.check.parity import assert_parity


def exit_stack_with_no_grad(x):
    log = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.no_grad())
        stack.callback(log.append, 1)
        y = x * 2
    return y, x * 3, log, torch.is_grad_enabled()


def test_exit_stack_enters_a_no_grad_made_in_the_trace():
    assert_parity(exit_stack_with_no_grad, lambda: (torch.ones(2, requires_grad=True),), calls=2)


def no_grad_object_across_a_break_inside_no_grad(x):
    with torch.no_grad():
        cm = torch.no_grad()
        print("a graph break while cm is live")
        with cm:
            y = x * 2
        still_off = torch.is_grad_enabled()  # leaving the inner block restores the outer no_grad's mode
    return y, still_off, x * 3


def test_leaving_a_rebuilt_no_grad_restores_the_mode_it_found(capsys):
    assert_parity(no_grad_object_across_a_break_inside_no_grad, lambda: (torch.ones(2, requires_grad=True),),
                  calls=2)


def grad_mode_decorators_on_nested_functions(x):
    @torch.no_grad()
    def frozen(t):
        return t * 2

    @torch.enable_grad()
    def tracked(t):
        return t * 3

    a = frozen(x)
    with torch.no_grad():
        b = tracked(x)
    return a, b, a.requires_grad, b.requires_grad, torch.is_grad_enabled()


def test_grad_mode_decorators_on_nested_functions():
    assert_parity(grad_mode_decorators_on_nested_functions, lambda: (torch.ones(2, requires_grad=True),), calls=3)


def set_grad_enabled_object_across_a_break(x):
    cm = torch.set_grad_enabled(False)  # applies at once
    print("a graph break while cm is live")
    y = x * 2
    with cm:
        z = x * 3
    return y, z, torch.is_grad_enabled(), x * 4


def test_a_rebuilt_set_grad_enabled_restores_the_mode_before_it(capsys):
    report = assert_parity(set_grad_enabled_object_across_a_break, lambda: (torch.ones(2, requires_grad=True),),
                           calls=2, expect_fallback=True)
    assert "holds the mode it restores" in str(report.warnings[0].message)
