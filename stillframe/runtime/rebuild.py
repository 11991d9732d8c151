"""Rebuilding live Python values from the trace state: the plan's return value and a break's call stack.

:class:`StateCodegen` renders VariableTrackers as Python expressions over the
graph's outputs (``___out``), the fetched graph inputs (``___in``) and sources
(``L``, ``G``, ``F``). Objects with identity (lists, dicts, objects and cells
made in the trace) are built once, into a local, so two references to one
heap object rebuild one object. Recorded side effects become statements that
replay them on the real objects. The result is one generated function::

    def ___rebuild(___out, ___in, L, G, F):
        l0 = []
        l0.extend([___out[0], ___in[1]])
        L['log'][:] = [___out[1]]           # a replayed side effect
        return (l0, l0, 3)
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import collections
import copy
import functools
import itertools
import operator
import types
from typing import Any, Callable

import torch
from .. import compat
from ..bytecode.liveness import live_locals
from ..variables.reach import collection_unseen
from ..guards.guard import GuardCodegen, OwnRef, held_weakly
from ..guards.source import LocalSource, ScalarOutputSource
from ..tensors.meta import TensorMeta
from ..tensors.symbolic import plain, reads_data
from ..variables.base import (
    AttrsView,
    AutocastExitVariable,
    AutocastVariable,
    BuiltinVariable,
    CellVariable,
    ConstantVariable,
    ContextExitVariable,
    DictLayout,
    DictVariable,
    NumpyArrayVariable,
    DictViewVariable,
    GeneratorVariable,
    GradModeVariable,
    InferenceModeExitVariable,
    InferenceModeVariable,
    IteratorVariable,
    LazyArgument,
    ListVariable,
    LiveIteratorVariable,
    NNModuleVariable,
    NestedFunctionVariable,
    NullVariable,
    PartialVariable,
    PythonObjectVariable,
    RangeItems,
    RangeVariable,
    SetVariable,
    TensorKey,
    DequeVariable,
    SliceVariable,
    SymNodeVariable,
    TensorMethodVariable,
    TensorVariable,
    TorchFunctionVariable,
    TupleVariable,
    UserFunctionVariable,
    UserMethodVariable,
    VariableTracker,
)
from ..variables.builder import wrap
from ..variables.objects import (ContainerMethodVariable, DELETED, ExceptionEntry, ObjectVariable, SuperVariable,
                                 _Deleted, dict_base)
from ..rules.exceptions import fresh_exception
from ..rules.known import key_variable, live_iterator_index
from ..rules.iteration import LIST_REVERSEITERATOR
from ..rules.protocol import Protocol
from ..trace.interpreter import Tracer
from ..variables import standins
from . import live
from .trampoline import trampoline
from .tracebacks import frames_traceback


def _literal(value: Any) -> bool:
    """Whether ``repr(value)`` written in the rebuild's code gives back ``value`` itself, not an equal object: None,
    a bool, or an int CPython caches (-5 to 256). Any other constant (a str, a float, a larger int) is passed as
    the object the trace holds: eager's frame holds the code's own constant, and ``is`` tells them apart (test_weakref
    check_setdefault: ``weakdict.setdefault(key, "value 1") is "value 1"`` turned False across a break)."""
    kind = type(value)
    return kind is bool or value is None or (kind is int and -5 <= value <= 256)


def delete_own_attr(obj: Any, name: str) -> None:
    """The replay of a traced ``del obj.name`` whose net effect is that the object has no ``name`` of its own: it
    may never have had one (set, then deleted, in the trace), and a class attribute of that name stays."""
    try:
        delattr(obj, name)
    except AttributeError:
        pass


class StateCodegen:
    """Renders VTs (and the recorded side effects) as statements and expressions of one generated function."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self.gen = GuardCodegen()
        self.output_nodes: list = []
        self.output_index: dict[int, int] = {}
        self.input_position = {tid: i for i, (_src, tid) in enumerate(tracer.state.inputs)}
        self.named: dict[tuple, str] = {}
        self.final = False  # rendering what the function returns (no resumed trace will read these values)
        # live iterators moved in place (standins.resume_in_place), by id: after every other statement, which may
        # still read their items where the trace found them
        self.moved: dict[int, str] = {}
        # weak references to the caller's objects the generated function uses (live): the cache entry watches them
        self.held: list[OwnRef] = []

    # --------------------------------------------------------------- values
    def live(self, value: Any) -> str:
        """An expression for ``value``, an object of the caller's that the trace found (a function, a class, an
        instance of one), which the generated function holds through a weak reference: a cache entry holds no
        strong reference to the caller's objects (``runtime/entry.py``), or one would outlive eager's (a method
        deleted from its class stayed alive in the plan of the break that rebuilt its bound method, and a
        ``WeakMethod`` to it never died: test_weakref test_method_dead). The entry is dropped when one dies
        (:attr:`held`, watched as the objects its guards compare by ``id()`` are); other values are held as
        constants."""
        if not held_weakly(value):
            return self.gen.const(value)
        ref = OwnRef(value)
        self.held.append(ref)
        return f"{self.gen.const(ref)}()"

    def expr(self, var: VariableTracker) -> str:
        """A Python expression that evaluates to ``var``'s live value (the :data:`REBUILD` table)."""
        return REBUILD(self, var)

    def _dict_part(self, name: str, entry: Any) -> list[str]:
        """Statements filling the dict part of a rebuilt dict-subclass instance, through its C base's own
        ``__setitem__`` (the subclass's overrides already ran in the trace)."""
        if entry.storage is None:
            return []
        setitem = f"{self.gen.const(dict_base(entry.cls))}.__setitem__"
        return [f"{setitem}({name}, {self._key(k)}, {self.expr(v)})" for k, v in self.tracer.heap(entry.storage).items]

    def _tensor(self, var: TensorVariable) -> str:
        tx = self.tracer
        if var.tid in self.input_position:
            return f"___in[{self.input_position[var.tid]}]"  # the very object fetched, as eager returns it
        meta = tx.tensor(var).meta
        make = self._view_maker(var, meta)
        if make is not None:
            base = self._tensor(TensorVariable(meta.base))
            return self._once(("view", var.tid), f"{self.gen.const(make)}({base}, {meta.shape!r}, {meta.stride!r}, "
                              f"{meta.storage_offset!r})", lambda name: "pass")
        if var.tid not in self.output_index:
            entry = tx.tensor(var)
            if entry.node is None:
                tx.unsupported("hidden_base", "the base of an input view is needed outside the graph")
            self.output_index[var.tid] = len(self.output_nodes)
            self.output_nodes.append(entry.node)
        out = f"___out[{self.output_index[var.tid]}]"
        if self._stale(var):  # a backend's output view has a grad_fn; the view eager has here has none yet
            return self._once(("view", var.tid), f"{self.gen.const(compat.stale_view)}({out}._base, "
                              f"{out}.shape, {out}.stride(), {out}.storage_offset())", lambda name: "pass")
        if tx.functional_backend and self._made_otherwise(meta):
            return self._once(("view", var.tid), f"{self.gen.const(compat.recorded_as)}({out}, "
                              f"{self.gen.const(meta.view_creation)})", lambda name: "pass")
        return out

    def _made_otherwise(self, meta: TensorMeta) -> bool:
        """Whether AOTAutograd's output for the view ``meta`` describes may record its making otherwise than eager
        does, so that an in-place op on it, or on its base, raises where eager's does not (or with another
        message). It remakes an output view as a plain view, or as one made in its custom Function, or under
        no_grad: one of split's outputs (symbolic geometry) would then take an in-place op that eager refuses;
        in a call in grad mode, a view made under no_grad (the grads ``torch.autograd.grad`` returns) would
        refuse one with another message (fuzz 37:35), and a view made in grad mode of a base that requires no
        grad would refuse a write to its base that gives it history (a Function that marks its base dirty)."""
        CreationMeta = compat.CreationMeta
        if meta.base is None or meta.view_creation == CreationMeta.INFERENCE_MODE:
            return False
        if meta.view_creation not in (CreationMeta.DEFAULT, CreationMeta.NO_GRAD_MODE):
            return True
        if not self.tracer.entry_grad_enabled:  # an inference call: AOTAutograd's views are made under no_grad too
            return False
        return meta.view_creation == CreationMeta.NO_GRAD_MODE or \
            not self.tracer.state.heap[meta.base].meta.requires_grad

    def _view_maker(self, var: TensorVariable, meta: TensorMeta) -> Callable | None:
        """How to make the view ``var`` again from its base, with the geometry the trace gave it, where the
        backend's own output cannot be returned; ``None`` where it can. Only static geometry is remade."""
        tx = self.tracer
        if meta.base is None or not all(type(n) is int for n in (*meta.shape, *meta.stride, meta.storage_offset)):
            return None
        if meta.autograd_error is not None and tx.state.heap[meta.base].node is not None:
            # a view made under no_grad whose base was written since: reading its autograd metadata raises, so no
            # backend returns it (AOTAutograd fails)
            return compat.no_grad_view_before_write
        if not tx.functional_backend:
            return None
        if meta.base in tx.inputs_reshaped and meta.base in self.input_position and \
                not tx.input_values[meta.base].requires_grad:
            # AOTAutograd makes an output view of an input the graph reshaped in place (t_, unsqueeze_) from the
            # input's geometry before the change (fuzz 34:766: another view of it, silently); the input has its
            # new geometry by the time the rebuild runs
            return torch.Tensor.as_strided
        if self._stale(var):
            # an AOTAutograd output view of an intermediate may come back with no _base (fuzz 35:230): the stale
            # view is made from its base's own output
            return compat.stale_view
        if meta.view_creation == compat.CreationMeta.NO_GRAD_MODE and tx.entry_grad_enabled and \
                tx.state.heap[meta.base].meta.requires_grad and \
                (tx.state.heap[meta.base].node is not None or meta.base in self.input_position):
            # a view made under no_grad of a base that requires grad: AOTAutograd remakes it outside its Function
            # in grad mode, with a grad_fn eager's has not (so it is no leaf, and an in-place op on it raised
            # another error than eager's): made from its base under no_grad, as eager made it (found by a probe)
            return functools.partial(compat.view_made_as, creation=meta.view_creation)
        if meta.view_creation not in (compat.CreationMeta.DEFAULT, compat.CreationMeta.NO_GRAD_MODE) and \
                (tx.state.heap[meta.base].node is not None or meta.base in self.input_position):
            # one of split's outputs: AOTAutograd returns it as a plain tensor (or remakes it as a plain view), so
            # an in-place op that eager refuses on it would run; it is made from its base, recorded as eager's
            return self._replayed_view(var, meta) or functools.partial(compat.view_made_as,
                                                                      creation=meta.view_creation)
        return None

    def _replayed_view(self, var: TensorVariable, meta: TensorMeta) -> Callable | None:
        """``var`` is one of the views one op made at once (``y.split(2)[0]``) and the op's call can be made again
        on its base as the base is now (same geometry, grad mode on): that call, so the view is eager's (its
        grad_fn, and autograd's refusal of an in-place op on it, name the op)."""
        tx = self.tracer
        node = tx.tensor(var).node
        if node is None or node.op != "call_function" or node.target is not operator.getitem or \
                not tx.state.grad_enabled:
            return None
        maker, index = node.args
        if not isinstance(maker, torch.fx.Node) or maker.op not in ("call_function", "call_method") or \
                type(index) is not int or not maker.args or not isinstance(maker.args[0], torch.fx.Node):
            return None
        found: list = []
        torch.fx.node.map_arg((maker.args[1:], maker.kwargs), found.append)
        base, view = maker.args[0].meta.get("val"), node.meta.get("val")
        if found or not isinstance(base, torch.Tensor) or tx.tid_of_fake(base) != meta.base or \
                not isinstance(view, torch.Tensor) or _geometry(TensorMeta.of(view)) != _geometry(meta) or \
                _geometry(TensorMeta.of(base)) != _geometry(tx.state.heap[meta.base].meta):
            return None
        fn = getattr(torch.Tensor, maker.target) if maker.op == "call_method" else maker.target
        args, kwargs = maker.args[1:], dict(maker.kwargs)
        return lambda b, _shape, _stride, _offset: fn(b, *args, **kwargs)[index]

    def _stale(self, var: TensorVariable) -> bool:
        """Whether ``var`` is a view that autograd treats as a leaf (:func:`compat.is_stale_view`), which no
        backend returns (a graph's output views are made after the graph's in-place ops)."""
        entry = self.tracer.tensor(var)
        if not entry.meta.grad_fn_pending:
            return False
        with self.tracer.fake_context():
            return compat.is_stale_view(entry.fake)

    def _callable(self, fn: Any) -> str:
        if isinstance(fn, NestedFunctionVariable):
            return self._function(fn)
        return self.live(fn)

    def _items(self, items: tuple) -> str:
        return ", ".join(self.expr(v) for v in items)

    def _dict(self, items: tuple) -> str:
        return "{" + ", ".join(f"{self._key(k)}: {self.expr(v)}" for k, v in items) + "}"

    def _key(self, k: Any) -> str:
        if type(k) is TensorKey:
            return self.expr(TensorVariable(k.tid))
        return repr(k) if _literal(k) else self.gen.const(k)

    def _once(self, key: tuple, create: str, fill: Callable[[str], str]) -> str:
        """Create an object with identity once (so cycles and shared references work), then fill it."""
        if key in self.named:
            return self.named[key]
        name = f"o{len(self.named)}"
        self.named[key] = name
        self.gen.lines.append(f"{name} = {create}")
        self.gen.lines.append(fill(name))
        return name

    def cell(self, ref: Any) -> str:
        """A closure cell: one made in the trace (a heap id) or a live one (``("real", cell, source)``)."""
        if isinstance(ref, int):
            contents = self.tracer.heap(ref).contents
            return self._once(("cell", ref), f"{self.gen.const(types.CellType)}()",
                              lambda name: f"{name}.cell_contents = {self.expr(contents)}" if contents is not None
                              else "pass")
        _, real_cell, source = ref
        return self.gen.ref(source) if source is not None else self.gen.const(real_cell)

    def _function(self, fn: NestedFunctionVariable) -> str:
        closure = "(" + "".join(self.cell(c) + ", " for c in fn.closure) + ")" if fn.closure else "None"
        defaults = "(" + "".join(self.expr(v) + ", " for v in fn.defaults) + ")" if fn.defaults else "None"
        globals_ = "G" if fn.globals_module is None else f"___module_globals({fn.globals_module!r})"
        text = (f"{self.gen.const(types.FunctionType)}({self.gen.const(fn.code)}, {globals_}, "
                f"{fn.code.co_name!r}, {defaults}, {closure})")
        # made once: every reference to the function is the same object, as in eager
        return self._once(("function", id(fn)), text, lambda n: "; ".join(self._function_attrs(n, fn)) or "pass")

    def _function_attrs(self, name: str, fn: NestedFunctionVariable) -> list[str]:
        """Statements giving a rebuilt function its keyword defaults and the attributes the trace set."""
        lines = [f"{name}.__kwdefaults__ = {self._dict(fn.kwdefaults)}"] if fn.kwdefaults else []
        written = self.tracer.heap(fn.attrs).items if fn.attrs is not None else ()
        for key, value in written:
            if isinstance(key, tuple):  # a slot: __name__, __qualname__, __doc__, __module__ ...
                lines.append(f"{name}.{key[1]} = {self.expr(value)}")
            else:
                lines.append(f"{name}.__dict__[{self._key(key)}] = {self.expr(value)}")
        return lines

    # --------------------------------------------------------- side effects
    def side_effects(self) -> None:
        """Statements replaying recorded mutations of outside objects, in the order they were first made.

        Every value a replay writes is read (or made) before the first replay runs: a value with a source is the
        object as the trace found it, which an earlier replay may move (``o.a = lst.pop()``: ``L['lst'][0]``,
        read after ``L['lst'][:] = []``, was an IndexError of the rebuild's own)."""
        tx = self.tracer
        statements: list[str] = []
        for key, (_order, payload) in sorted(tx.state.side_effects.items(), key=lambda kv: kv[1][0]):
            kind = key[0]
            if kind == "list":
                entry = tx.heap(payload.oid)
                ref = self.gen.ref(entry.source) if entry.source is not None else self.gen.const(entry.live)
                if entry.items is None:  # only appended to: extend the caller's list, never read
                    statements.append(f"{ref}.extend([{self._items(entry.appended)}])")
                else:
                    statements.append(f"{ref}[:] = [{self._items(entry.items)}]")
            elif kind == "dict":
                entry = tx.heap(payload.oid)
                ref = self.gen.ref(entry.source) if entry.source is not None else self.gen.const(entry.live)
                # the same keys in the same order: only values written, as update writes them (clear would give the
                # dict a new table, under a loop iterating it for real)
                # (the values are read, from the dict itself maybe, before it is cleared)
                keys, values = f"[{', '.join(self._key(k) for k, _ in entry.items)}]", self._dict(entry.items)
                statements.append(f"if not {self.gen.const(standins.has_keys)}({ref}, {keys}): {ref}.clear()")
                statements.append(f"{ref}.update({values})")
            elif kind == "live_item":  # d[key] = value into a live dict by a live key (rules/live_dicts.py)
                mapping, item_key, value = payload
                statements.append(f"{self.expr(mapping)}[{self.expr(item_key)}] = {self.expr(value)}")
            elif kind == "attr":
                owner, value = payload
                if value is DELETED:  # net effect of the trace: absent (it may have been set, then deleted)
                    statements.append(f"{self.gen.const(delete_own_attr)}({self.expr(owner)}, {key[2]!r})")
                else:
                    statements.append(f"setattr({self.expr(owner)}, {key[2]!r}, {self.expr(value)})")
            elif kind == "attr_del":  # deleted, then set again (the "attr" entry): the set comes later
                statements.append(f"{self.gen.const(delete_own_attr)}({self.expr(payload[0])}, {key[2]!r})")
            elif kind == "live_iter":  # a live iterator the trace read from: where it stands, for whoever holds it
                self.move_live_iterator(payload)
            elif kind == "cell":
                cell_source, value = payload
                statements.append(f"{self.gen.ref(cell_source)}.cell_contents = {self.expr(value)}")
            elif kind == "call":  # a deferred logging call, made from the user's line
                fn, args, kwargs, code, line = payload
                step = self.gen.const(trampoline(code, line, "call"))
                kw = ", ".join(f"{k!r}: {self.expr(v)}" for k, v in kwargs)
                statements.append(f"{step}({self.expr(fn)}, [{self._items(args)}], {{{kw}}})")
            elif kind == "global":
                module, name = key[1], key[2]
                target = "G" if module is None else f"___module_globals({module!r})"
                statements.append(f"{target}[{name!r}] = {self.expr(payload)}")
        self.gen.lines.extend(statements)

    # ------------------------------------------------------------- frames
    def frames(self) -> str:
        """The live call stack at a break: a list of ``LiveFrame`` expressions, outermost first."""
        parts = []
        frames = self.tracer.state.frames
        for depth, frame in enumerate(frames):
            stack = self._items(frame.stack)
            # a dead local made of tensors and constants is not rebuilt (nor a graph output). A caller's frame is
            # mid-call at ip - 1: what is live before that instruction includes its exception handler's reads,
            # should the callee raise
            live_names = live_locals(frame.code, frame.ip if depth == len(frames) - 1 else frame.ip - 1)
            # any other dead local is kept: eager's frame holds it to its end (or to the `del`), and its collection
            # may be seen (a weak reference the real step takes, a __del__, a class in its bases' __subclasses__)
            kept = [(k, v) for k, v in in_code_order(frame.locals, frame.code.code) if live_names is None or
                    k in live_names or k not in frame.code.code.co_varnames or
                    not collection_unseen(v, self.tracer.state.heap)]
            locals_ = "{" + ", ".join(f"{k!r}: {self.expr(v)}" for k, v in kept) + "}"
            cells = "{" + ", ".join(f"{k!r}: {self.cell(v)}" for k, v in in_code_order(frame.cells, frame.code.code))
            cells += "}"
            globals_ = "G" if frame.globals_module is None else f"___module_globals({frame.globals_module!r})"
            yields = "None" if frame.yields is None else f"[{self._items(frame.yields)}]"
            data = frozenset(k for k, v in frame.locals.items()  # floats read from tensor data stay data
                             if isinstance(v, LazyArgument) and isinstance(v.source, ScalarOutputSource)
                             or isinstance(v, SymNodeVariable) and reads_data(self.tracer, v.value))
            parts.append(f"{self.gen.const(live.LiveFrame)}({self.gen.const(frame.code)}, {frame.ip}, [{stack}], "
                         f"{locals_}, {cells}, {globals_}, {frame.globals_module!r}, {frame.kw_names!r}, {yields}, "
                         f"{self.gen.const(data)})")
        return "[" + ", ".join(parts) + "]"

    def move_live_iterator(self, var: LiveIteratorVariable) -> None:
        """Move the live iterator ``var`` stands for to where this trace left it, once, after all else."""
        if var.obj_id not in self.moved:
            base = self.gen.ref(var.items_source.base)
            index = live_iterator_index(self.tracer, var)
            self.moved[var.obj_id] = f"{self.gen.const(standins.resume_in_place)}({base}, {index})"

    def function(self, result_expr: str, name: str = "___rebuild") -> tuple[Callable, str]:
        text = f"def {name}(___out, ___in, L, G, F):\n"
        text += "".join(f"    {line}\n" for line in self.gen.lines)
        if self.moved:
            text += f"    ___result = {result_expr}\n"
            text += "".join(f"    {line}\n" for line in self.moved.values())
            result_expr = "___result"
        text += f"    return {result_expr}\n"
        ns = self.gen.namespace()
        exec(compile(text, f"<stillframe {name.strip('_')}>", "exec"), ns)
        return ns.pop(name), text  # not left in its own globals: no cycle keeps it alive


