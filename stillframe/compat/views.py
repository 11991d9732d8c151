"""Private torch APIs of a view's autograd state: its creation mode and its grad_fn, which autograd makes
lazily when asked (``torch._C._autograd``), read without making it. Re-exported by :mod:`stillframe.compat`."""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

_DEFAULT_VIEW = torch._C._autograd.CreationMeta.DEFAULT
_LEAF_IN_PLACE = "a leaf Variable that requires grad is being used in an in-place operation."


#: How autograd recorded a view's making (``torch._C._autograd.CreationMeta``), which decides the in-place ops it
#: allows on the view: ``DEFAULT``, ``NO_GRAD_MODE`` (made under ``no_grad``, which includes the grads
#: ``torch.autograd.grad`` returns), ``MULTI_OUTPUT_NODE`` (one of ``split``'s or ``unbind``'s outputs),
#: ``INFERENCE_MODE``, ``IN_CUSTOM_FUNCTION``.
CreationMeta = torch._C._autograd.CreationMeta


def view_creation(t: torch.Tensor) -> CreationMeta:
    """How view ``t`` was made, as autograd recorded it (:data:`CreationMeta`)."""
    return torch._C._autograd._get_creation_meta(t)


def view_made_as(base: torch.Tensor, shape: Any, stride: Any, offset: Any, creation: CreationMeta) -> torch.Tensor:
    """``base.as_strided(shape, stride, offset)``, made so that autograd treats it as a view made the way
    ``creation`` says: under ``no_grad`` for ``NO_GRAD_MODE`` (so it has no grad_fn), in grad mode otherwise,
    with ``creation`` recorded, so an in-place op on it raises where eager's raises on the view it stands for."""
    with torch.set_grad_enabled(creation != CreationMeta.NO_GRAD_MODE):
        view = base.as_strided(shape, stride, offset)
    if creation not in (CreationMeta.DEFAULT, CreationMeta.NO_GRAD_MODE):
        torch._C._autograd._set_creation_meta(view, creation)
    return view


def grad_fn_made_on_read(t: torch.Tensor) -> bool:
    """Whether reading ``t.is_leaf`` or ``t.grad_fn`` may make ``t``'s grad_fn: ``t`` is a view (made in grad
    mode) whose base requires grad, and autograd makes a view's grad_fn lazily, when it is asked for. Such a
    read changes what eager does next (see :func:`is_stale_view`), so stillframe never makes it itself.

    Autograd makes it only where the version counter moved since the view was made (``VariableHooks::grad_fn``
    compares it with the version the view recorded): a counter still at 0 has never moved, so a read then
    changes nothing (``t1 = x.t(); x.requires_grad_()``: eager's ``t1.is_leaf`` stays True; fuzz 30:1078). Asked
    of a real tensor only: the trace's fakes are never written in place, so their counters say nothing."""
    return t._is_view() and t._base.requires_grad and torch._C._autograd._get_creation_meta(t) == _DEFAULT_VIEW \
        and (t._version != 0 or isinstance(t, FakeTensor))


def autograd_flags(t: torch.Tensor) -> tuple[bool, bool, bool]:
    """``(requires_grad, is_leaf, grad_fn is not None)`` as Python reads them, without making a view's grad_fn
    (:func:`grad_fn_made_on_read`: such a view requires grad and the read would give it a grad_fn)."""
    if grad_fn_made_on_read(t):
        return True, False, True
    return t.requires_grad, t.is_leaf, t.grad_fn is not None


def made_without_grad_fn(t: torch.Tensor) -> bool:
    """Whether view ``t`` has no grad_fn because its base did not require grad when it was made (read without
    making one): if the base takes history later, ``t`` may become a stale view (:func:`is_stale_view`)."""
    return (t._is_view() and not t._base.requires_grad
            and torch._C._autograd._get_creation_meta(t) == _DEFAULT_VIEW and t.grad_fn is None)


def is_leaf(t: torch.Tensor) -> bool | None:
    """``t.is_leaf`` without making a view's grad_fn (:func:`autograd_flags`); ``None`` where reading it raises
    (a view made under ``no_grad`` whose base was written in place since)."""
    if grad_fn_made_on_read(t):
        return False
    try:
        return t.is_leaf
    except RuntimeError:
        return None


def is_stale_view(t: torch.Tensor) -> bool:
    """Whether autograd treats view ``t`` as a leaf that requires grad: it was made while its base did not
    require grad, the base took history since (an in-place op through another alias: ``v = y.t(); y[0] = w``),
    and nothing has asked for ``t``'s grad_fn since (reading ``is_leaf`` or ``grad_fn``, or a differentiable op
    on ``t``, makes it). Eager refuses an in-place op on it in grad mode ("a leaf Variable that requires grad is
    being used in an in-place operation."). Found out from autograd's own in-place check, with an ``add_``
    whose shapes cannot match, so nothing is written; on a view that is not stale the check goes on to make
    the grad_fn, as any differentiable op on it would. Works on real and fake tensors."""
    if not grad_fn_made_on_read(t):
        return False
    wrong_shape = t.new_empty((1,)).expand(2, *t.shape)
    try:
        with torch.enable_grad():
            torch.Tensor.add_(t, wrong_shape)
    except RuntimeError as e:
        return str(e).startswith(_LEAF_IN_PLACE)
    raise AssertionError("an add_ of a wrong shape succeeded")  # pragma: no cover


def recorded_as(view: torch.Tensor, creation: CreationMeta) -> torch.Tensor:
    """``view``, with autograd's record of its making set to ``creation``: a backend's output view that stands
    for one of ``split``'s outputs, or for a view made under ``no_grad``, which AOTAutograd remakes as a plain
    view or as one made in its custom Function. A tensor that is not a view is returned as it is."""
    if view._is_view():
        torch._C._autograd._set_creation_meta(view, creation)
    return view


