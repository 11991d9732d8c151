"""Decoding with a growing KV cache (issue 12): Hugging Face ``generate()`` with a compiled ``forward``, and a
hand-written decode loop. Greedy tokens equal eager's, the cache limit is never hit, and stillframe compiles
no more graphs than torch.compile does in the same process (3 each for GPT-2 and Llama, bench/dynamic.py
--generate). Training with a new sequence length every step: the loss equals eager's at every step, and no
code point compiles more than twice."""

import warnings

import pytest
import torch
from torch._dynamo.utils import counters as torch_counters

import stillframe

models = pytest.importorskip("stillframe.check.models")
pytest.importorskip("transformers")


def _torch_compile_graphs(name, ids, expected):
    torch._dynamo.reset()
    torch_counters.clear()
    model = models.build(name)
    model.forward = torch.compile(model.forward, backend="eager")
    try:
        with torch.no_grad():
            assert torch.equal(model.generate(ids, max_new_tokens=30, do_sample=False), expected)
        return torch_counters["stats"]["unique_graphs"]
    finally:
        torch._dynamo.reset()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_generate_with_a_compiled_forward(name):
    ids = torch.randint(1, 1000, (1, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = models.build(name).generate(ids, max_new_tokens=30, do_sample=False)
    torch_graphs = _torch_compile_graphs(name, ids, expected)
    model = models.build(name)
    model.forward = stillframe.compile(model.forward, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("error", stillframe.StillframeWarning)  # no fallback, no cache limit
        with torch.no_grad():
            got = model.generate(ids, max_new_tokens=30, do_sample=False)
    assert torch.equal(got, expected)
    assert stillframe.counters["graphs"] <= torch_graphs, (stillframe.counters, torch_graphs)
    assert stillframe.counters.get("fallbacks", 0) == 0


def test_hand_written_decode_loop_with_a_growing_cache():
    torch.manual_seed(0)
    heads, width = 2, 8
    wq, wk, wv = (torch.randn(width, width) for _ in range(3))

    def step(x, k_cache, v_cache):
        q, k, v = x @ wq, x @ wk, x @ wv
        k_cache = torch.cat([k_cache, k], dim=1)
        v_cache = torch.cat([v_cache, v], dim=1)
        b, t = k_cache.shape[0], k_cache.shape[1]
        att = (q.view(b, 1, heads, -1).transpose(1, 2) @ k_cache.view(b, t, heads, -1).permute(0, 2, 3, 1))
        att = att.softmax(-1) / t
        y = (att @ v_cache.view(b, t, heads, -1).transpose(1, 2)).transpose(1, 2).reshape(b, 1, width)
        return y, k_cache, v_cache

    def decode(fn):
        x, caches, outs = torch.randn(2, 1, width, generator=torch.Generator().manual_seed(1)), \
            [torch.zeros(2, 0, width)] * 2, []
        for _ in range(12):
            x, *caches = fn(x, *caches)
            outs.append((x, *caches))
        return outs

    torch._dynamo.reset()
    torch_counters.clear()
    try:
        theirs = decode(torch.compile(step, backend="aot_eager"))
        torch_graphs = torch_counters["stats"]["unique_graphs"]
    finally:
        torch._dynamo.reset()
    ours = decode(stillframe.compile(step, backend="aot_eager"))
    for got, want, their in zip(ours, decode(step), theirs):
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(their, want)
    # t = 0 -> 1 (0/1 specialized), then one dynamic trace for every later length: 3, as torch.compile's
    assert stillframe.counters["traces"] <= 3
    assert stillframe.counters["graphs"] <= torch_graphs


def train_step(model, opt, ids):
    logits = model(ids)
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def test_training_loop_with_a_new_sequence_length_every_step():
    torch.manual_seed(0)

    def make():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Linear(16, 32), torch.nn.GELU(),
                                    torch.nn.Linear(32, 50))
        return model, torch.optim.SGD(model.parameters(), lr=0.1)

    eager_model, eager_opt = make()
    model, opt = make()
    compiled = stillframe.compile(train_step, backend="aot_eager")
    for t in (5, 7, 9, 11, 13, 17, 19, 23):
        ids = torch.randint(0, 50, (2, t), generator=torch.Generator().manual_seed(t))
        expected = train_step(eager_model, eager_opt, ids)
        got = compiled(model, opt, ids)
        torch.testing.assert_close(got, expected)
    for p, q in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(p, q)
    # at most 2 compiles of each code point (the step has graph breaks at backward() and step()): static, then
    # symbolic in the sequence length
    assert all(len(entries) <= 2 for entries in compiled.all_cache_entries().values())
    assert stillframe.counters["traces"] <= 2 * len(compiled.all_cache_entries())


def gpt2_train_step(model, opt, ids):
    loss = model(ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


@pytest.mark.slow
def test_gpt2_training_with_a_new_sequence_length_every_step():
    """GPT-2 (train mode, dropout on: each step seeded alike) with AdamW over 8 lengths: the loss equals
    eager's at every step, each code point compiles at most twice (static, then symbolic in the length), and
    there are no more graphs than torch.compile's in the same process."""
    def make():
        torch.manual_seed(0)
        model = models.build("gpt2")
        model.train()
        return model, torch.optim.AdamW(model.parameters(), lr=1e-3)

    lengths = (5, 7, 9, 11, 13, 17, 19, 23)
    batches = [torch.randint(0, 1000, (2, t), generator=torch.Generator().manual_seed(t)) for t in lengths]

    def run(step, model, opt):
        losses = []
        for t, ids in zip(lengths, batches):
            torch.manual_seed(t)
            losses.append(step(model, opt, ids).detach())
        return losses

    expected = run(gpt2_train_step, *make())
    torch._dynamo.reset()
    torch_counters.clear()
    try:
        theirs = run(torch.compile(gpt2_train_step, backend="aot_eager"), *make())
        torch_graphs = torch_counters["stats"]["unique_graphs"]
    finally:
        torch._dynamo.reset()
    compiled = stillframe.compile(gpt2_train_step, backend="aot_eager")
    ours = run(compiled, *make())
    for got, want, their in zip(ours, expected, theirs):
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(their, want)
    assert all(len(entries) <= 2 for entries in compiled.all_cache_entries().values())
    assert stillframe.counters["graphs"] <= torch_graphs, (stillframe.counters, torch_graphs)
    assert stillframe.counters["fallbacks"] == 0