def in_code_order(names: Any, code: Any) -> list:
    """The items of a frame's persistent map of locals or cells in the code's order (``co_varnames``, then cell and
    free variables, then the rest sorted), not the map's hash order: graph outputs are numbered in the order the
    rebuild reads them, so the same program makes the same graph whatever ``PYTHONHASHSEED`` is."""
    order = {name: i for i, name in enumerate(dict.fromkeys(code.co_varnames + code.co_cellvars + code.co_freevars))}
    return sorted(names.items(), key=lambda kv: (order.get(kv[0], len(order)), str(kv[0])))


# ------------------------------------------------------------------ the rebuild protocol

def _cannot_rebuild(cg: StateCodegen, var: VariableTracker, reason: str) -> str:
    cg.tracer.unsupported("unsupported_live_value", f"a {var.python_type().__name__} value cannot be rebuilt at a "
                          f"graph break: {reason}")


#: ``cg.expr(var)``: the expression rebuilding ``var``, one rule per VariableTracker kind (issue 10).
REBUILD = Protocol("rebuild", _cannot_rebuild)


@REBUILD.rule(LazyArgument)
def _rebuild_lazy(cg: StateCodegen, var: LazyArgument) -> str:
    # (issubclass of the type: isinstance of a dead weakref.proxy raises ReferenceError)
    if issubclass(type(var.value), standins.ResumableIterator):  # a loop's iterator also held in a local
        return cg.expr(wrap(cg.tracer, var.value, var.source))
    return cg.gen.ref(var.source)


