"""A Python-heavy model for capture tests (a helper module, not a test file).

It uses what real model code uses, all of which must land in ONE graph: a
frozen config dataclass, closures built at construction and inside
``forward``, loops over an ``nn.ModuleList``, f-string keys into an
``nn.ModuleDict``, a helper class (one instance kept on the module, another
created inside ``forward``), caches written to ``self`` and to the helper,
an in-place buffer update, ``self.training`` and config branches, a causal
mask built from Python ints, and a dict of outputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class HeavyConfig:
    vocab: int = 32
    dim: int = 16
    heads: int = 2
    layers: int = 3
    max_len: int = 8
    act: str = "gelu"
    causal: bool = True
    tasks: tuple = ("cls", "reg")
    outputs: tuple = (3, 1)
    keep_every: int = 2
    residual_scale: float = 1.0
    dropout: float = 0.0


def make_activation(name: str, slope: float = 0.1):
    """A closure over the config's activation name (stored on the module as a plain function)."""

    def act(t):
        if name == "gelu":
            return F.gelu(t)
        if name == "leaky":
            return F.leaky_relu(t, slope)
        return torch.relu(t)

    return act


class RunningStats:
    """A helper object kept on the model: the forward overwrites its caches on every call."""

    def __init__(self, names):
        self.names = tuple(names)
        self.last = {name: torch.zeros(()) for name in self.names}
        self.scale = 1.0

    def record(self, name, t):
        self.last[name] = t.detach().norm()
        return t * self.scale


class Splitter:
    """A helper created inside forward: splits and merges attention heads."""

    def __init__(self, heads, dim):
        self.heads = heads
        self.head_dim = dim // heads

    def split(self, t):
        b, n, _ = t.shape
        return t.view(b, n, self.heads, self.head_dim).transpose(1, 2)

    def merge(self, t):
        b, h, n, d = t.shape
        return t.transpose(1, 2).reshape(b, n, h * d)


class HeavyBlock(nn.Module):
    def __init__(self, cfg: HeavyConfig, index: int):
        super().__init__()
        self.cfg = cfg
        self.index = index
        self.norm1 = nn.LayerNorm(cfg.dim)
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim)
        self.proj = nn.Linear(cfg.dim, cfg.dim)
        self.norm2 = nn.LayerNorm(cfg.dim)
        self.mlp = nn.Sequential(nn.Linear(cfg.dim, 2 * cfg.dim), nn.GELU(), nn.Linear(2 * cfg.dim, cfg.dim))
        self.scale = 1.0 / math.sqrt(cfg.dim // cfg.heads)
        self.drop = nn.Dropout(cfg.dropout) if cfg.dropout > 0 else nn.Identity()

    def attention(self, x, mask):
        heads = Splitter(self.cfg.heads, self.cfg.dim)
        q, k, v = (heads.split(t) for t in self.qkv(self.norm1(x)).chunk(3, dim=-1))
        scores = (q @ k.transpose(-2, -1)) * self.scale
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        return self.proj(heads.merge(self.drop(scores.softmax(dim=-1)) @ v))

    def forward(self, x, mask=None):
        x = x + self.attention(x, mask) * self.cfg.residual_scale
        return x + self.mlp(self.norm2(x))


class HeavyModel(nn.Module):
    def __init__(self, cfg: HeavyConfig | None = None):
        super().__init__()
        cfg = cfg or HeavyConfig()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.dim)
        self.pos = nn.Parameter(torch.randn(cfg.max_len, cfg.dim) * 0.02)
        self.blocks = nn.ModuleList([HeavyBlock(cfg, i) for i in range(cfg.layers)])
        self.heads = nn.ModuleDict({f"head_{task}": nn.Linear(cfg.dim, n) for task, n in zip(cfg.tasks, cfg.outputs)})
        self.final_norm = nn.LayerNorm(cfg.dim)
        self.act = make_activation(cfg.act)
        self.stats = RunningStats(cfg.tasks)
        self.register_buffer("tokens_seen", torch.zeros((), dtype=torch.long))
        self.cache = None

    def causal_mask(self, n):
        return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)

    def forward(self, ids, targets=None):
        b, n = ids.shape
        h = self.embed(ids) + self.pos[:n]
        mask = self.causal_mask(n) if self.cfg.causal else None
        kept = []
        for i, block in enumerate(self.blocks):
            h = block(h, mask)
            if (i + 1) % self.cfg.keep_every == 0:
                kept.append(h)
        h = self.final_norm(h)
        self.cache = h.detach()
        self.tokens_seen += b * n
        pooled = self.act(h.mean(dim=1))
        outputs = {}
        for task in self.cfg.tasks:
            head = self.heads[f"head_{task}"]
            outputs[task] = self.stats.record(task, head(pooled))
        loss = None
        if targets is not None:
            loss = sum(F.mse_loss(outputs[task].sum(-1), targets) for task in self.cfg.tasks)
        aux = {"kept": kept, "n_kept": len(kept), "names": [f"{t}:{outputs[t].shape[-1]}" for t in self.cfg.tasks]}
        return outputs, loss, aux
