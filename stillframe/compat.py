"""The one place stillframe touches private torch APIs (so a torch upgrade is fixed here alone).

Used: ``FakeTensorMode`` (``torch._subclasses``), the backend registry behind
torch.compile's ``backend=`` argument (``torch._TorchCompileWrapper``,
``torch._TorchCompileInductorWrapper``), and ``torch._dynamo.reset``.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch._subclasses.fake_tensor import FakeTensorMode


def new_fake_mode() -> FakeTensorMode:
    """A fake-tensor mode with static shapes (one per trace)."""
    return FakeTensorMode(allow_non_fake_inputs=False)


def resolve_backend(backend: Any, mode: str | None, options: dict | None, dynamic: bool | None) -> Callable:
    """The compiler function torch.compile would use for these arguments.

    Accepts every name torch.compile accepts and any callable
    ``(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> callable``.
    Raises exactly what torch.compile raises for a bad name or bad arguments
    (``torch._dynamo.exc.InvalidBackend``, ``RuntimeError`` for ``mode`` with
    ``options``), and at the same moment: when compile() is called.
    """
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if backend == "inductor":
        return torch._TorchCompileInductorWrapper(mode, options, dynamic)
    return torch._TorchCompileWrapper(backend, mode, options, dynamic)