@REBUILD.rule(TensorVariable)
def _rebuild_tensor(cg: StateCodegen, var: TensorVariable) -> str:
    return cg._tensor(var)


@REBUILD.rule(SymNodeVariable)
def _rebuild_symbolic(cg: StateCodegen, var: SymNodeVariable) -> str:
    """A symbolic size is a graph output: the graph computes it from the inputs' sizes. A symbolic bool (a
    comparison of sizes, mostly one a branch already tested) is specialized: the ShapeEnv guards its value; one
    that depends on tensor data (``t.item() > 0`` under capture_scalar_outputs, or on a float read by a real
    ``t.item()``) cannot be, and is an output."""
    if not compat.is_symbolic(var.value):
        return repr(plain(var.value))
    if isinstance(var.value, torch.SymBool) and not reads_data(cg.tracer, var.value):
        try:
            return repr(plain(var.value))
        except compat.GuardOnDataDependentSymNode:
            pass
    if var.node.op == "placeholder":  # an int argument made symbolic: the very value fetched
        oid = next(oid for oid, node in cg.tracer.input_nodes.items() if node is var.node)
        return f"___in[{cg.input_position[oid]}]"
    cg.output_nodes.append(var.node)
    return f"___out[{len(cg.output_nodes) - 1}]"


@REBUILD.rule(ConstantVariable)
def _rebuild_constant(cg: StateCodegen, var: ConstantVariable) -> str:
    v = var.value
    if _literal(v):
        return repr(v)
    if isinstance(v, BaseException) and var.source is None:
        # made in the trace (`raise ValueError(...)`): a new one per call, as eager makes it, never one object
        # raised by every call (its traceback grew by one call's frames each time)
        # (one copy per exception, however many places hold it: `e` and the exception being handled)
        return cg._once(("exception", id(v)), f"{cg.gen.const(_fresh_exception)}({cg.gen.const(v)})",
                        lambda name: "pass")
    return cg.gen.const(v)


