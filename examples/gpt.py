"""A small GPT-style language model in plain PyTorch, the way model code is usually written.

The shape follows nanoGPT: token and position embeddings, a stack of
pre-LayerNorm transformer blocks (causal self-attention, then a GELU MLP), a
final LayerNorm and a linear head. Nothing in it knows about stillframe; it is
the program the demo and the benchmarks compile.

Example::

    >>> from examples.gpt import make_model, make_batch
    >>> model = make_model(seed=0)
    >>> idx, targets = make_batch(batch=4, seq=32, seed=0)
    >>> idx.shape, idx.dtype
    (torch.Size([4, 32]), torch.int64)
    >>> logits, loss = model(idx, targets)
    >>> logits.shape
    torch.Size([4, 32, 128])
    >>> round(loss.item(), 1)   # about log(128) at initialisation
    4.8

There is no dropout, so the model is deterministic in train and eval mode
alike, which lets compiled and eager runs be compared value for value.

Run this file to train it for a few steps eagerly: ``python examples/gpt.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F


@dataclass
class GPTConfig:
    block_size: int = 32   # longest sequence the position embedding covers
    vocab_size: int = 128
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query and value projections for all heads, in one matmul
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.n_head = config.n_head
        self.n_embd = config.n_embd

    def forward(self, x):
        B, T, C = x.size()  # batch, sequence length, embedding size (n_embd)
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble the heads
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.h = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        """``idx``: (B, T) int64 token ids, T <= block_size.

        Returns ``logits`` (B, T, vocab_size) float32, or ``(logits, loss)``
        when ``targets`` (B, T) int64 is given, ``loss`` being the mean
        cross-entropy of predicting each target token.
        """
        B, T = idx.size()
        assert T <= self.config.block_size, f"sequence of length {T} exceeds block_size {self.config.block_size}"
        pos = torch.arange(T, device=idx.device)  # (T,)
        x = self.wte(idx) + self.wpe(pos)  # (B, T, n_embd)
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        logits = self.lm_head(x)
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def make_model(seed: int = 0) -> GPT:
    """A freshly initialised ``GPT(GPTConfig())``; the same ``seed`` gives the same weights."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return GPT(GPTConfig())


def make_batch(batch: int = 4, seq: int = 32, seed: int = 0, vocab_size: int = GPTConfig.vocab_size):
    """A deterministic batch ``(idx, targets)`` of int64 tensors of shape (batch, seq).

    Each row is an arithmetic progression of token ids modulo ``vocab_size``
    with its own start and step, so the next token is predictable from the two
    before it; ``targets`` is ``idx`` shifted left by one. The same arguments
    always give the same tensors, and the global RNG is left untouched.
    """
    gen = torch.Generator().manual_seed(seed)
    start = torch.randint(0, vocab_size, (batch, 1), generator=gen)
    step = torch.randint(1, 8, (batch, 1), generator=gen)
    tokens = (start + step * torch.arange(seq + 1)) % vocab_size  # (batch, seq + 1)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def train(model: GPT, steps: int = 20, lr: float = 1e-2, seed: int = 0) -> list[float]:
    """Train ``model`` with AdamW for ``steps`` steps on fresh batches; returns the losses."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        idx, targets = make_batch(batch=8, seq=model.config.block_size, seed=seed + step)
        _, loss = model(idx, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


if __name__ == "__main__":
    losses = train(make_model(seed=0), steps=20)
    for step, loss in enumerate(losses):
        print(f"step {step:2d}  loss {loss:.4f}")
