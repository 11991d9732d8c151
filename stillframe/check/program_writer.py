"""The program writer's bookkeeping: names, scopes and what is known of each tensor (see :mod:`.programs`).

A tensor name's :class:`Var` holds its shape in symbols (``N`` and ``1``, so a program is valid for any size),
the leaves requiring grad it depends on, whether it is a leaf, and which storage it views. A name bound
outside a conditional block keeps its metadata inside it (:meth:`WriterBase.meta_frozen`), so what the writer
knows after the block holds on every path.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import contextlib
import random
from dataclasses import dataclass, field, replace

HEADER = '''import contextlib
import io
import math
import sys
import torch

OUT = []
STATE = {}


class Box:
    pass


OBJ = Box()
OBJ.count = 0
BUF = io.StringIO()
TOTAL = 0


def bump(n):
    global TOTAL
    TOTAL += n
    return TOTAL


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a):
        self.a = a


class Counter:
    def __init__(self):
        self.n = 0
        self.items = []

    def add(self, t):
        self.n += 1
        self.items.append(t)
        return t * self.n

    @property
    def total(self):
        return self.n * 2


CNT = Counter()


class Base:
    def scale(self, t):
        OUT.append(type(self).__name__)
        return t * 2


class Child(Base):
    def scale(self, t):
        return super().scale(t) + 1


CHILD = Child()


class Recorder:
    def __init__(self, tag):
        self.tag = tag

    def __enter__(self):
        OUT.append("enter " + self.tag)
        return self

    def __exit__(self, kind, value, tb):
        OUT.append("exit " + self.tag + ("" if kind is None else " " + kind.__name__))
        return False


class Logged:
    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        OUT.append("get " + self.name)
        return obj.__dict__.get(self.name, 0)

    def __set__(self, obj, value):
        OUT.append("set " + self.name)
        obj.__dict__[self.name] = value

    def __delete__(self, obj):
        OUT.append("del " + self.name)
        obj.__dict__.pop(self.name, None)


class Holder:
    level = Logged()
    gain = Logged()

    def __init__(self, w=1):
        self._w = w

    @property
    def w(self):
        return self._w

    @w.setter
    def w(self, value):
        OUT.append("w set")
        self._w = value * 2


HOLD = Holder()


class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        ctx.save_for_backward(t)
        return t * 2

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved_tensors
        return g * 2 + t * 0


class Gain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor(1.5))
        self.bias = torch.nn.Parameter(torch.tensor(0.25))
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.register_buffer("running", torch.zeros(()))

    def forward(self, t):
        self.calls += 1
        if self.training:
            with torch.no_grad():
                self.running.mul_(0.9).add_(t.mean() * 0.1)
        return t * self.weight + self.bias


MOD = Gain()
OPT = torch.optim.SGD(MOD.parameters(), lr=0.1, momentum=0.9)


class Dirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        t.mul_(2)
        ctx.mark_dirty(t)
        return t

    @staticmethod
    def backward(ctx, g):
        return g * 2


class Scaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t, s):
        ctx.s = s
        ctx.save_for_backward(t)
        OUT.append(("Scaled", ctx.needs_input_grad))
        extra = t.detach().sum(0) + s
        ctx.mark_non_differentiable(extra)
        return t * s, extra

    @staticmethod
    def backward(ctx, g, g_extra):
        (t,) = ctx.saved_tensors
        return g * ctx.s + t * 0, None


def make_args(i):
    n = %(n0)d if i < 2 else %(n2)d
    x = torch.randn(n, n, requires_grad=%(x_rg)s)
    y = torch.randn(n, n)
    w = torch.randn(n, requires_grad=%(w_rg)s)
    k = %(ks)r[i]
    return (x, y, w, k)
'''


@dataclass
class Var:
    """What the generator knows of one tensor name."""

    shape: tuple           # symbolic dims: "N" or 1
    deps: frozenset | None  # names of the leaves requiring grad it depends on; None: unknown
    leaf: bool
    base: str | None       # the name owning the storage it views (itself when None)
    contig: bool = True
    scope: int = 0         # the block depth where it was bound
    retained: bool = False


@dataclass
class Scope:
    vars: dict = field(default_factory=dict)
    conditional: bool = False


class WriterBase:
    """Writes one program; ``self.lines`` is the function being written, helpers go to ``self.defs``.

    This base keeps names, scopes and what is known of each tensor; the statements are in
    :class:`stillframe.check.program_statements.Writer`.
    """

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.defs: list[list[str]] = []
        self.families: set[str] = set()
        self.counter = 0
        self.budget = 0
        self.nograd = False
        self.fn_depth = 0
        self.taken: set[str] = set()  # the internal-looking names bound so far (each is bound once)

    # ------------------------------------------------------------ the whole program

    def program(self, seed: int, index: int) -> tuple[str, frozenset]:
        r = self.rng
        n0 = r.choice([2, 3, 4])
        dynamic = r.random() < 0.25
        x_rg, w_rg = r.random() < 0.7, r.random() < 0.6
        ks = tuple(r.choice([1, 2, 3]) for _ in range(3)) if r.random() < 0.7 else (2, 2, 2)
        self.scopes = [Scope()]
        self.lines: list[str] = []
        self.indent = 1
        leaves = {"x": x_rg, "w": w_rg}
        for name, shape in (("x", ("N", "N")), ("y", ("N", "N")), ("w", ("N",))):
            self.bind(name, Var(shape, frozenset({name}) if leaves.get(name) else frozenset(), True, None))
        if x_rg or w_rg:
            self.families.add("requires_grad")
        self.budget = r.randint(6, 16)
        self.block(top=True)
        self.emit(self.return_stmt())
        main = ["def f(x, y, w, k):", *self.lines]
        header = HEADER % {"n0": n0, "n2": n0 + 1 if dynamic else n0, "x_rg": x_rg, "w_rg": w_rg, "ks": ks}
        parts = [f"# stillframe fuzz program {seed}:{index}", f"# families: {' '.join(sorted(self.families))}",
                 header]
        parts += ["\n".join(d) + "\n" for d in self.defs]
        parts.append("\n".join(main) + "\n")
        return "\n\n".join(parts), frozenset(self.families)

    # ------------------------------------------------------------ names and scopes

    def fresh(self, prefix="t") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, line: str):
        self.lines.append("    " * self.indent + line)

    def bind(self, name: str, var: Var):
        var.scope = len(self.scopes) - 1
        self.scopes[-1].vars[name] = var

    def visible(self) -> dict:
        out: dict = {}
        for scope in self.scopes:
            out.update(scope.vars)
        return out

    def lookup(self, name: str) -> Var:
        for scope in reversed(self.scopes):
            if name in scope.vars:
                return scope.vars[name]
        raise KeyError(name)

    def update(self, name: str, **changes):
        for scope in reversed(self.scopes):
            if name in scope.vars:
                scope.vars[name] = replace(scope.vars[name], **changes)
                return

    def meta_frozen(self, name: str) -> bool:
        """Whether ``name``'s metadata must not change here: it was bound outside a conditional block."""
        var = self.lookup(name)
        return any(s.conditional for s in self.scopes[var.scope + 1:])

    @contextlib.contextmanager
    def nested(self, conditional: bool):
        self.scopes.append(Scope(conditional=conditional))
        self.indent += 1
        start = len(self.lines)
        try:
            yield
        finally:
            if len(self.lines) == start:
                self.emit("pass")
            self.indent -= 1
            self.scopes.pop()

    def pick(self, pred=lambda name, v: True):
        names = [n for n, v in self.visible().items() if pred(n, v)]
        return self.rng.choice(names) if names else None

    # ------------------------------------------------------------ tensor facts

    def grad_leaves(self, var: Var) -> list[str]:
        visible = self.visible()
        return sorted(d for d in (var.deps or ()) if d in visible and visible[d].leaf and visible[d].deps)

    def can_write(self, name: str, other: Var | None = None) -> bool:
        """Whether an in-place write of ``other`` into ``name`` is valid and keeps what we know exact."""
        var = self.lookup(name)
        if var.deps is None:
            return False
        owner = self.lookup(var.base) if var.base is not None and var.base in self.visible() else None
        if var.base is not None and owner is None:
            return False
        if not self.nograd:
            if var.leaf and var.deps:
                return False
            if owner is not None and owner.leaf and owner.deps:
                return False
        new_deps = (other.deps or frozenset()) if other is not None and not self.nograd else frozenset()
        if other is not None and other.deps is None:
            return False
        if new_deps - var.deps and (self.meta_frozen(name) or (var.base and self.meta_frozen(var.base))):
            return False
        return True

    def after_write(self, name: str, other: Var | None):
        if other is None or self.nograd or not other.deps:
            return
        var = self.lookup(name)
        owner = var.base or name
        self.update(name, deps=var.deps | other.deps, leaf=False)
        if var.base is not None:
            base = self.lookup(var.base)
            self.update(var.base, deps=(base.deps or frozenset()) | other.deps, leaf=False)
        for n, v in self.visible().items():
            if n != name and n != owner and (v.base == owner):
                self.update(n, deps=None)

    def broadcast(self, a: tuple, b: tuple):
        out = []
        for i in range(1, max(len(a), len(b)) + 1):
            da = a[-i] if i <= len(a) else 1
            db = b[-i] if i <= len(b) else 1
            if da != db and 1 not in (da, db):
                return None
            out.append(db if da == 1 else da)
        return tuple(reversed(out))

    def deps_of(self, *vars_: Var):
        if self.nograd:
            return frozenset()
        if any(v.deps is None for v in vars_):
            return None
        return frozenset().union(*(v.deps for v in vars_))

    # ------------------------------------------------------------ blocks and statements

    def block(self, top: bool = False, size: int | None = None):
        count = size if size is not None else self.rng.randint(1, 3)
        for _ in range(count):
            if self.budget <= 0 and not top:
                break
            self.budget -= 1
            self.statement()
        while top and self.budget > 0:
            self.budget -= 1
            self.statement()

    def statement(self):
        r = self.rng
        depth_ok = len(self.scopes) < 4
        kinds = [
            (self.s_compute, 10), (self.s_view, 5), (self.s_inplace, 8), (self.s_metadata, 3),
            (self.s_setitem, 4), (self.s_backward, 4), (self.s_autograd_grad, 2), (self.s_retain_grad, 2),
            (self.s_grad_read, 2), (self.s_side_effect, 6), (self.s_print, 3), (self.s_graph_break, 3),
            (self.s_requires_grad, 1),
        ]
        if depth_ok:
            kinds += [(self.s_item_branch, 3), (self.s_branch, 2), (self.s_loop, 3), (self.s_while, 1),
                      (self.s_try, 3), (self.s_no_grad, 2), (self.s_call, 3 if self.fn_depth < 2 else 0),
                      (self.s_generator, 3 if self.fn_depth < 2 else 0), (self.s_closure, 1),
                      (self.s_chain, 1), (self.s_context, 2), (self.s_gen_protocol, 2 if self.fn_depth < 2 else 0),
                      (self.s_data_dependent, 1), (self.s_except_break, 1), (self.s_exception_object, 1),
                      (self.s_mutate_iter, 1), (self.s_iter_builtin, 1)]
            kinds += [(self.s_grad_mode, 2)]
        kinds += [(self.s_advanced_setitem, 3), (self.s_storage_metadata, 1), (self.s_hook, 2), (self.s_version, 1),
                  (self.s_module, 2), (self.s_optimizer, 1), (self.s_dropout, 1), (self.s_function_variant, 1)]
        kinds += [(self.s_object, 3), (self.s_rng, 1), (self.s_global, 1), (self.s_container, 2),
                  (self.s_function, 1), (self.s_internal_name, 1), (self.s_locals, 1), (self.s_descriptor, 1)]
        if len(self.scopes) == 1:
            kinds.append((self.s_raise, 3))
        funcs, weights = zip(*kinds)
        for _ in range(4):
            if r.choices(funcs, weights)[0]() is not False:
                return
        self.s_compute()

    def new_tensor(self, expr: str, shape: tuple, deps, *, base=None, contig=True, leaf=None, name=None) -> str:
        name = name or self.fresh()
        self.emit(f"{name} = {expr}")
        self.bind(name, Var(shape, deps, bool(leaf) if leaf is not None else not deps, base, contig))
        return name

    def breaker(self) -> str:
        """A statement that breaks the graph: an explicit break, a tensor's value read in Python, or a print."""
        t = self.pick()
        line = self.rng.choice(["torch._dynamo.graph_break()", "OUT.append({t}.sum().item() > 0)",
                                "print('at', k, len(OUT), file=BUF)", "OUT.append(int(({t} > 0).sum()))"])
        if "graph_break" in line:
            self.families.add("graph_break")
        return line.format(t=t)

    def operand(self, shape: tuple | None = None):
        """A visible tensor name broadcastable to ``shape`` (``None``: any), or a Python scalar expression."""
        if self.rng.random() < 0.25:
            return self.rng.choice(["0.5", "2.0", "k", "1.5", "-1.0", "float(k) / 4"]), None
        name = self.pick(lambda n, v: shape is None or self.broadcast(shape, v.shape) == shape)
        if name is None:
            return "0.25", None
        return name, self.lookup(name)