def _fresh_exception(exc: BaseException) -> BaseException:
    """A copy of ``exc`` with its chaining and no traceback (``exc`` itself where its class cannot be rebuilt
    from its args)."""
    try:
        fresh = copy.copy(exc)
    except Exception:  # an __init__ whose parameters are not its args
        return exc
    fresh.__cause__, fresh.__context__ = exc.__cause__, exc.__context__  # the chaining the trace gave it
    fresh.__suppress_context__ = exc.__suppress_context__
    if isinstance(getattr(exc, "__notes__", None), list):  # (copy.copy shares the list add_note appends to)
        fresh.__notes__ = list(exc.__notes__)
    return fresh


@REBUILD.rule(TupleVariable)
def _rebuild_tuple(cg: StateCodegen, var: TupleVariable) -> str:
    if type(var.source) is LocalSource or (var.source is not None and var.cls.__dictoffset__):
        # the live object itself: an argument of the frame is the caller's tuple (`t is G` after the break), and
        # a tuple subclass whose instances have a __dict__ (a NamedTuple subclass without __slots__) holds mutable
        # state a new one would lose (`a.w = 5` run for real, then `vars(a)`)
        return cg.gen.ref(var.source)
    inner = "".join(cg.expr(v) + ", " for v in var.items)
    if var.cls is tuple:  # one object for every slot that holds this value (`b = a` then `a is b` after the break)
        if not var.items:
            return "()"
        # a display of literals is one constant of the rebuild's code: tuple([...]) makes a tuple per VT, as eager
        # made one per BUILD_TUPLE (`tuple([1]) is tuple([1])` is False)
        literal = all(isinstance(v, ConstantVariable) and cg.expr(v) == repr(v.value) for v in var.items)
        return cg._once(("tuple", id(var)), f"tuple([{inner}])" if literal else f"({inner})", lambda name: "pass")
    cls = cg.gen.const(var.cls)
    if var.cls is torch.Size or hasattr(var.cls, "n_fields"):
        return f"{cls}(({inner}))"
    if var.cls.__dictoffset__:  # one object for every slot that holds this value (its __dict__ is state)
        return cg._once(("tuple", id(var)), f"{cls}({inner})", lambda name: "pass")
    return f"{cls}({inner})"