def stale_view(base: torch.Tensor, shape: Any, stride: Any, offset: Any) -> torch.Tensor:
    """A view of ``base`` with this geometry that :func:`is_stale_view`: made under ``no_grad`` (so without a
    grad_fn although ``base`` requires grad), then marked as made in grad mode, and made at another version of
    the storage than the current one (the version counter is set back right after, so nothing saved for
    backward sees a change), so that asking for its grad_fn makes one, as for the view it stands for."""
    view = no_grad_view_before_write(base, shape, stride, offset)
    torch._C._autograd._set_creation_meta(view, _DEFAULT_VIEW)
    return view


def no_grad_view_before_write(base: torch.Tensor, shape: Any, stride: Any, offset: Any) -> torch.Tensor:
    """A view of ``base`` with this geometry made under ``no_grad`` at another version of the storage than the
    current one (the version counter is set back right after, so nothing saved for backward sees a change):
    as a view made under ``no_grad`` before a write to its base, reading its ``grad_fn`` or ``is_leaf`` raises
    where the base requires grad."""
    version = base._version
    # a version the storage had before (the counter only grows, so no later write brings it back and the view's
    # grad_fn is made when asked for, as eager's is); a version after the current one, where there is none before,
    # would match once a write reaches it (fuzz 61:56: the write that ran for real after the rebuild)
    made_at = version - 1 if version > 0 else version + 1
    torch._C._autograd._unsafe_set_version_counter((base,), (made_at,))
    try:
        with torch.no_grad():
            view = base.as_strided(shape, stride, offset)
    finally:
        torch._C._autograd._unsafe_set_version_counter((base,), (version,))
    return view


def is_aot_graph_output(t: torch.Tensor) -> bool:
    """Whether non-leaf ``t``'s ``grad_fn`` is the node of an AOTAutograd graph (``CompiledFunctionBackward``:
    a ``torch.autograd.Function`` that ``torch._functorch`` builds per compiled graph, with one output per graph
    output)."""
    forward = getattr(type(t.grad_fn), "_forward_cls", None)
    return getattr(forward, "__module__", "").startswith("torch._functorch.")


def rebase_on_own_node(t: torch.Tensor) -> None:
    """Give non-leaf, non-view, real floating ``t`` a ``grad_fn`` of its own: ``t.mul_(1)`` in grad mode (an exact
    identity on real floats, ``-0.0`` and NaN included), so ``t.output_nr`` becomes 0 and gradients reach the old
    node through a one-output node, unchanged. The version counter is set back right after, so nothing saved for
    backward (or reading ``t._version``) sees a change."""
    version = t._version
    with torch.enable_grad():
        t.mul_(1)
    torch._C._autograd._unsafe_set_version_counter((t,), (version,))


def geometry(t: torch.Tensor) -> tuple:
    """What an in-place metadata op (``unsqueeze_``, ``t_``) changes on ``t``: shape, strides, storage offset and
    version counter, for :func:`restore_geometry`."""
    return t, t.shape, t.stride(), t.storage_offset(), t._version


def restore_geometry(saved: tuple) -> None:
    """Put back what :func:`geometry` saved, version counter included (a tensor that requires no grad: no autograd
    history is involved)."""
    t, shape, stride, offset, version = saved
    if (t.shape, t.stride(), t.storage_offset()) != (shape, stride, offset):
        with torch.no_grad():
            t.as_strided_(shape, stride, offset)
    torch._C._autograd._unsafe_set_version_counter((t,), (version,))


def storage_key(t: Any) -> tuple | None:
    """What identifies the memory of live tensor ``t``: its device and the address of its storage. ``None`` for
    what has no storage to share (not a strided tensor, or an empty storage: those all report address 0 and
    alias nothing). Two tensors share memory when their keys are equal and not ``None``."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
        return None
    ptr = t.untyped_storage().data_ptr()
    return (t.device, ptr) if ptr else None


def shares_memory(a: Any, b: Any) -> bool:
    """Whether tensors ``a`` and ``b`` (live or fake) share one storage: a view, a ``detach()``, or the tensor
    itself; ``False`` where either is no tensor."""
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch._C._is_alias_of(a, b)


def storage_snapshot(tensors: list, limit: int) -> list | None:
    """A copy of the storage of each of ``tensors`` (dense, strided; one copy per storage) and their version
    counters, for :func:`restore_storages`. The copy is made at the storage level: no version counter moves, an
    input whose memory overlaps itself is no problem, and autograd records nothing. ``None`` where the storages
    hold more than ``limit`` bytes in all, or a tensor has no storage (a sparse one)."""
    copies, seen, total = [], set(), 0
    for t in tensors:
        if t.layout != torch.strided:  # no storage to copy (sparse): as a copy too large to make
            return None
        key = storage_key(t)
        if key is None or key in seen:  # an empty storage, or one copied already
            continue
        seen.add(key)
        storage = t.untyped_storage()
        total += storage.nbytes()
        if total > limit:
            return None
        copies.append((storage, storage.clone()))
    return [copies, [(t, t._version) for t in tensors]]


def restore_storages(saved: list) -> bool:
    """Put back what :func:`storage_snapshot` copied: the bytes of each storage, then each version counter.
    ``False`` (nothing put back) where a storage was resized since."""
    copies, versions = saved
    if any(storage.nbytes() != copy.nbytes() for storage, copy in copies):
        return False
    for storage, copy in copies:
        storage.copy_(copy)
    torch._C._autograd._unsafe_set_version_counter(tuple(t for t, _ in versions), tuple(v for _, v in versions))
    return True
