"""Hugging Face models over changing sequence lengths (issue 12): parity with eager at every length, one trace
with dynamic=True, two with automatic dynamic shapes (static, then symbolic in the sequence length)."""

import pytest
import torch

import stillframe
from stillframe.check.parity import assert_parity

models = pytest.importorskip("stillframe.check.models")
pytest.importorskip("transformers")

LENGTHS = (6, 9, 13, 16)


def make_inputs(name):
    def make(i):
        t = LENGTHS[i]
        g = torch.Generator().manual_seed(t)
        kwargs = {"input_ids": torch.randint(0, 1000, (2, t), generator=g),
                  "attention_mask": torch.ones(2, t, dtype=torch.long)}
        if name == "t5":
            kwargs["decoder_input_ids"] = torch.randint(0, 1000, (2, t // 2 + 1), generator=g)
        return (), kwargs
    return make


@pytest.mark.parametrize("dynamic, traces", [(True, 1), (None, 2)])
@pytest.mark.parametrize("name", [name if name == "gpt2" else pytest.param(name, marks=pytest.mark.slow)
                                  for name in models.MODELS])  # GPT-2 in the fast suite, the rest when slow runs
def test_models_over_sequence_lengths(name, dynamic, traces):
    with torch.no_grad():
        report = assert_parity(models.build(name), make_inputs(name), calls=len(LENGTHS), grad=False,
                               compile_kwargs={"dynamic": dynamic}, atol=1e-5, rtol=1e-4)
    assert report.warnings == []
    assert stillframe.counters["traces"] == traces