@REBUILD.rule(ListVariable)
def _rebuild_list(cg: StateCodegen, var: ListVariable) -> str:
    tx = cg.tracer
    entry = tx.heap(var.oid)
    if entry.source is not None:
        return cg.gen.ref(entry.source)
    if entry.live is not None:
        return cg.gen.const(entry.live)
    return cg._once(("heap", var.oid), "[]", lambda name: f"{name}.extend([{cg._items(tx.list_items(var))}])")


@REBUILD.rule(DictVariable)
def _rebuild_dict(cg: StateCodegen, var: DictVariable) -> str:
    entry = cg.tracer.heap(var.oid)
    if entry.source is not None:
        return cg.gen.ref(entry.source)
    if isinstance(entry.live, AttrsView):
        return f"{cg.expr(ObjectVariable(entry.live.oid, None))}.__dict__"
    if entry.live is not None:
        return cg.gen.const(entry.live)
    return cg._once(("heap", var.oid), "{}", lambda name: f"{name}.update({cg._dict(entry.items)})")


@REBUILD.rule(NumpyArrayVariable)
def _rebuild_numpy_array(cg: StateCodegen, var: NumpyArrayVariable) -> str:
    """A new ndarray on the graph's output tensor (a NumPy scalar where NumPy gives one); an ndarray from outside
    the trace is itself."""
    if var.source is not None:
        return cg.gen.ref(var.source)
    return f"{cg.expr(TensorVariable(var.tid))}.numpy()" + ("[()]" if var.scalar else "")


@REBUILD.rule(DictViewVariable)
def _rebuild_dict_view(cg: StateCodegen, var: DictViewVariable) -> str:
    """``d.keys()`` of the rebuilt ``d``; of a dict subclass's instance made in the trace, the view is dict's own
    over that instance (its ``.mapping`` is the instance, as eager's), not over a copy of its dict part."""
    owner = cg.tracer.state.memo.get(("storage_owner", var.mapping.oid))
    if owner is not None:
        return f"{cg.gen.const(dict)}.{var.kind}({cg.expr(ObjectVariable(*owner))})"
    return f"{cg.expr(var.mapping)}.{var.kind}()"


@REBUILD.rule(DequeVariable)
def _rebuild_deque(cg: StateCodegen, var: DequeVariable) -> str:
    make = f"{cg.gen.const(collections.deque)}(maxlen={var.maxlen!r})"
    return cg._once(("heap", var.oid), make,
                    lambda name: f"{name}.extend([{cg._items(cg.tracer.list_items(var))}])")


@REBUILD.rule(SetVariable)
def _rebuild_set(cg: StateCodegen, var: SetVariable) -> str:
    values = cg.tracer.heap(var.oid).values
    return cg._once(("heap", var.oid), "set()",
                    lambda name: f"{name}.update([{cg._items(tuple(key_variable(v) for v in values))}])")


