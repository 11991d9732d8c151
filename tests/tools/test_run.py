"""``stillframe run SCRIPT.py [ARGS...]``: the script runs as under ``python``, torch.compile goes to stillframe,
and a summary of what was compiled goes to stderr at exit.

Most tests run a tiny generated script in this process (``stillframe.cli.main``);
a few start the real command, and the slow ones train ``examples/train_gpt.py``
under stillframe and eagerly and compare the loss curves step by step.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import stillframe
import stillframe.api
from stillframe.cli import main
from stillframe.errors import GraphBreak, GraphBreakKind, Unsupported

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN_GPT = os.path.join(ROOT, "examples", "train_gpt.py")


def write(tmp_path, source: str, name: str = "script.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source).lstrip())
    return str(path)


def line_with(path: str, marker: str) -> int:
    """The 1-based number of the first line of ``path`` containing ``marker``."""
    with open(path) as f:
        for number, text in enumerate(f, 1):
            if marker in text:
                return number
    raise AssertionError(f"{marker!r} not in {path}")


def run(capsys, *args: str) -> tuple[int, str, str]:
    """``stillframe run ARGS...`` in this process: (exit status, stdout, stderr)."""
    status = main(["run", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def python(script: str, *args: str) -> subprocess.CompletedProcess:
    """``python SCRIPT ARGS...`` (for scripts that do not import torch: fast)."""
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True, timeout=60)


# --------------------------------------------------------------------------- the summary
BREAKS = """
import torch

@torch.compile(backend="eager")
def step(x):
    y = x.sin()
    print("between graphs")  # BREAK
    return y + 1

