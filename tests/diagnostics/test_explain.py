"""``stillframe.explain`` and ``stillframe explain``: the report names each graph break's kind, file, line and
reason, counts graphs, shows guards readably, lists recompiles and eager fallbacks."""

from __future__ import annotations

import inspect
import logging
import os
import subprocess
import sys
import warnings

import pytest
import torch

import stillframe
from stillframe.diagnostics.explain import ExplainReport

HERE = os.path.abspath(__file__)


def line_of(fn, marker: str) -> int:
    """The line number of the first line of ``fn``'s source containing ``marker``."""
    lines, first = inspect.getsourcelines(fn)
    for i, text in enumerate(lines):
        if marker in text:
            return first + i
    raise AssertionError(f"{marker!r} not in the source of {fn.__qualname__}")


def only_break(report: ExplainReport):
    assert report.break_count == 1, report.format()
    return report.breaks[0]


def assert_break_at(br, fn, marker: str, kind: str | None = None) -> None:
    assert br.location is not None, br
    assert os.path.abspath(br.location.filename) == HERE, br.location
    assert br.location.lineno == line_of(fn, marker), br.format()
    assert marker in br.location.source, br.location
    if kind is not None:
        assert br.kind == kind, br.format()


# --------------------------------------------------------------------------- one test per break kind
def brk_print(x):
    y = x.sin()
    print("between graphs")  # BREAK
    return y + 1


def brk_item(x):
    y = x.sin()
    if y.sum().item() > 0:  # BREAK
        return y + 1
    return y - 1


def brk_tolist(x):
    y = x.cos()
    values = y.tolist()  # BREAK
    return y * len(values)


def brk_if_tensor(x):
    y = x * 2
    if y.sum():  # BREAK
        return y
    return -y


def brk_bool(x):
    y = x * 2
    flag = bool(y.sum() > 0)  # BREAK
    return y + flag


def brk_warn(x):
    y = x * 2
    warnings.warn("careful")  # BREAK
    return y + 1


def test_print_break(capsys):
    report = stillframe.explain(brk_print)(torch.ones(3))
    br = only_break(report)
    assert_break_at(br, brk_print, 'print("between graphs")', "unsupported_builtin")
    assert "print" in br.explanation
    assert capsys.readouterr().out == "between graphs\n"
    assert report.graph_count == 2


@pytest.mark.parametrize("fn,marker,what", [
    (brk_item, "if y.sum().item() > 0:", "item"),
    (brk_tolist, "values = y.tolist()", "tolist"),
    (brk_if_tensor, "if y.sum():", "value of a tensor"),
    (brk_bool, "flag = bool(y.sum() > 0)", "value of a tensor"),
], ids=["item_in_if", "tolist", "if_tensor", "bool_tensor"])
def test_data_dependent_breaks(fn, marker, what):
    report = stillframe.explain(fn)(torch.randn(3))
    if fn is brk_item:
        # the float .item() read is data: comparing it in Python runs for real too (a second break), so the
        # plan never guards on the value (no re-trace per value: test_item_value_does_not_recompile); both on
        # one line, they are one break site, as torch.compile counts its one break there
        assert report.break_count == 1 and len(report.breaks) == 2, report.format()
        assert "used in Python code" in report.breaks[1].explanation
        br = report.breaks[0]
    else:
        br = only_break(report)
    assert_break_at(br, fn, marker, "data_dependent")
    assert what in br.explanation, br.format()
    assert br.hints, "a data-dependent break comes with a hint"
    assert report.graph_count == (3 if fn is brk_item else 2)


def test_item_value_does_not_recompile(capsys):
    """A float read out of a tensor and used in Python (rounded, printed, compared) is never guarded by value:
    new values reuse the same plans (TorchDynamo does not specialize floats either)."""

    def step(x):
        loss = (x ** 2).mean()
        print("loss", round(loss.item(), 3))
        return loss * 2

    compiled = stillframe.compile(step, backend="eager")
    for i in range(6):
        x = torch.randn(4)
        torch.testing.assert_close(compiled(x), step(x))
    assert stillframe.counters["recompiles"] == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0::2] == out[1::2]  # each compiled call printed what its eager call printed


def test_warnings_warn_break():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = stillframe.explain(brk_warn)(torch.ones(3))
    assert [str(w.message) for w in caught] == ["careful"]  # the user's warning is not swallowed
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, line_of(brk_warn, 'warnings.warn("careful")'))]
    br = only_break(report)
    assert_break_at(br, brk_warn, 'warnings.warn("careful")', "unsupported_call")
    assert report.graph_count == 2