@REBUILD.rule(ObjectVariable)
def _rebuild_object(cg: StateCodegen, var: ObjectVariable) -> str:
    entry = cg.tracer.heap(var.oid)
    if isinstance(entry, ExceptionEntry):
        return _rebuild_exception(cg, var, entry)
    cls = cg.live(entry.cls)
    return cg._once(("heap", var.oid), f"{cls}.__new__({cls})", lambda name: "; ".join(
        [f"object.__setattr__({name}, {attr!r}, {cg.expr(value)})" for attr, value in entry.attrs.items]
        + cg._dict_part(name, entry)) or "pass")


def _rebuild_exception(cg: StateCodegen, var: ObjectVariable, entry: ExceptionEntry) -> str:
    """An exception made in the trace, made afresh (one per call, as eager makes it): its class's C ``__new__``
    (with the template's C state), then its args, instance attributes, chaining and traceback."""
    create = f"{cg.gen.const(fresh_exception)}({cg.gen.const(entry.cls)}, {cg.gen.const(entry.template)})"
    if entry.group is not None:  # BaseExceptionGroup.__new__ keeps its message and exceptions
        cls = cg.gen.const(entry.cls)
        create = f"{cls}.__new__({cls}, {cg.expr(entry.group[0])}, {cg.expr(entry.group[1])})"

    def fill(name: str) -> str:
        lines = [f"object.__setattr__({name}, {attr!r}, {cg.expr(value)})" for attr, value in entry.attrs.items]
        context = "None" if entry.context is None else cg.expr(entry.context)
        cause = "None" if entry.cause is None else cg.expr(entry.cause)
        traceback = "None" if not entry.traceback else \
            f"{cg.gen.const(frames_traceback)}({cg.gen.const(entry.traceback)})"
        args = "".join(cg.expr(v) + ", " for v in entry.args.items)
        lines.append(f"{cg.gen.const(_exception_state)}({name}, ({args}), {context}, {cause}, {entry.suppress!r}, "
                     f"{traceback})")
        return "; ".join(lines)

    return cg._once(("heap", var.oid), create, fill)


def _exception_state(exc: BaseException, args: tuple, context: Any, cause: Any, suppress: bool, tb: Any) -> None:
    """Give a rebuilt exception the C state the trace gave it (through ``BaseException``'s own descriptors: a
    class's ``__setattr__`` is not involved, as it was not in the trace)."""
    BaseException.args.__set__(exc, args)
    BaseException.__context__.__set__(exc, context)
    BaseException.__cause__.__set__(exc, cause)
    BaseException.__suppress_context__.__set__(exc, suppress)
    BaseException.__traceback__.__set__(exc, tb)


#: An exhausted iterator of each type a :mod:`~stillframe.rules.polyfills` generator stands for: its arguments.
_EXHAUSTED = {map: (None, ()), filter: (None, ()), zip: (), enumerate: ((),), itertools.chain: (),
              itertools.islice: ((), 0), itertools.repeat: (None, 0), itertools.cycle: ((),),
              itertools.accumulate: ((),), itertools.product: ((),), itertools.combinations: ((), 1),
              itertools.permutations: ((), 1), itertools.zip_longest: (), itertools.pairwise: ((),),
              itertools.starmap: (None, ()), itertools.takewhile: (None, ()), itertools.dropwhile: (None, ()),
              itertools.filterfalse: (None, ()), itertools.compress: ((), ())}


@REBUILD.rule(GeneratorVariable)
def _rebuild_generator(cg: StateCodegen, var: GeneratorVariable) -> str:
    if cg.tracer.heap(var.oid).frame is None:  # finished: nothing more to yield
        if var.made_by in _EXHAUSTED:  # an exhausted iterator of the builtin's type
            return f"{cg.gen.const(var.made_by)}{_EXHAUSTED[var.made_by]!r}"
        if var.made_by is LIST_REVERSEITERATOR:  # (no constructor: reversed() makes it)
            return f"{cg.gen.const(reversed)}([])"
        code = cg.tracer.heap(var.oid).code
        if var.made_by is None and code is not None:  # the user's: a finished generator of its function's code
            return cg._once(("generator", var.oid), f"{cg.gen.const(standins.finished_generator)}("
                            f"{cg.gen.const(code)})", lambda name: "pass")
        return "iter(())"
    cg.tracer.unsupported("suspended_generator", "a generator suspended mid-way cannot be rebuilt at a graph break")


@REBUILD.rule(SliceVariable)
def _rebuild_slice(cg: StateCodegen, var: SliceVariable) -> str:
    # one object for every slot that holds this value (`copy.copy(s) is s` across a break)
    return cg._once(("slice", id(var)), f"slice({cg.expr(var.start)}, {cg.expr(var.stop)}, {cg.expr(var.step)})",
                    lambda name: "pass")


@REBUILD.rule(RangeVariable)
def _rebuild_range(cg: StateCodegen, var: RangeVariable) -> str:
    return cg.gen.const(var.value)


@REBUILD.rule(NullVariable)
def _rebuild_null(cg: StateCodegen, var: NullVariable) -> str:
    return cg.gen.const(standins.NULL)


@REBUILD.rule(IteratorVariable)
def _rebuild_iterator(cg: StateCodegen, var: IteratorVariable) -> str:
    """Made once: every reference is the same iterator. At a graph break it is a ``ResumableIterator`` (the resumed
    trace reads its position); where the function returns, the type the builtin that made it gives. One over a
    list, dict or set stands where it stood over the rebuilt container, so code after the break sees its changes
    (CPython's listiterator and dictiter: :class:`~stillframe.variables.standins.ResumableIterator`)."""
    entry = cg.tracer.heap(var.oid)
    if entry.over is not None:
        create = _container_iterator(cg, var, entry)
    elif entry.watch is not None:
        create = _watched_iterator(cg, entry)
    elif isinstance(entry.items, RangeItems):  # a range's iterator: eager's type where it leaves the function
        rest = entry.rest.range_
        create = f"iter({cg.gen.const(rest)})" if cg.final else \
            f"{cg.gen.const(standins.ResumableIterator)}({cg.gen.const(rest)}, 0, None)"
    elif cg.final:
        create = f"{cg.gen.const(standins.as_builtin)}({entry.kind!r}, [{cg._items(entry.rest)}])"
    else:  # (cls: eager's type, which it keeps in the resumed trace and where it is pickled or copied)
        create = f"{cg.gen.const(standins.ResumableIterator)}([{cg._items(entry.rest)}], 0, {entry.kind!r}, " \
                 f"cls={cg.gen.const(var.cls)})"
    return cg._once(("iterator", var.oid), create, lambda name: "pass")