print("result", step(torch.zeros(3)).tolist())
"""


def test_summary_names_the_function_and_its_graph_break(tmp_path, capsys):
    script = write(tmp_path, BREAKS)
    status, out, err = run(capsys, script)
    assert status == 0, err
    assert out == "between graphs\nresult [1.0, 1.0, 1.0]\n"  # the script's own output, unchanged
    assert f"stillframe run: {script} exited with status 0 after " in err
    assert f"[1] step ({script}:{line_with(script, '@torch.compile')})" in err  # co_firstlineno
    assert "2 graphs, 1 graph break, 0 recompiles, 0 eager fallbacks" in err
    assert f"1. unsupported_builtin at {script}:{line_with(script, '# BREAK')}: " in err
    assert 'print("between graphs")  # BREAK' in err  # the source line
    assert re.search(r"time: tracing \d+\.\d\d s, backend compile \d+\.\d\d s", err)
    assert "graph_breaks=1" in err  # the counters of this run


def test_summary_lists_recompiles_with_the_failing_guard(tmp_path, capsys):
    script = write(tmp_path, """
        import torch
        f = torch.compile(lambda x: x * 2, backend="eager")
        f(torch.ones(3))
        f(torch.ones(5))
        f(torch.ones(5))
    """)
    status, _, err = run(capsys, script)
    assert status == 0, err
    assert "1 graph, 0 graph breaks (over 2 plans, 0 breaks taken), 1 recompile, 0 eager fallbacks" in err
    assert f"1. at {script}:2: guard failed: L['x'] is a Tensor(" in err and "shape=(3,)" in err


def test_summary_counts_a_break_repeated_by_recompiles_once(tmp_path, capsys):
    script = write(tmp_path, BREAKS + "step(torch.zeros(5))\n")
    status, _, err = run(capsys, script)
    assert status == 0, err
    assert "2 graphs, 1 graph break (over 4 plans, 2 breaks taken), 2 recompiles" in err
    assert f"1. unsupported_builtin at {script}:{line_with(script, '# BREAK')}: " in err
    assert "(x2)" in err and "2. unsupported_builtin" not in err


def test_summary_names_objects_never_called_and_no_summary_turns_it_off(tmp_path, capsys):
    script = write(tmp_path, """
        import torch
        unused = torch.compile(lambda x: x, backend="eager")
    """)
    status, _, err = run(capsys, script)
    assert status == 0
    assert f"compiled, never called: <lambda> ({script}:2)" in err
    status, _, err = run(capsys, "--no-summary", script)
    assert status == 0 and err == ""


def test_script_without_compiles(tmp_path, capsys):
    status, out, err = run(capsys, write(tmp_path, "print('plain')\n"))
    assert status == 0 and out == "plain\n"
    assert "no compiled objects" in err


# --------------------------------------------------------------------------- running the script as python does
ARGV = """
import json, os, sys
print(json.dumps({"argv": sys.argv, "name": __name__, "file": __file__, "path0": sys.path[0]}))
"""


def test_argv_name_file_and_path_are_as_under_python(tmp_path, capsys, monkeypatch):
    script = write(tmp_path, ARGV)
    monkeypatch.chdir(tmp_path)
    args = ["script.py", "a", "--steps", "3", "--no-summary", "--backend", "x"]
    # options after SCRIPT.py are the script's, even ones `stillframe run` has itself
    status, out, err = run(capsys, *args)
    assert status == 0, err
    assert "stillframe run:" in err  # --no-summary went to the script
    assert str(tmp_path) not in sys.path and sys.argv[0] != "script.py"  # both restored
    want = python(*args)
    assert json.loads(out) == json.loads(want.stdout) == {
        "argv": args, "name": "__main__", "file": script, "path0": str(tmp_path)}  # sys.argv[0] as given


@pytest.mark.parametrize("exit_call,status,message", [
    ("sys.exit(3)", 3, None),
    ("sys.exit()", 0, None),
    ("sys.exit(0)", 0, None),
    ("sys.exit('giving up')", 1, "giving up"),
], ids=["status_3", "none", "zero", "message"])
def test_sys_exit_status_is_the_commands(tmp_path, capsys, exit_call, status, message):
    script = write(tmp_path, f"""
        import sys, torch
        f = torch.compile(lambda x: x + 1, backend="eager")
        f(torch.ones(2))
        {exit_call}
        print("not reached")
    """)
    got, out, err = run(capsys, script)
    assert got == status
    assert "not reached" not in out
    assert f"exited with status {status}" in err and "1 graph, 0 graph breaks" in err  # summarized all the same
    if message is not None:
        assert err.startswith(message + "\n")


def test_uncaught_exception_prints_the_traceback_python_prints_and_exits_1(tmp_path, capsys):
    script = write(tmp_path, """
        def fail(n):
            raise ValueError(f"bad input {n}")

        print("before")
        fail(len([1, 2]))
        print("after")
    """)
    status, out, err = run(capsys, script)
    want = python(script)
    assert (status, out) == (want.returncode, want.stdout) == (1, "before\n")
    assert want.stderr.startswith("Traceback (most recent call last):\n")
    assert err.startswith(want.stderr)  # from the script's first frame on: no frames of ours
    assert err[len(want.stderr):].startswith("=" * 78 + f"\nstillframe run: {script} exited with status 1 after ")


def test_summary_after_an_uncaught_exception_covers_what_ran(tmp_path, capsys):
    script = write(tmp_path, """
        import torch

        @torch.compile(backend="eager")
        def f(x):
            return x + 1

        f(torch.ones(2))
        raise KeyError("late")
    """)
    status, _, err = run(capsys, script)
    assert status == 1
    assert "KeyError: 'late'" in err and "exited with status 1" in err
    assert "[1] f (" in err and "1 graph, 0 graph breaks" in err


def test_syntax_error_is_reported_as_python_does(tmp_path, capsys):
    script = write(tmp_path, "x = 1\ny = (1,\n")
    status, _, err = run(capsys, script)
    want = python(script)
    assert status == want.returncode == 1
    assert "SyntaxError: " in want.stderr and err.startswith(want.stderr)


def test_missing_script_is_status_2(tmp_path, capsys):
    status, out, err = run(capsys, str(tmp_path / "missing.py"))
    assert status == 2 and out == ""
    assert err.startswith("stillframe run: error: no such file: ")


# --------------------------------------------------------------------------- what is routed
FORMS = """
import torch
import stillframe

def double(x):
    return x * 2

@torch.compile
def bare(x):
    return x.relu()

@torch.compile(backend="eager", fullgraph=True)
def called(x):
    return x.cos()

plain = torch.compile(double, backend="eager")
own = stillframe.compile(double, backend="eager")
linear = torch.nn.Linear(3, 2)
module = torch.compile(linear, backend="eager")
method = torch.nn.Linear(3, 2)
method.compile(backend="eager")

x = torch.randn(4, 3)
checks = {
    "bare": (bare(x), x.relu()),
    "called": (called(x), x.cos()),
    "plain": (plain(x), x * 2),
    "own": (own(x), x * 2),
    "module": (module(x), linear(x)),
    "method": (method(x), method._call_impl(x)),
}
for name, (got, want) in checks.items():
    assert torch.allclose(got, want), name