def brk_numpy(x):
    y = x * 2
    array = y.numpy()  # captured through torch._numpy (issue 16); a write into the array is not
    array[0] = 1.0  # BREAK
    return y + 1, array


def test_numpy_break_location():
    report = stillframe.explain(brk_numpy)(torch.ones(3))
    br = only_break(report)
    assert_break_at(br, brk_numpy, "array[0] = 1.0")
    assert "ndarray" in br.explanation
    assert report.graph_count == 2


def test_numpy_break_kind():
    br = only_break(stillframe.explain(brk_numpy)(torch.ones(3)))
    assert br.kind != "user_exception", br.format()
    assert "RuntimeError" not in br.explanation, br.format()


def brk_logging(x, logger):
    y = x * 2
    logger.info("value computed")  # deferred: no break
    return y + 1


def test_logging_break():
    logger = logging.getLogger("stillframe.tests.explain.fresh")  # never used: its level cache is empty
    logger.propagate = False  # (pytest's capture handlers on the root logger are not plain: no deferral there)
    logger.addHandler(logging.NullHandler())
    report = stillframe.explain(brk_logging)(torch.ones(3), logger)
    assert report.break_count == 0 and report.graph_count == 1  # deferred to right after the graph
    assert torch.equal(report.result, torch.full((3,), 3.0))


def brk_raise(x):
    y = x * 2
    if y.sum() > 100:
        raise ValueError("too big")  # BREAK
    return y + 1


def test_user_exception_under_data_dependent_condition():
    explained = stillframe.explain(brk_raise)
    report = explained(torch.ones(3))
    assert_break_at(only_break(report), brk_raise, "if y.sum() > 100:", "data_dependent")
    with pytest.raises(ValueError, match="too big"):
        explained(torch.full((3,), 100.0))
    report = explained.report()  # what the compiled object did, the failed call included
    raising = [br for br in report.breaks if br.kind == "user_exception"]
    assert len(raising) == 1, report.format()
    assert_break_at(raising[0], brk_raise, 'raise ValueError("too big")')
    assert "ValueError" in raising[0].explanation and "too big" in raising[0].explanation


# --------------------------------------------------------------------------- graphs, guards, recompiles
def no_break(x, y):
    return torch.relu(x) * y + 1


def two_breaks(x):
    x = x + 1
    print("one")
    x = x * 2
    print("two")
    return x - 3


def test_graph_counts(capsys):
    report = stillframe.explain(no_break)(torch.randn(3), torch.randn(3))
    assert (report.graph_count, report.break_count, report.op_count) == (1, 0, 3)
    assert report.graphs[0].name == "no_break" and not report.graphs[0].resume
    assert report.graphs[0].lineno == no_break.__code__.co_firstlineno
    assert report.graphs[0].ends_with is None
    assert "torch.relu" in report.graphs[0].code

    report = stillframe.explain(two_breaks)(torch.randn(3))
    assert (report.graph_count, report.break_count) == (3, 2)
    assert [g.op_count for g in report.graphs] == [1, 1, 1]
    first, second, third = report.graphs
    assert first.ends_with is report.breaks[0] and second.ends_with is report.breaks[1] and third.ends_with is None
    assert second.resume and second.name == "two_breaks"
    assert second.lineno == line_of(two_breaks, 'print("one")')  # resumes right after the print
    assert third.lineno == line_of(two_breaks, 'print("two")')
    assert capsys.readouterr().out == "one\ntwo\n"


def inner(x):
    print("deep")
    return x + 1


def middle(x):
    return inner(x * 2)


def outer(x):
    return middle(x.sin()).cos()


def test_resumed_graph_names_its_call_stack():
    report = stillframe.explain(outer)(torch.ones(2))
    assert report.graph_count == 2
    resumed = report.graphs[1]
    assert resumed.resume and resumed.name == "inner"
    assert [s.split(" ")[0] for s in resumed.stack] == ["outer", "middle", "inner"]
    assert f"{HERE}:{line_of(middle, 'return inner(x * 2)')}" in resumed.stack[1]
    assert "call stack: outer" in report.format()


def test_guards_are_readable():
    report = stillframe.explain(no_break)(torch.randn(3), torch.randn(3))
    (entry,) = report.guards
    assert not entry.eager and entry.entry.startswith("starts at no_break")
    text = "\n".join(entry.guards)
    assert "L['x'] is a Tensor(" in text and "shape=(3,)" in text
    assert "L['y'] is a Tensor(" in text
    assert "torch.is_grad_enabled() == True" in text
    assert report.graphs[0].guards == entry.guards