def _container_iterator(cg: StateCodegen, var: IteratorVariable, entry: Any) -> str:
    tx = cg.tracer
    if entry.view == "list":
        container = cg.expr(ListVariable(entry.over))
        if entry.kind == "enumerate":  # enumerate(listiterator, count): exact when it leaves the function
            if cg.final:
                return f"enumerate({cg.gen.const(standins.list_iterator)}({container}, {entry.index}), " \
                       f"{entry.start + entry.index})"
            return f"{cg.gen.const(standins.ResumableIterator)}({cg.gen.const(standins.EnumerateTail)}(" \
                   f"{container}, {entry.index}, {entry.start + entry.index}), 0, 'enumerate')"
        if cg.final:
            return f"{cg.gen.const(standins.list_iterator)}({container}, {entry.index})"
        return f"{cg.gen.const(standins.ResumableIterator)}({cg.gen.const(standins.ListTail)}({container}, " \
               f"{entry.index}))"
    container = SetVariable(entry.over) if entry.view == "set" else DictVariable(entry.over)
    size = len(tx.heap(entry.over).values if entry.view == "set" else tx.dict_entry(container).items)
    if entry.view != "set" and size == entry.size:
        made = _real_dict_iterator(cg, var, entry, container)
        if made is not None:
            return made
    if size == entry.size and not tx.same_keys(entry):
        tx.unsupported("unsupported_iteration", "an iterator over a dict or set whose keys changed (same size) "
                       "cannot be rebuilt where CPython's would stand")
    rest = tx.iterator_rest(var)
    keys = f"[{', '.join(cg._key(k) for k in entry.keys[entry.index:])}]" if entry.view in ("values", "items") \
        else None
    # the keys it began over, as the trace knows them: the live dict may not hold yet a key the trace wrote into it
    # before the loop (the write is replayed after this), which would then pass for one added during the loop
    known = f"{{{', '.join(cg._key(k) for k in entry.keys)}}}" if entry.keys and entry.view != "set" else None
    return f"{cg.gen.const(standins.ResumableIterator)}([{cg._items(rest)}], 0, None, {cg.expr(container)}, " \
           f"{entry.size}, {keys}, {entry.view!r}, {known})"


def _watched_iterator(cg: StateCodegen, entry: Any) -> str:
    """CPython's own iterator over the rebuilt deque, ``OrderedDict``, dict subclass or reversed dict
    (``IteratorEntry.watch``), advanced as far as the trace took it: it raises where eager's does when the container
    changes after the break ("deque mutated during iteration") and reads values afresh. One whose container changed
    in the trace since it was made cannot be made so: the frame runs for real."""
    tx = cg.tracer
    container, _, _, view, fn = entry.watch
    if tx.watched_changed(entry):
        tx.unsupported("unsupported_iteration", f"an iterator over a {container.python_type().__name__} that changed "
                       "while it was iterated cannot be rebuilt where CPython's would stand")
    base = cg.expr(container)
    made = f"{cg.gen.const(standins.real_iterator)}({fn}({base}{view}), {entry.index})"
    if cg.final:
        return made
    return f"{cg.gen.const(standins.ResumableIterator)}([{cg._items(entry.rest)}], 0, {entry.kind!r}, {base}, " \
           f"real={made})"


def _real_dict_iterator(cg: StateCodegen, var: IteratorVariable, entry: Any, container: DictVariable) -> str | None:
    """CPython's own iterator over the rebuilt dict, standing where eager's stands, where the rebuilt dict is eager's
    (its table too): a dict from outside whose keys the trace left as they were, or one made in the trace whose
    table (``DictLayout``) is the one its rebuild clones (compact, of 8 slots). Every ``next`` is then CPython's, so
    a key deleted and added again after the break raises as in eager. ``None``: the trace cannot say so; an
    iterator stands in for it (:class:`~stillframe.variables.standins.ResumableIterator`)."""
    tx = cg.tracer
    dict_entry = tx.dict_entry(container)
    keys = tuple(k for k, _ in dict_entry.items)
    if dict_entry.source is not None or dict_entry.live is not None:
        exact = entry.pos is None and keys == entry.keys and ("dict", container.oid) not in tx.state.side_effects
        count = entry.index
    else:
        layout = dict_entry.layout
        exact = layout is not None and entry.pos is not None and layout.log2size == 3 and \
            layout == DictLayout.built(keys, len(keys)) and entry.pos == entry.size - entry.left
        count = entry.pos
    if not exact:
        return None
    view = "" if entry.view == "keys" else f".{entry.view}()"
    made = f"{cg.gen.const(standins.real_iterator)}(iter({cg.expr(container)}{view}), {count})"
    if cg.final:
        return made
    rest = tx.iterator_rest(var)
    return f"{cg.gen.const(standins.ResumableIterator)}([{cg._items(rest)}], 0, None, {cg.expr(container)}, " \
           f"{entry.size}, real={made})"


@REBUILD.rule(LiveIteratorVariable)
def _rebuild_live_iterator(cg: StateCodegen, var: LiveIteratorVariable) -> str:
    """The live iterator itself, at the position this trace leaves it (it may have drained it), made once: a local
    and the loop's stack slot that held it still share it; it still reads the list, dict or set it is over. Where
    the function returns, one over a list is CPython's ``listiterator`` (or ``enumerate`` over one) and one made by
    ``zip`` or ``enumerate`` otherwise is of that type, over what is left (:func:`standins.as_builtin_at`)."""
    if var.real:  # the same stand-in, still over CPython's iterator; where the function returns, that iterator
        base = cg.gen.ref(var.items_source.base)
        return f"({base}._real or iter(()))" if cg.final else base
    index = live_iterator_index(cg.tracer, var)
    if cg.final:
        create = f"{cg.gen.const(standins.as_builtin_at)}({cg.gen.ref(var.items_source.base)}, {index})"
    else:  # the live one itself (a real object may hold it too), moved where the trace left it at the end
        create = cg.gen.ref(var.items_source.base)
        cg.move_live_iterator(var)
    return cg._once(("live_iter", var.obj_id), create, lambda name: "pass")


