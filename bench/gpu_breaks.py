"""Graph breaks and recompiles of the Hugging Face models on a device (``python bench/gpu_breaks.py cuda``).

For each model of :mod:`stillframe.check.models`: an eval forward under ``torch.no_grad()`` compiled with
stillframe (backend ``eager``), called twice; prints the counters. Run with ``STILLFRAME_LOGS=graph_breaks,recompiles`` for every break's reason
and place and every recompile's reason.
"""

from __future__ import annotations

import sys

import torch

import stillframe
from stillframe.check import models


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    for name in sys.argv[2:] or ["gpt2", "bert", "llama"]:
        stillframe.reset()
        model = models.build(name).to(device)
        kwargs = {k: v.to(device) for k, v in models.example_inputs(name, mask=True).items()}
        with torch.no_grad():
            compiled = stillframe.compile(model, backend="eager")
            for _ in range(2):
                compiled(**kwargs)
        print(f"== {name} on {device}: {dict(stillframe.counters)}")


if __name__ == "__main__":
    main()
