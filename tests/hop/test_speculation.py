"""Speculation leaves the tracer as it found it, whatever the callable did (issue 13; DESIGN invariant 11).

Hypothesis builds branch functions from steps that mutate outer tensors in place (``add_``, ``t_``,
``unsqueeze_``, ``x[0] = ...``), append to an outside list, set a module attribute, read a module
parameter (a new graph input), compute locals, change grad mode, or raise. After :func:`speculate`
(or the graph break it raises), the state is the checkpoint's except for what it may learn: heap
entries that existed are the same objects, side effects, prologue, frames and grad mode are the
checkpoint's, the outer graph gained only placeholders of graph inputs the state lists, and a second
speculation sees the outer tensors' metadata as it was before the first.
"""

import linecache
import re

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stillframe.errors import Unsupported
from stillframe.guards.source import LocalSource
from stillframe.rules.speculation import diff, speculate
from stillframe.runtime.compiler import start_trace
from stillframe.variables.builder import wrap

STEPS = {
    "add_": "a.add_(1)",
    "t_": "a.t_()",
    "unsqueeze_": "a.unsqueeze_(0)",
    "setitem": "a[0] = 5.0",
    "view_add_": "a[0].add_(2)",
    "append": "LOG.append(1)",
    "attr": "MOD.flag = 3",
    "param": "h = h + MOD.weight.sum()",
    "local": "h = (h * 2).sin()",
    "local_inplace": "h = h.clone(); h.mul_(3)",
    "no_grad": "torch._C._set_grad_enabled(False)",
    "raise": "raise ValueError('no')",
}

LOG = []
MOD = torch.nn.Linear(2, 2)


def branch_from(steps, n):
    lines = [f"def branch_{n}(a, b):", "    h = b * 1"] + [f"    {STEPS[s]}" for s in steps] + ["    return h + 0"]
    filename = f"<speculation {n}>"
    source = "\n".join(lines) + "\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"torch": torch, "LOG": LOG, "MOD": MOD}
    exec(compile(source, filename, "exec"), ns)
    return ns[f"branch_{n}"]


def host(x, y):
    return x


def new_tracer():
    x, y = torch.randn(3, 3), torch.randn(3, 3)
    tx = start_trace(host, {"x": x, "y": y})
    xv, yv = wrap(tx, x, LocalSource("x")), wrap(tx, y, LocalSource("y"))
    return tx, xv, yv


def run_speculation(tx, fn, args):
    try:
        return speculate(tx, wrap(tx, fn, None), args, "the branch")
    except Unsupported:
        return None


@settings(max_examples=120, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(sorted(STEPS)), min_size=0, max_size=4))
def test_speculation_restores_the_state_whatever_the_branch_did(steps):
    tx, xv, yv = new_tracer()
    before = tx.state
    nodes_before = list(tx.graph.nodes)
    meta_before = tx.tensor(xv).meta
    spec = run_speculation(tx, branch_from(steps, 0), [xv, yv])
    after = tx.state
    assert after.frames is before.frames
    assert all(after.heap[oid] is entry for oid, entry in before.heap.items())
    assert after.side_effects == before.side_effects
    assert len(after.prologue) == len(before.prologue)
    assert after.grad_enabled == before.grad_enabled
    assert tx.graph.nodes[:len(nodes_before)] == nodes_before
    inputs = {tx.tensor_node_of_input(tid) for _, tid in after.inputs}
    assert all(n.op == "placeholder" and n in inputs for n in tx.graph.nodes[len(nodes_before):])
    assert torch.is_grad_enabled()
    mutating = {"add_", "t_", "unsqueeze_", "setitem", "view_add_", "append", "attr", "no_grad"}
    if spec is not None:
        if set(steps) & mutating:
            assert spec.effects, steps
        else:
            assert spec.effects == ()
    else:
        assert "raise" in steps or set(steps) & {"no_grad"}, steps
    # the other branch, from the same state, sees x as it was
    other = run_speculation(tx, branch_from(["local"], 1), [xv, yv])
    assert other is not None and other.effects == ()
    assert tx.tensor(xv).meta == meta_before


def test_learned_graph_inputs_are_kept_once():
    """A parameter first read inside a speculation becomes one input of the outer graph, read by both."""
    tx, xv, yv = new_tracer()
    first = speculate(tx, wrap(tx, branch_from(["param"], 2), None), [xv, yv], "the true branch")
    n_inputs = len(tx.state.inputs)
    second = speculate(tx, wrap(tx, branch_from(["param"], 3), None), [xv, yv], "the false branch")
    assert len(tx.state.inputs) == n_inputs == 3
    assert first.builder.free_variables() == second.builder.free_variables()


@pytest.mark.parametrize("steps, expected", [
    (["add_"], r"the true branch mutates L\['x'\] in place"),
    (["append"], r"the true branch mutates the list .*\['LOG'\]"),  # the globals of exec'd code
    (["attr"], "the true branch sets the attribute 'flag' of an outside object"),
])
def test_diff_names_each_effect(steps, expected):
    tx, xv, yv = new_tracer()
    a = speculate(tx, wrap(tx, branch_from(steps, 4), None), [xv, yv], "the true branch")
    b = speculate(tx, wrap(tx, branch_from([], 5), None), [xv, yv], "the false branch")
    (found,) = diff(tx, a, b)
    assert re.fullmatch(expected, found), found


def test_diff_of_agreeing_speculations_is_empty():
    tx, xv, yv = new_tracer()
    a = speculate(tx, wrap(tx, branch_from(["local"], 6), None), [xv, yv], "the true branch")
    b = speculate(tx, wrap(tx, branch_from([], 7), None), [xv, yv], "the false branch")
    assert diff(tx, a, b) == []


W = torch.randn(3, 3, requires_grad=True)


def returns_int_1(a, b):
    return a + 1, 1


def returns_int_2(a, b):
    return a + 2, 2


def returns_rg(a, b):
    return a * W


def returns_plain(a, b):
    return a * 2


def returns_dict(a, b):
    return {"a": a + 1}


def returns_tensor(a, b):
    return a + 1


def returns_double(a, b):
    return (a + 1).double()


def returns_list(a, b):
    return [a + 1, b + 1]


@pytest.mark.parametrize("first, second, expected", [
    (returns_int_1, returns_int_2, "output 1 is 1 in the true branch but 2 in the false branch"),
    (returns_rg, returns_plain, "the output has requires_grad True in the true branch but False in the false branch"),
    (returns_dict, returns_tensor, "the true branch returns a dict, not tensors, tuples, lists or numbers"),
    (returns_double, returns_tensor,
     "the output has dtype torch.float64 in the true branch but torch.float32 in the false branch"),
    (returns_list, returns_int_1, "the true branch returns [Tensor, Tensor] but the false branch returns (Tensor, int)"),
])
def test_diff_names_each_difference_of_outputs(first, second, expected):
    tx, xv, yv = new_tracer()
    a = speculate(tx, wrap(tx, first, None), [xv, yv], "the true branch")
    b = speculate(tx, wrap(tx, second, None), [xv, yv], "the false branch")
    assert diff(tx, a, b) == [expected]


def test_guards_learned_by_both_branches_are_kept():
    """Guards are unioned: each branch's reads of the inputs stay guarded after the restore."""
    tx, xv, yv = new_tracer()
    before = set(tx.state.guards)
    speculate(tx, wrap(tx, branch_from(["param"], 8), None), [xv, yv], "the true branch")
    after_true = set(tx.state.guards)
    speculate(tx, wrap(tx, branch_from(["append"], 9), None), [xv, yv], "the false branch")
    assert before < after_true < set(tx.state.guards)