print("types", sorted({type(f).__name__ for f in (bare, called, plain, own, module)}))
print("method", type(method._compiled_call_impl.__self__).__name__)
"""


def test_every_compile_form_is_routed(tmp_path, capsys):
    script = write(tmp_path, FORMS)
    original = (torch.compile, stillframe.compile, torch.nn.Module.compile)
    status, out, err = run(capsys, "--backend", "eager", script)  # bare @torch.compile would be inductor
    assert status == 0, err
    assert "types ['CompiledFunction', 'CompiledModule']" in out
    assert "method CompiledModule" in out  # nn.Module.compile() compiles with stillframe too
    assert "6 compiled objects" in err
    for name in ("bare", "called", "double", "Linear.forward"):
        assert f"] {name} (" in err
    assert err.count("] Linear.forward (") == 2 and err.count("] double (") == 2
    assert (torch.compile, stillframe.compile, torch.nn.Module.compile) == original  # routing undone


def test_backend_is_the_scripts_own_unless_replaced(tmp_path, capsys):
    script = write(tmp_path, """
        import torch
        seen = []

        def my_backend(gm, example_inputs):
            seen.append(len(example_inputs))
            return gm

        f = torch.compile(lambda x: x - 1, backend=my_backend)
        f(torch.ones(2))
        print("backend calls", len(seen))
    """)
    status, out, _ = run(capsys, script)
    assert status == 0 and "backend calls 1" in out
    status, out, _ = run(capsys, "--backend", "eager", script)
    assert status == 0 and "backend calls 0" in out


def test_notes_for_arguments_stillframe_does_not_honour(tmp_path, capsys):
    script = write(tmp_path, """
        import functools, torch
        f = torch.compile(lambda x: x, backend="eager", mode="max-autotune", dynamic=True, recompile_limit=3)
        g = torch.compile(functools.partial(torch.add, other=1))
        print(g(torch.zeros(1)).tolist())
    """)
    status, out, err = run(capsys, "--backend", "aot_eager", script)
    assert status == 0, err
    assert out == "[1.0]\n"  # the partial ran uncompiled
    notes = err.split("notes:\n", 1)[1]
    assert f"{script}:2: torch.compile(recompile_limit=3) ignored: " in notes
    assert f"{script}:2: mode='max-autotune' dropped: backend 'aot_eager' replaces" in notes
    assert f"{script}:2: dynamic=True: stillframe specializes shapes" in notes
    assert f"{script}:3: partial object is neither a function nor an nn.Module: it runs uncompiled" in notes


# --------------------------------------------------------------------------- timing (stillframe/api.py)
def test_trace_and_backend_compile_time_are_recorded_apart():
    def slow_backend(gm, example_inputs):
        time.sleep(0.3)
        return gm

    def f(x):
        y = x.sin()
        print("break")
        return y.cos()

    compiled = stillframe.compile(f, backend=slow_backend)
    start = time.perf_counter()
    compiled(torch.ones(2))  # two graphs: two backend calls
    wall = time.perf_counter() - start
    assert compiled.compile_seconds >= 0.6
    assert 0 < compiled.trace_seconds and compiled.trace_seconds + compiled.compile_seconds <= wall
    seconds = (compiled.trace_seconds, compiled.compile_seconds)
    compiled(torch.ones(2))  # cache hits: no more time
    assert (compiled.trace_seconds, compiled.compile_seconds) == seconds
    stillframe.reset()
    assert compiled.trace_seconds == compiled.compile_seconds == 0.0


def test_failed_traces_count_as_tracing_time(monkeypatch):
    def f(x):
        return x + 1

    def failing_trace(*args, **kwargs):  # a trace that gets some way, then finds a construct it cannot capture
        time.sleep(0.01)
        raise Unsupported(GraphBreak(GraphBreakKind.UNSUPPORTED_OPCODE, "an opcode with no handler"))

    monkeypatch.setattr(stillframe.api, "compile_frame", failing_trace)
    compiled = stillframe.compile(f, backend="eager")
    with pytest.warns(stillframe.StillframeWarning):
        assert compiled(1) == 2  # the whole call ran eagerly
    assert compiled.trace_seconds > 0 and compiled.compile_seconds == 0


# --------------------------------------------------------------------------- the real command
@pytest.fixture(scope="module")
def commands(tmp_path_factory):
    """``python -m stillframe run`` on scripts that exit 4 and that raise, started together."""
    tmp = tmp_path_factory.mktemp("run")
    exits = write(tmp, """
        import sys, torch
        f = torch.compile(lambda x: x + 1, backend="eager")
        print(f(torch.ones(1)).item())
        sys.exit(int(sys.argv[1]))
    """, "exits.py")
    raises = write(tmp, """
        import torch
        raise RuntimeError("boom")
    """, "raises.py")
    procs = {name: subprocess.Popen([sys.executable, "-m", "stillframe", "run", *args], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
             for name, args in {"exits": [exits, "4"], "raises": [raises]}.items()}
    done = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


def test_command_exit_status(commands):
    done = commands["exits"]
    assert done.returncode == 4, done.stderr
    assert done.stdout == "2.0\n"
    assert "exited with status 4" in done.stderr and "1 graph, 0 graph breaks" in done.stderr


def test_command_uncaught_exception(commands):
    done = commands["raises"]
    assert done.returncode == 1
    assert done.stderr.startswith("Traceback (most recent call last):\n")
    assert "RuntimeError: boom\n" in done.stderr and "exited with status 1" in done.stderr


# --------------------------------------------------------------------------- examples/train_gpt.py
STEPS = 25
LOSS_LINE = re.compile(r"^step\s+(\d+)\s+loss\s+(\S+)$", re.M)


def losses(stdout: str) -> dict[int, float]:
    return {int(step): float(loss) for step, loss in LOSS_LINE.findall(stdout)}


def start_training(*prefix: str, eager: bool = False) -> subprocess.Popen:
    args = [*prefix, TRAIN_GPT, "--steps", str(STEPS), "--log-every", "1", *(["--eager"] if eager else [])]
    # one thread each: two runs at once on a small shared machine are several times slower with OpenMP's
    # threads competing for its cores (same numbers either way: both runs use the same thread count)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("STILLFRAME_LOGS", None)
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)


def finish(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def assert_same_curve(compiled: subprocess.CompletedProcess, eager: subprocess.CompletedProcess) -> None:
    assert eager.returncode == 0, eager.stderr
    assert compiled.returncode == 0, compiled.stderr
    want, got = losses(eager.stdout), losses(compiled.stdout)
    assert sorted(want) == list(range(STEPS)), eager.stdout
    assert sorted(got) == list(range(STEPS)), compiled.stdout
    for step in range(STEPS):
        assert got[step] == pytest.approx(want[step], rel=1e-4, abs=1e-5), (step, got[step], want[step])
    assert want[STEPS - 1] < want[0] - 0.5  # it learns: the comparison is not of two flat lines
    assert "exited with status 0" in compiled.stderr
    assert "1 compiled object;" in compiled.stderr


# `python -c` prefixes that hide transformers, so the script trains examples/gpt.py's model instead
HIDE = "import sys; sys.modules['transformers'] = None; "
RUN_WITHOUT_TRANSFORMERS = HIDE + "from stillframe.cli import main; sys.exit(main(sys.argv[1:]))"
PYTHON_WITHOUT_TRANSFORMERS = HIDE + "import runpy; sys.argv[:] = sys.argv[1:]; runpy.run_path(sys.argv[0], " \
                                     "run_name='__main__')"


@pytest.mark.slow
def test_train_gpt_under_stillframe_matches_eager():
    pytest.importorskip("transformers")
    compiled = start_training(sys.executable, "-m", "stillframe", "run")
    eager = start_training(sys.executable, eager=True)
    compiled, eager = finish(compiled), finish(eager)
    assert_same_curve(compiled, eager)
    assert "] GPT2LMHeadModel.forward (" in compiled.stderr


@pytest.mark.slow
def test_train_gpt_without_transformers_under_stillframe_matches_eager():
    compiled = start_training(sys.executable, "-c", RUN_WITHOUT_TRANSFORMERS, "run")
    eager = start_training(sys.executable, "-c", PYTHON_WITHOUT_TRANSFORMERS, eager=True)
    compiled, eager = finish(compiled), finish(eager)
    assert_same_curve(compiled, eager)
    assert "] _fallback_model.<locals>.CausalLM.forward (" in compiled.stderr
