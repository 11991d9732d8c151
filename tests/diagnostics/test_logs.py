"""``STILLFRAME_LOGS``: each channel (graph, guards, breaks, recompiles, bytecode) logs to stderr with its
``[stillframe:<channel>]`` prefix, only when named; nothing is logged with the variable unset."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

PROGRAM = '''\
import torch
import stillframe


@stillframe.compile(backend="eager")
def f(x):
    y = x.sin()
    print("tick")
    return y.cos()


f(torch.ones(3))
f(torch.ones(5))
'''
DEF_LINE, PRINT_LINE = 5, 8  # the decorator line (co_firstlineno) and the print

RUNS = {  # name -> STILLFRAME_LOGS (None: unset)
    "all": "graph,guards,breaks,recompiles,bytecode",
    "breaks_only": "breaks",
    "unset": None,
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run the program once per setting, all at once (each subprocess spends seconds importing torch)."""
    path = tmp_path_factory.mktemp("logs") / "tiny.py"
    path.write_text(PROGRAM)
    procs = {}
    for name, logs in RUNS.items():
        env = dict(os.environ)
        env.pop("STILLFRAME_LOGS", None)
        if logs is not None:
            env["STILLFRAME_LOGS"] = logs
        procs[name] = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True, env=env)
    done = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        done[name] = (out, err)
    return str(path), done


def records(stderr: str) -> list[tuple[str, str]]:
    """``(channel, text)`` per log record: a prefixed line and the unprefixed lines that follow it."""
    found: list[tuple[str, str]] = []
    for line in stderr.splitlines():
        match = re.match(r"\[stillframe:(\w+)\] (.*)", line)
        if match:
            found.append((match.group(1), match.group(2)))
        elif found:
            found[-1] = (found[-1][0], found[-1][1] + "\n" + line)
    return found


def channel(done: dict, run: str, name: str) -> list[str]:
    return [text for ch, text in records(done[run][1]) if ch == name]


def test_program_output_is_unchanged(runs):
    _, done = runs
    for out, _ in done.values():
        assert out == "tick\ntick\n"


def test_graph_channel(runs):
    _, done = runs
    graphs = channel(done, "all", "graph")
    assert len(graphs) == 4  # two shapes x (the graph before the print, the resumed one)
    assert all(text.startswith("captured graph of f:") for text in graphs)
    assert "def forward(" in graphs[0] and ".sin()" in graphs[0]
    assert "def forward(" in graphs[1] and ".cos()" in graphs[1]


def test_guards_channel(runs):
    _, done = runs
    guards = channel(done, "all", "guards")
    assert len(guards) == 4
    assert guards[0].startswith("guards of f:")
    assert "def ___guard(L, G, F):" in guards[0] and "L['x']" in guards[0]
    assert "torch.is_grad_enabled()" in guards[0]
    assert "L['0:y']" in guards[1]  # the resumed trace reads local y of frame 0


def test_breaks_channel(runs):
    path, done = runs
    breaks = channel(done, "all", "breaks")
    assert len(breaks) == 2
    text = breaks[0]
    assert text.startswith("graph break in f: unsupported_builtin: the builtin print is not supported")
    assert f"at {path}:{PRINT_LINE}" in text
    assert 'print("tick")' in text


def test_recompiles_channel(runs):
    path, done = runs
    recompiles = channel(done, "all", "recompiles")
    assert len(recompiles) == 2  # the function, then the code after the break
    first, second = recompiles
    assert first.startswith(f"recompiling f at {path}:{DEF_LINE}: guard failed: L['x'] is a Tensor(")
    assert "shape=(3,)" in first
    assert second.startswith(f"recompiling f at {path}:{PRINT_LINE}: guard failed: L['y'] is a Tensor(")  # local y of the resumed frame


def test_bytecode_channel(runs):
    _, done = runs
    listings = channel(done, "all", "bytecode")
    assert len(listings) == 4
    assert listings[0].startswith("tracing f from instruction 0:")
    assert re.search(r"tracing f from instruction \d+:", listings[1]) and "instruction 0:" not in listings[1]
    for opname in ("LOAD_FAST x", "LOAD_GLOBAL NULL + print", "RETURN_VALUE"):
        assert opname in listings[0]


def test_only_the_named_channel_logs(runs):
    _, done = runs
    assert {ch for ch, _ in records(done["breaks_only"][1])} == {"breaks"}
    assert len(channel(done, "breaks_only", "breaks")) == 2


def test_nothing_is_logged_when_unset(runs):
    _, done = runs
    out, err = done["unset"]
    assert "[stillframe:" not in err and "[stillframe:" not in out
    assert err == ""
