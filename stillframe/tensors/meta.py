"""Tensor identity, versions and metadata: the tensor half of the heap.

A traced tensor is an *identity* (an int ``tid``); the heap maps it to a
:class:`TensorEntry`, the immutable record of its current version::

    TensorEntry(meta=TensorMeta(shape=(2, 3), stride=(3, 1), ..., version=0),
                fake=<FakeTensor>, node=<fx.Node x>, source=L['x'])

Invariant (DESIGN.md 4): the fake tensor of an entry is never mutated. An
in-place op builds a *fresh world* -- new fake tensors reproducing the current
metadata of every tensor in the affected autograd alias group (the base and its
live views) -- runs the op there, and binds a new entry for each member. Any
checkpoint that still refers to the old entries sees them exactly as they were.

Autograd metadata is not re-implemented: the fresh fakes reproduce
``requires_grad``, leaf-ness and view-ness, so torch's own autograd (which runs
on fake tensors) computes eager's answer, including eager's errors.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from dataclasses import dataclass, replace
from typing import Any

import torch

from .. import compat


@dataclass(frozen=True, slots=True)
class TensorMeta:
    """Everything eager semantics reads off a tensor, frozen.

    ``base`` is the tid of the autograd base when the tensor is a view (the
    root: a view of a view names the root, as ``Tensor._base`` does), ``None``
    otherwise. ``version`` counts in-place ops applied to this identity during
    the trace. ``counter``: how far eager's version counter (``t._version``) of this tensor has moved since it
    entered the trace or was made, as the fakes' counters moved under the writes to its autograd alias group
    (``requires_grad_`` moves it by 0, ``_foreach_add_([x, y])`` by 1 each); a tensor sharing the counter
    without being a view (``detach()``) counts its own writes (``saved.sharing_version`` links the two).
    ``view_creation`` is how autograd recorded the view's making
    (:data:`compat.CreationMeta`: under ``no_grad``, one of several outputs of
    ``split``...); it decides which in-place ops on the view autograd allows.
    ``inference``: an inference tensor (made under ``torch.inference_mode()``: no version counter, and eager
    refuses to write into it outside inference mode or to save it for backward).
    ``grad_fn_pending``: a view made while its base did not require grad (autograd makes its grad_fn only when
    asked); once the base takes history it may be a stale view, which eager treats as a leaf that requires
    grad in in-place ops (:func:`compat.is_stale_view` tells).
    """

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    dtype: torch.dtype
    device: torch.device
    layout: torch.layout
    requires_grad: bool
    is_leaf: bool
    has_grad_fn: bool
    base: int | None = None
    view_creation: compat.CreationMeta = compat.CreationMeta.DEFAULT
    version: int = 0
    counter: int | None = 0  # None: moved by a write the trace cannot count (a custom op's)
    autograd_error: str | None = None
    grad_fn_pending: bool = False
    inference: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @staticmethod
    def of(t: torch.Tensor, base: int | None = None, view_creation: compat.CreationMeta = compat.CreationMeta.DEFAULT,
           version: int = 0) -> "TensorMeta":
        """Read the metadata of a real or fake tensor ``t``.

        Reading autograd metadata can itself raise in eager (a view made under
        ``no_grad`` whose base was then modified in place): the message is
        kept in ``autograd_error`` and raised when traced code reads it.
        """
        try:  # a view's grad_fn is not made here: asking for it is an effect (compat.is_stale_view)
            requires_grad, is_leaf, has_grad_fn = compat.autograd_flags(t)
            pending = compat.made_without_grad_fn(t)
            error = None
        except RuntimeError as e:  # (requires_grad alone still reads)
            requires_grad, is_leaf, has_grad_fn = t.requires_grad, None, None
            pending = False
            error = str(e)
        return TensorMeta(
            shape=tuple(t.shape),
            stride=tuple(t.stride()) if t.layout == torch.strided else (),
            storage_offset=t.storage_offset() if t.layout == torch.strided else 0,
            dtype=t.dtype,
            device=t.device,
            layout=t.layout,
            requires_grad=requires_grad,
            is_leaf=is_leaf,
            has_grad_fn=has_grad_fn,
            base=base,
            view_creation=view_creation,
            version=version,
            autograd_error=error,
            grad_fn_pending=pending,
            inference=t.is_inference(),
        )


@dataclass(frozen=True, slots=True)
class TensorEntry:
    """The current version of one tensor identity.

    ``node`` is the FX node whose value is this tensor at this version (``None``
    for a hidden base: the base of an input view, which the graph never reads).
    ``source`` is set when the identity entered the trace from the caller's
    world (a graph input), and is the snapshot guards were built from.
    """

    meta: TensorMeta
    fake: Any
    node: Any
    source: Any = None

    def bump(self, fake: Any, node: Any, moved: int | None) -> "TensorEntry":
        """The next version: metadata re-read from ``fake`` (keeping base and view mode); the write moved eager's
        version counter by ``moved`` (``None``: by what the trace cannot know)."""
        counter = None if moved is None or self.meta.counter is None else self.meta.counter + moved
        meta = replace(TensorMeta.of(fake, self.meta.base, self.meta.view_creation, self.meta.version + 1),
                       counter=counter)
        if self.meta.grad_fn_pending and not meta.grad_fn_pending:  # made without one: still maybe stale
            meta = replace(meta, grad_fn_pending=True)
        return replace(self, meta=meta, fake=fake, node=node if node is not None else self.node)

    def counter_moved(self, moved: int) -> "TensorEntry":
        """This version, with eager's version counter moved by ``moved`` by something other than a write of the
        trace's (``ctx.mark_dirty``)."""
        counter = None if self.meta.counter is None else self.meta.counter + moved
        return replace(self, meta=replace(self.meta, counter=counter))


def fresh_base(meta: TensorMeta) -> torch.Tensor:
    """A new fake (call under the fake mode) with ``meta``'s layout and autograd state, not a view.

    A leaf gets ``requires_grad`` directly; a non-leaf that requires grad is
    made by an in-place add of a zero-dim leaf, which gives it a ``grad_fn`` while
    keeping its strides and storage offset. An inference tensor's is made in inference mode, any other outside it.
    """
    if meta.inference != torch.is_inference_mode_enabled():
        with torch.inference_mode(meta.inference):
            return fresh_base(meta)
    t = torch.empty_strided(meta.shape, meta.stride, dtype=meta.dtype, device=meta.device)
    if meta.storage_offset:
        t = torch.empty_strided(
            (meta.storage_offset + _extent(meta.shape, meta.stride),), (1,), dtype=meta.dtype, device=meta.device
        ).as_strided(meta.shape, meta.stride, meta.storage_offset).detach()
    if meta.requires_grad and meta.is_leaf:
        t.requires_grad_(True)
    elif meta.requires_grad:
        with torch.enable_grad():
            t.add_(torch.zeros((), dtype=meta.dtype, device=meta.device, requires_grad=True))
    return t


def fresh_view(base: torch.Tensor, meta: TensorMeta, stale: bool = False) -> torch.Tensor:
    """A new fake view of ``base`` with ``meta``'s geometry, made as the view was (``meta.view_creation``:
    :func:`compat.view_made_as`); ``stale``: one that autograd treats as a leaf requiring grad, as the view it
    stands for (:func:`compat.is_stale_view`)."""
    if stale:
        return compat.stale_view(base, meta.shape, meta.stride, meta.storage_offset)
    return compat.view_made_as(base, meta.shape, meta.stride, meta.storage_offset, meta.view_creation)


def _extent(shape: tuple[int, ...], stride: tuple[int, ...]) -> int:
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(shape, stride))