@REBUILD.rule(CellVariable)
def _rebuild_cell(cg: StateCodegen, var: CellVariable) -> str:
    return cg.cell(var.ref)


@REBUILD.rule(NestedFunctionVariable)
def _rebuild_function(cg: StateCodegen, var: NestedFunctionVariable) -> str:
    return cg._function(var)


@REBUILD.rule(PartialVariable)
def _rebuild_partial(cg: StateCodegen, var: PartialVariable) -> str:
    """Made once: every reference is the same object, as in eager."""
    arguments = [cg.expr(var.fn), *(cg.expr(v) for v in var.args), *(f"{k}={cg.expr(v)}" for k, v in var.kwargs)]
    return cg._once(("partial", id(var)), f"{cg.gen.const(functools.partial)}({', '.join(arguments)})",
                    lambda name: "pass")


@REBUILD.rule(UserMethodVariable)
def _rebuild_method(cg: StateCodegen, var: UserMethodVariable) -> str:
    if var.source is not None:
        return cg.gen.ref(var.source)  # the live bound method itself (`ref() is o` after a break)
    return cg._once(("method", id(var)), f"{cg.gen.const(types.MethodType)}({cg._callable(var.fn)}, "
                    f"{cg.expr(var.self_var)})", lambda name: "pass")


# A bound method is made once per VT: every slot that holds it holds one object, as eager's do (`m = lst.append`,
# then `weakref.ref(m)` at a break: the reference was to the stack's copy, which died at once, and `wr() is m` was
# False); one read from a live value is that value
@REBUILD.rule(TensorMethodVariable)
def _rebuild_tensor_method(cg: StateCodegen, var: TensorMethodVariable) -> str:
    if var.source is not None:
        return cg.gen.ref(var.source)
    return cg._once(("method", id(var)), f"getattr({cg.expr(var.self_var)}, {var.name!r})", lambda name: "pass")


@REBUILD.rule(ContainerMethodVariable)
def _rebuild_container_method(cg: StateCodegen, var: ContainerMethodVariable) -> str:
    if var.source is not None:
        return cg.gen.ref(var.source)
    if var.via_super is not None:  # super().update: the base's method, bound to the instance itself
        instance, method = var.via_super
        create = f"{cg.gen.const(method)}.__get__({cg.expr(instance)})"
    else:
        create = f"getattr({cg.expr(var.obj if var.owner is None else var.owner)}, {var.name!r})"
    return cg._once(("method", id(var)), create, lambda name: "pass")


@REBUILD.rule(ContextExitVariable)
def _rebuild_context_exit(cg: StateCodegen, var: ContextExitVariable) -> str:
    return f"{cg.gen.const(standins.GradModeExit)}({var.restore!r})"


@REBUILD.rule(NNModuleVariable, PythonObjectVariable, UserFunctionVariable, TorchFunctionVariable, BuiltinVariable)
def _rebuild_live(cg: StateCodegen, var: VariableTracker) -> str:
    if var.source is not None:
        return cg.gen.ref(var.source)
    value = var.module if isinstance(var, NNModuleVariable) else \
        var.value if isinstance(var, PythonObjectVariable) else var.fn
    return cg.live(value)


def _rebuild_block_exit(cg: StateCodegen, var: Any, stand_in: type, arg: Any) -> str:
    """The ``__exit__`` of an autocast or inference-mode block: the live one where the block was entered for real,
    else (closed in the graph) a ``stand_in(arg)`` that re-enters it here for real, once per VT."""
    if var.node is None:  # entered for real already: the same one
        return cg.gen.ref(var.source)
    return cg._once((stand_in.__name__, id(var)), f"{cg.gen.const(stand_in)}({arg!r})", lambda name: "pass")


REBUILD.rule(AutocastExitVariable)(lambda cg, var: _rebuild_block_exit(cg, var, standins.AutocastExit, var.args))
REBUILD.rule(InferenceModeExitVariable)(
    lambda cg, var: _rebuild_block_exit(cg, var, standins.InferenceModeExit, var.mode))


@REBUILD.rule(InferenceModeVariable)
def _rebuild_inference_mode(cg: StateCodegen, var: InferenceModeVariable) -> str:
    """``torch.inference_mode(mode)`` before it is entered holds no state: a new one is torch's own object, as eager
    has it here (a functional backend breaks the graph at entering it: ``rules/context.enter_inference_mode``)."""
    return cg._once(("inference mode", id(var)), f"{cg.gen.const(torch.inference_mode)}({var.mode!r})",
                    lambda name: "pass")


@REBUILD.rule(GradModeVariable)
def _rebuild_grad_mode(cg: StateCodegen, var: GradModeVariable) -> str:
    """``torch.no_grad()`` / ``torch.enable_grad()`` before it is entered holds no state: a new one is torch's own
    object as eager has it here (``@torch.no_grad()`` on a nested function: the decoration breaks the graph with
    the object on the stack). ``torch.set_grad_enabled(b)`` set the mode when it was made and keeps the mode to
    restore: the function runs eagerly."""
    if var.applied:
        return _cannot_rebuild(cg, var, "torch.set_grad_enabled(...) made in traced code holds the mode it restores")
    return cg._once(("grad mode", id(var)), f"{cg.gen.const(var.python_type())}()", lambda name: "pass")


# No stand-in can be both torch's own object (code run for real uses torch's __enter__/__exit__ on it, e.g.
# ExitStack.enter_context) and what the trace knows of it: the function runs eagerly.
REBUILD.refuse("an autocast context made in traced code and not entered yet cannot cross a graph break",
               AutocastVariable)

REBUILD.refuse("a super() object is only ever read from in the trace; one held across a graph break is not "
               "rebuilt (the frame runs eagerly)", SuperVariable)
REBUILD.refuse("a deleted-attribute marker is never a value of the program", _Deleted)


def _geometry(meta: TensorMeta) -> tuple:
    """``meta``'s shape, stride and storage offset."""
    return meta.shape, meta.stride, meta.storage_offset
