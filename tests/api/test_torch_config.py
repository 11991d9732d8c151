"""torch.compile's configuration, written by a script run under ``stillframe run``, acts on stillframe as it
would on torch.compile: ``torch._dynamo.config.recompile_limit`` / ``cache_size_limit``, ``suppress_errors``
``capture_scalar_outputs``, ``capture_dynamic_output_shape_ops`` and ``torch._dynamo.reset()``. Both
configurations are as before once the run ends.
"""

from __future__ import annotations

import io
import json
import textwrap

import pytest
import torch
import torch._dynamo

import stillframe
from stillframe import runner

SCRIPT = """
import json, sys, torch, torch._dynamo

def failing_backend(gm, example_inputs):
    raise RuntimeError("boom")

torch._dynamo.config.{limit_name} = 12
torch._dynamo.config.capture_scalar_outputs = True
f = torch.compile(lambda x, s: x + len(s), backend="eager")
for n in range(10):  # a new string every call (strings are never symbolic): a recompile each, within the limit of 12
    f(torch.ones(1), "a" * n)
before_reset = len(f.cache_entries())
torch._dynamo.reset()
after_reset = len(f.cache_entries())
torch._dynamo.config.suppress_errors = True
g = torch.compile(lambda x: x.sin(), backend=failing_backend)
value = g(torch.zeros(1)).item()  # eager, not BackendCompilerFailed
h = torch.compile(lambda x: x * x.sum().item() + x[x > 0].sum(), backend="eager")
h(torch.ones(2))  # .item() captured (capture_scalar_outputs); the mask still breaks the graph
first_break = h.cache_entries()[0].graph_break.kind.value
torch._dynamo.config.capture_dynamic_output_shape_ops = True
torch._dynamo.reset()
h(torch.ones(2))
captured_whole = h.cache_entries()[0].graph_break is None
json.dump(dict(before_reset=before_reset, after_reset=after_reset, value=value, first_break=first_break,
               captured_whole=captured_whole), open(sys.argv[1], "w"))
"""


@pytest.mark.parametrize("limit_name", ["recompile_limit", "cache_size_limit"])
def test_a_scripts_torch_config_acts_on_stillframe(tmp_path, limit_name):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(SCRIPT.format(limit_name=limit_name)))
    result = tmp_path / "result.json"
    flags = ("recompile_limit", "suppress_errors", "capture_scalar_outputs", "capture_dynamic_output_shape_ops")
    torch_before = tuple(getattr(torch._dynamo.config, name) for name in flags)
    out = io.StringIO()
    assert runner.run(str(script), [str(result)], out=out) == 0
    assert json.loads(result.read_text()) == {"before_reset": 10, "after_reset": 0, "value": 0.0,
                                              "first_break": "data_dependent", "captured_whole": True}
    assert "torch._dynamo.reset() ran" in out.getvalue()  # the summary says its counts start after the reset
    # nothing leaks out of the run, on either side
    assert stillframe.config.cache_size_limit == 8 and stillframe.config.suppress_errors is False
    assert not stillframe.config.capture_scalar_outputs and not stillframe.config.capture_dynamic_output_shape_ops
    assert tuple(getattr(torch._dynamo.config, name) for name in flags) == torch_before


def test_without_the_scripts_limit_stillframe_keeps_its_own():
    f = stillframe.compile(lambda x, s: x + len(s), backend="eager")
    with pytest.warns(stillframe.StillframeWarning, match="cache_size_limit"):
        for n in range(10):
            f(torch.ones(1), "a" * n)  # a new string every call: strings are never symbolic
    assert len(f.cache_entries()) == 8
