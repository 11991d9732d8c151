"""Train a small GPT-2 on a synthetic token stream, with ``torch.compile``.

A training script of the usual shape -- build a model, ``torch.compile`` it,
loop over batches with AdamW -- and nothing in it knows about stillframe::

    python examples/train_gpt.py                  # torch.compile (backend aot_eager)
    python examples/train_gpt.py --eager          # no torch.compile at all
    stillframe run examples/train_gpt.py          # the same script, torch.compile routed to stillframe

The model is ``transformers.GPT2LMHeadModel`` with a small config (2 layers,
width 128, 4 heads, vocabulary 1000, 64 positions); without ``transformers``
it is the GPT of ``examples/gpt.py`` with the same sizes. Dropout is 0, so a
run is a function of ``--seed`` alone and compiled runs can be compared with
eager ones loss by loss.

The data: each row of a batch counts through the vocabulary with its own
start and stride, ``x[t + 1] = (x[t] + stride) % vocab``, stride in 1..4. The
first token of a row cannot be predicted, the rest can from the two before
them, so the loss falls from about log(1000) = 6.9 as the model learns the
successor of each token.

Output: ``step N  loss L`` every ``--log-every`` steps (and at the last step),
then ``done: S steps in T s``. The default 200 steps take about 8 s eagerly
and 10 s compiled (aot_eager, first-step compile included), torch.compile or
stillframe alike, on one busy CPU core (``OMP_NUM_THREADS=1``); the loss ends
near 1.34. ``--backend inductor`` works too, after a longer first step.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from torch.nn import functional as F

VOCAB, SEQ = 1000, 64


def make_model(seed: int) -> torch.nn.Module:
    """A freshly initialised GPT-2 style model; the same ``seed`` gives the same weights."""
    torch.manual_seed(seed)
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        return _fallback_model()
    config = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=VOCAB, n_positions=SEQ,
                        bos_token_id=0, eos_token_id=0,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # no dropout: deterministic
    return GPT2LMHeadModel(config)


def _fallback_model() -> torch.nn.Module:
    """``examples/gpt.py``'s GPT with the sizes above, called like a Hugging Face causal LM."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gpt import GPT, GPTConfig

    class CausalLM(GPT):
        def forward(self, input_ids):  # returns an object with .logits, as a Hugging Face model does
            return argparse.Namespace(logits=super().forward(input_ids))

    return CausalLM(GPTConfig(block_size=SEQ, vocab_size=VOCAB, n_layer=2, n_head=4, n_embd=128))


def make_batch(step: int, batch: int, seed: int) -> torch.Tensor:
    """Batch ``step`` of the data: ``(batch, SEQ)`` int64 token ids, each row counting by its own stride."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
    start = torch.randint(0, VOCAB, (batch, 1), generator=gen)
    stride = torch.randint(1, 5, (batch, 1), generator=gen)
    return (start + stride * torch.arange(SEQ)) % VOCAB


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200, help="training steps (default 200)")
    parser.add_argument("--batch", type=int, default=8, help="rows per batch (default 8)")
    parser.add_argument("--lr", type=float, default=3e-3, help="AdamW learning rate (default 3e-3)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the weights and the data (default 0)")
    parser.add_argument("--log-every", type=int, default=20, metavar="N", help="print the loss every N steps")
    parser.add_argument("--backend", default="aot_eager", help="torch.compile backend (default aot_eager)")
    parser.add_argument("--eager", action="store_true", help="do not torch.compile the model")
    args = parser.parse_args(argv)

    model = make_model(args.seed)
    model.train()
    if not args.eager:
        model = torch.compile(model, backend=args.backend)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    start = time.perf_counter()
    for step in range(args.steps):
        tokens = make_batch(step, args.batch, args.seed)
        logits = model(tokens).logits  # (batch, SEQ, VOCAB): logits[:, t] predicts tokens[:, t + 1]
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % args.log_every == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {loss.item():.6f}", flush=True)
    print(f"done: {args.steps} steps in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