def test_recompile_lists_the_failing_guard():
    explained = stillframe.explain(no_break)
    assert explained(torch.randn(3), torch.randn(3)).recompiles == []
    report = explained(torch.randn(5), torch.randn(5))
    assert report.graph_count == 1 and report.plan_count == 2  # one site, one plan per shape
    (recompile,) = report.recompiles
    assert recompile.where == f"{HERE}:{no_break.__code__.co_firstlineno}"
    assert recompile.guard.startswith("L['x'] is a Tensor(") and "shape=(3,)" in recompile.guard
    assert "Recompiles:" in report.format() and recompile.guard in report.format()
    # a third call with a seen shape is a cache hit: nothing new
    assert len(explained(torch.randn(3), torch.randn(3)).recompiles) == 1


class Holder:
    pass


def falls_back(x, obj):
    del obj.attr

    try:
        raise ExceptionGroup("group", [ValueError(1)])
    except* ValueError:  # `except*` has no handler and no real step: the whole call runs eagerly
        pass
    return x + 1


def test_fallback_is_reported_with_its_reason():
    obj = Holder()
    obj.attr = 1
    report = stillframe.explain(falls_back)(torch.ones(2), obj)
    assert not hasattr(obj, "attr")  # it ran (eagerly)
    assert torch.equal(report.result, torch.full((2,), 2.0))
    (fallback,) = report.fallbacks
    assert "CHECK_EG_MATCH" in fallback.reason and fallback.where.startswith("starts at falls_back")
    assert report.graph_count == 0
    assert any("CHECK_EG_MATCH" in w for w in report.warnings)  # collected, not shown
    assert report.guards[0].eager
    assert "Eager fallbacks:" in report.format()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        print("net")  # BREAK
        return y.relu()


def test_module(capsys):
    report = stillframe.explain(Net())(torch.randn(2, 4))
    assert report.graph_count == 2
    assert_break_at(only_break(report), Net.forward, 'print("net")', "unsupported_builtin")
    assert report.name.startswith("Net.forward")
    assert report.result.shape == (2, 4)


def test_fullgraph_raises_at_the_first_break():
    with pytest.raises(stillframe.Unsupported) as info:
        stillframe.explain(two_breaks, fullgraph=True)(torch.ones(2))
    assert info.value.graph_break.location.lineno == line_of(two_breaks, 'print("one")')


def test_format_shows_everything(capsys):
    text = str(stillframe.explain(brk_item)(torch.ones(3)))
    lineno = line_of(brk_item, "if y.sum().item() > 0:")
    assert text.startswith(f"stillframe.explain: brk_item ({HERE}:{brk_item.__code__.co_firstlineno})")
    # .item(), then the comparison of the float it read: two breaks taken, at one site (one line)
    assert "3 graphs, 1 graph break (over 3 plans, 2 breaks taken), " in text
    assert f"1. data_dependent at {HERE}:{lineno}" in text
    assert "if y.sum().item() > 0:" in text  # the source line
    assert "hint: " in text
    assert f"Graph 1: starts at brk_item ({HERE}:{brk_item.__code__.co_firstlineno}); 2 ops; ends at graph break 1" \
        in text
    assert "Graph 2: resumes brk_item at" in text
    assert "def forward(" in text and "guards:" in text
    assert "def forward(" not in stillframe.explain(brk_item)(torch.ones(3)).format(code=False)


def test_explaining_an_already_compiled_object():
    compiled = stillframe.compile(no_break, backend="eager")
    compiled(torch.randn(3), torch.randn(3))
    report = stillframe.explain(compiled)(torch.randn(4), torch.randn(4))
    assert report.plan_count == 2 and len(report.recompiles) == 1  # its earlier call is in the report


def test_routed_compiles_records_and_restores():
    from stillframe.diagnostics.explain import routed_compiles

    original = torch.compile
    with routed_compiles() as created:
        plain = torch.compile(no_break)
        decorated = torch.compile(backend="inductor", mode="max-autotune")(no_break)  # backend replaced: eager
        own = stillframe.compile(Net())
    assert torch.compile is original and stillframe.compile is stillframe.api.compile
    assert created == [plain, decorated, own]
    assert isinstance(plain, stillframe.CompiledFunction) and isinstance(own, stillframe.CompiledModule)
    decorated(torch.randn(2), torch.randn(2))
    assert stillframe.explain(decorated).report().graph_count == 1


def test_exported():
    assert "explain" in stillframe.__all__


