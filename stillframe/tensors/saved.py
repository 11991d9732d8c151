"""Tensors saved for backward and written in place later: the calls that save them run for real.

Eager autograd saves some tensors of an op for its backward (``t2.sin()`` saves ``t2``; a
``torch.autograd.Function`` saves what ``ctx.save_for_backward`` names) with their version; a later in-place
write to the tensor, or to any tensor sharing its version counter (its base and views, a ``detach()`` of it),
makes a backward through that op raise "one of the variables needed for gradient computation has been modified
by an inplace operation". No graph reproduces that: AOTAutograd saves the value from before the write, and
torch's ``autograd_function_apply`` keeps what a Function saves where no version is checked (torch.compile
returns gradients there too).

The ``eager`` backend runs the graph's real ops, which save and check for themselves (a captured Function
included: see ``runtime/function_apply.py``), so nothing is recorded for it (``Tracer.functional_backend``). For
the others the trace records which fakes each traced call saved (a pack hook while the op runs on fakes; the Function
rule names what its ``ctx`` saved), and an in-place op that writes one of them raises
:class:`~stillframe.errors.RetraceSavedTensor`: the frame is traced again with the saving call (its
instruction) run for real. Autograd then saves the real tensor, the write (in a later graph, or for real)
bumps its real version, and a backward raises where eager's does, and only where it does.

Saved fakes are resolved to tensor identities only when a write is checked, so a call whose trace was rolled
back (speculation, a restored checkpoint) no longer counts: its fakes are in no live state.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import contextlib
from typing import Any, Iterator

import torch

from ..errors import RetraceRunForReal, RetraceSavedTensor


def location(tx: Any) -> tuple:
    """Where the trace stands: ``(code object, instruction index)`` of the instruction being traced."""
    frame = tx.frame
    return (frame.code.code, frame.ip - 1)



def refuse_if_saving_runs_for_real(tx: Any, what: str) -> None:
    """Break before a call that an earlier trace of this frame found must run for real: it saves for backward a
    tensor written in place later, or makes one a gradient hook is put on later (``RetraceRunForReal``)."""
    if tx.run_for_real and location(tx) in tx.run_for_real:
        why = tx.run_for_real_why.get(location(tx))
        tx.unsupported("saved_for_backward", f"{what} " + (why or "saves for backward a tensor that is written in "
                       "place later; it runs for real, so autograd checks that tensor's version at backward as in "
                       "eager"), ("the call runs for real, then tracing resumes",))


@contextlib.contextmanager
def recording(tx: Any) -> Iterator[list]:
    """While an op runs on fakes: note each tensor autograd saves for its backward (a pack hook). The block may
    drop from the list it gets the tensors the op itself writes besides its result (``batch_norm``'s running
    statistics: eager checks no version of those)."""
    saved: list = []
    if not tx.functional_backend:
        yield saved
        return

    def pack(t: Any) -> Any:
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, _unpack):
        yield saved
    if saved:
        record(tx, saved)


def _unpack(t: Any) -> Any:
    return t


def record(tx: Any, fakes: list) -> None:
    """Note that the call being traced saved ``fakes`` for backward (on every backend: a rule calls it for what no
    graph's real ops check, such as ``torch.func.vjp``'s closed-over tensors)."""
    tx.saved_for_backward.append((tuple(fakes), location(tx)))
    if tx.functional_backend and tx.input_reshapes:
        _refuse_saving_reshaped_input(tx, fakes)


def _refuse_saving_reshaped_input(tx: Any, fakes: list) -> None:
    """A saved tensor that shares memory with a graph input an ``unsqueeze_``-like op of this graph reshaped: the
    reshape runs for real (``RetraceRunForReal``). AOTAutograd saves a view of the input itself and reshapes the
    input with ``as_strided_`` after the graph, which moves its version, so a backward raised "modified by an
    inplace operation" where eager's reshape came before the save (fuzz 43:20: ``x.transpose_(0, 1)``, then
    ``w @ x``)."""
    roots = {_saved_root(tx, f) for f in fakes}
    locations = frozenset().union(*(at for tid, at in tx.input_reshapes.items() if root(tx, tid) in roots))
    if locations:
        raise RetraceRunForReal(locations, "reshapes a graph input in place that a later call saves for "
                                "backward: AOTAutograd would reshape it after the graph, under the saved view")


def refuse_write_saving_input(tx: Any, describe: str, saved_now: list, others: list, inputs: list) -> None:
    """Break before an in-place op (``describe``) that writes graph ``inputs`` (tids; those that require grad after
    the write: a norm's running statistics do not) and saved for backward (``saved_now``) a tensor that is none of
    its ``others`` (the fakes of its arguments it does not write): a copy of what it writes from before the write
    (``y.mul_(w)`` saves the old ``y`` for ``w``'s gradient), or what it writes, after (``h.sigmoid_()``,
    ``leaky_relu_`` save their result). Call only where ``tx.functional_backend``.

    AOTAutograd saves its own tensors there: the input itself, whose version its ``copy_`` of the new value back
    into the input after the graph then moves, so a backward raised "modified by an inplace operation" where
    eager's runs (fuzz 43:102, 2026:24); or the new value apart from the input, so a later write into the input
    (``Dropout(inplace=True)`` after ``LeakyReLU(inplace=True)``, the two split by a break) is never checked and
    the backward runs where eager's raises (found by a probe). Run for real, the op saves the input as eager
    does."""
    if inputs and any(not any(t is a for a in others) for t in saved_now):
        tx.unsupported("saved_for_backward", f"{describe} writes a graph input that requires grad and saves "
                       "for backward what it writes (before or after the write): AOTAutograd would save a tensor "
                       "apart from the input, whose version a backward would not check as eager's does",
                       ("the graph before it runs, then the call itself, then tracing resumes",))


def record_shared_version(tx: Any, fake: Any, source_fake: Any) -> None:
    """``fake`` shares the version counter of ``source_fake`` without being a view of it (``detach()``)."""
    tx.shared_versions.append((fake, source_fake))


def record_input_reads(tx: Any, tensors: list, result: Any, saved_before: int) -> None:
    """Note that the op just traced read ``tensors`` (TensorVariables), among them graph inputs that require no
    grad, and made ``result`` (a view reads no values: the ops reading the view do); ``saved_before``: how many
    ``tx.saved_for_backward`` entries came before it (see :func:`_refuse_reads_before_write`). Call only where
    ``tx.functional_backend``."""
    if isinstance(result, torch.Tensor) and result._is_view():
        return
    inputs = tx.input_values
    read = frozenset(group for var in tensors if (group := root(tx, var.tid)) is not None and any(
        tid in inputs and isinstance(inputs[tid], torch.Tensor) and not inputs[tid].requires_grad
        for tid in (var.tid, group)))
    if read:
        tx.input_reads.append((read, location(tx), saved_before))


def _refuse_reads_before_write(tx: Any, written: set) -> None:
    """Before an in-place op writing the alias groups ``written``: the ops of this graph that read one of them, a
    graph input requiring no grad, before a later op saved tensors for backward run for real
    (``RetraceRunForReal``). AOTAutograd's min-cut partitioner saves the input itself (a primal) and recomputes
    from it in the backward what eager saved (``t = w / (x.abs() + 1)`` saves ``x.abs() + 1``), and the graph's
    write lands in the input after the forward: the gradient came out computed from the new values, without an
    error (fuzz 58:161; torch.compile the same). Run for real, the read's result is a graph input of its own,
    which nothing writes."""
    count = len(tx.saved_for_backward)
    locations = frozenset(at for read, at, before in tx.input_reads if read & written and before < count)
    if locations - tx.run_for_real:
        raise RetraceRunForReal(locations, "reads a graph input that a later op of the graph writes in place: "
                                "AOTAutograd could save the input for backward and recompute from its new values")


def check_write(tx: Any, roots: list[int]) -> None:
    """Before an in-place op writing the alias groups of ``roots``: a saved tensor among them means the frame is
    traced again with its saving calls run for real (or, if they already are, this write runs for real); so
    does an op that read one of them, a graph input, before tensors were saved (:func:`_refuse_reads_before_write`)."""
    if not tx.saved_for_backward:
        return
    written = sharing_version(tx, set(roots))
    if tx.functional_backend and tx.input_reads:
        _refuse_reads_before_write(tx, written)
    locations = set()
    for fakes, location in tx.saved_for_backward:
        if any(_saved_root(tx, f) in written for f in fakes):
            locations.add(location)
    if not locations:
        return
    if locations <= tx.run_for_real:  # a saving call that could not break there: the write runs for real
        tx.unsupported("saved_for_backward", "an in-place op writes a tensor saved for backward earlier",
                       ("the write runs for real",))
    raise RetraceSavedTensor(frozenset(locations))


def _saved_root(tx: Any, fake: Any) -> int | None:
    """The alias group (its root's tid) of a saved tensor: a traced tensor's, or, for a view the op made inside
    itself and saved (``t2 @ y`` on a 1-d ``t2`` saves ``t2.unsqueeze(0)``: fuzz 35:158), its base's."""
    tid = tx.tid_of_fake(fake)
    if tid is None and getattr(fake, "_base", None) is not None:
        tid = tx.tid_of_fake(fake._base)
    return root(tx, tid)


def root(tx: Any, tid: int | None) -> int | None:
    """The alias group of tensor ``tid``: its base's tid, or its own."""
    if tid is None:
        return None
    base = tx.state.heap[tid].meta.base
    return tid if base is None else base


def sharing_version(tx: Any, roots: set) -> set:
    """``roots`` and the roots linked to them by :func:`record_shared_version` pairs (both ways)."""
    pairs = [(root(tx, tx.tid_of_fake(a)), root(tx, tx.tid_of_fake(b))) for a, b in tx.shared_versions]
    pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
    grown = True
    while grown:
        grown = False
        for a, b in pairs:
            if (a in roots) != (b in roots):
                roots |= {a, b}
                grown = True
    return roots