# --------------------------------------------------------------------------- the command
PROGRAM = '''
import sys
import torch
import stillframe


def helper(x):
    y = x * 2
    print("helper ran")
    return y + 1


@torch.compile
def top(x):
    return helper(x.sin())


def model(x):
    return torch.relu(x) + 1


def model_example_inputs():
    return (torch.randn(4),)


def main():
    top(torch.ones(3))
    top(torch.ones(5))


def needs(x):
    return x


def crash():
    top(torch.ones(3))
    raise RuntimeError("boom")


if __name__ == "__main__":
    print("argv", sys.argv[1:])
    main()
'''


CLI_RUNS = {  # name -> arguments after `stillframe explain` (the program's path is {prog})
    "entry_point": ["{prog}:main", "--no-code"],
    "script": ["{prog}", "a", "--b"],
    "bad_target": ["{prog}:nope"],
}


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    path = tmp_path_factory.mktemp("explain") / "prog.py"
    path.write_text(PROGRAM)
    return str(path)


@pytest.fixture(scope="module")
def cli(program):
    """Every CLI run of this module, started at once (each subprocess spends seconds importing torch)."""
    env = dict(os.environ)
    env.pop("STILLFRAME_LOGS", None)
    procs = {name: subprocess.Popen([sys.executable, "-m", "stillframe", "explain",
                                     *(a.format(prog=program) for a in args)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for name, args in CLI_RUNS.items()}
    done = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=180)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


def test_cli_entry_point(program, cli):
    done = cli["entry_point"]
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.splitlines().count("helper ran") == 2
    assert f"stillframe.explain: top ({program}:13)" in out
    assert "2 graphs, 1 graph break (over 4 plans, 2 breaks taken)" in out and "2 recompiles" in out
    assert f"unsupported_builtin at {program}:9" in out
    assert "guard failed: L['x'] is a Tensor(" in out
    assert "def forward" not in out


def in_process(capsys, *args):
    """``stillframe explain ARGS`` in this process (faster than a subprocess): (status, stdout, stderr)."""
    from stillframe.cli import main

    status = main(["explain", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_cli_example_inputs(program, capsys):
    status, out, err = in_process(capsys, f"{program}:model")
    assert status == 0, err
    assert f"stillframe.explain: model ({program}:18)" in out
    assert "1 graph, 0 graph breaks, 2 ops" in out
    assert "torch.relu" in out
    assert "stillframe.explain: top" not in out  # compiled at import, never called: only named
    assert f"Compiled but never called: top ({program}:13)" in out
    assert torch.compile is not stillframe.compile  # the routing is undone


def test_cli_script(cli):
    done = cli["script"]
    assert done.returncode == 0, done.stderr
    assert "argv ['a', '--b']" in done.stdout
    assert "stillframe.explain: top" in done.stdout and "2 graphs, 1 graph break (over 4 plans" in done.stdout


def test_cli_program_that_raises(program, capsys):
    status, out, err = in_process(capsys, f"{program}:crash")
    assert status == 1
    assert "2 graphs, 1 graph break" in out  # what ran before the error is reported
    assert "RuntimeError: boom" in err


def test_cli_bad_target_exit_status(cli):
    done = cli["bad_target"]
    assert done.returncode == 2
    assert "has no function 'nope'" in done.stderr and done.stdout == ""


@pytest.mark.parametrize("target,message", [
    (":nope", "has no function 'nope'"),
    (":needs", "takes arguments (x): define needs_example_inputs()"),
    (":sys", "is not callable"),
    ("missing.py:main", "no such file"),
    ("notes.txt", "is neither SCRIPT.py nor FILE.py:FUNCTION"),
    (":main extra", "extra arguments after"),
], ids=["no_function", "needs_arguments", "not_callable", "no_file", "not_python", "arguments_to_function"])
def test_cli_bad_target(program, target, message, capsys):
    with open(os.path.join(os.path.dirname(program), "notes.txt"), "w") as f:
        f.write("not python\n")
    target = program + target if target.startswith(":") else os.path.join(os.path.dirname(program), target)
    target, *rest = target.split(" ")
    status, out, err = in_process(capsys, target, *rest)
    assert status == 2 and out == ""
    assert err.startswith("stillframe explain: error: ") and message in err


def test_cli_script_exit_status_is_kept(tmp_path, capsys):
    script = tmp_path / "exits.py"
    script.write_text("import sys, torch\n"
                      "f = torch.compile(lambda x: x + 1)\n"
                      "f(torch.ones(2))\n"
                      "sys.exit(int(sys.argv[1]))\n")
    status, out, err = in_process(capsys, str(script), "3")
    assert status == 3
    assert "1 graph, 0 graph breaks, 1 op" in out and "stillframe.explain: <lambda>" in out
    assert "exited with status 3" in err
