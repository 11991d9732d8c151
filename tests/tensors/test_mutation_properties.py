"""Property-based parity tests of mutation-safe tracing (DESIGN invariants 1, 4, 5 and 7).

Hypothesis builds random straight-line programs of out-of-place, view,
in-place and ``__setitem__`` operations (some inside ``with torch.no_grad():``)
over 2-3 small float tensors -- some requiring grad, some non-leaf, some views
of another argument or the same object twice -- compiles each with
``stillframe.compile`` and compares it with eager PyTorch through
:func:`stillframe.check.compare`: values, dtype, shape, stride,
``requires_grad``, ``is_leaf``, ``grad_fn`` presence, aliasing and identity of
outputs, input mutations (data and metadata), gradients, or the identical
exception (type and message). Programs also return *probes*: tuples of
``requires_grad``, ``is_leaf``, ``shape``, ``stride()`` read in the middle of
the program, so metadata the trace computes (not only what the graph returns)
is checked.

Each program is called twice on fresh inputs with the same metadata: the
second call must not recompile (``stillframe.counters["recompiles"]``), so the
guards came from the entry snapshot, not from tensors the trace mutated
(invariant 5). Any ``StillframeWarning`` (eager fallback) fails the example;
so does a graph break (read from the ``stillframe.breaks`` log channel) in a
program that returns normally, unless it is one stillframe takes by design
(``EXPECTED_BREAKS``, ``EXPECTED_BREAKS_AOT``); and grad mode must be enabled after every call, as
eager leaves it.

How a program is built: :func:`programs` keeps the source lines so far and
*simulates* them eagerly (the function, ending in ``return locals()``, runs on
inputs from the same ``make_args``) to learn the shape of every live variable,
so it can pick operands that mostly fit (now and then it picks any operand, for
shape errors). A step that raises in the simulation is either kept as the last
step (the program then tests the exception) or dropped, as hypothesis decides.
The simulation only steers generation; the oracle is ``compare``'s own eager
run. The source is compiled under a file name registered in :mod:`linecache`, so
stillframe's diagnostics and tracebacks can show its lines; a failing example
prints the program, its inputs and the full parity report.

Families excluded until a stillframe bug is fixed are marked ``# excluded
until ...`` below (each has a short reproduction next to it).
"""

from __future__ import annotations

import contextlib
import hashlib
import linecache
import logging
import re
from dataclasses import dataclass, field

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stillframe
from stillframe.check import compare

EAGER_EXAMPLES = 600
AOT_EAGER_EXAMPLES = 150
MAX_STEPS = 9
ARG_NAMES = ("a", "b", "c")
SHAPES = ((3, 4), (4, 4))

SETTINGS = dict(
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=False,
    suppress_health_check=list(HealthCheck),
)


# ---------------------------------------------------------------- inputs


@dataclass(frozen=True)
class ArgSpec:
    """How one argument is made: ``leaf`` (randn, maybe requiring grad), ``nonleaf`` (``randn(rg=True) * 1``),
    ``view`` (a view expression of argument 0, e.g. ``{}[1:]``) or ``same`` (argument 0 itself)."""

    kind: str
    shape: tuple[int, ...] = (3, 4)
    requires_grad: bool = False
    view: str = ""

    def describe(self, first: str) -> str:
        if self.kind == "leaf":
            return f"torch.randn{self.shape}" + (".requires_grad_()" if self.requires_grad else "")
        if self.kind == "nonleaf":
            return f"torch.randn{self.shape}.requires_grad_() * 1"
        if self.kind == "view":
            return self.view.format(first)
        return first


VIEW_ARGS = ("{}[1:]", "{}.t()", "{}[:, ::2]", "{}.detach()", "{}[0]", "{}.unsqueeze(0)")


def make_args_for(specs: tuple[ArgSpec, ...]):
    """``make_args`` for ``compare``: fresh tensors on every call (views are made of the fresh argument 0)."""

    def make_args():
        out: list[torch.Tensor] = []
        for spec in specs:
            if spec.kind == "leaf":
                out.append(torch.randn(spec.shape, requires_grad=spec.requires_grad))
            elif spec.kind == "nonleaf":
                out.append(torch.randn(spec.shape, requires_grad=True) * 1)
            elif spec.kind == "view":
                out.append(eval(spec.view.format("base"), {"base": out[0]}))  # noqa: S307 (our own template)
            else:
                out.append(out[0])
        return tuple(out)

    return make_args


@st.composite
def arg_specs(draw, profile: "Profile") -> tuple[ArgSpec, ...]:
    shape = draw(st.sampled_from(SHAPES))
    first = draw(st.sampled_from(["leaf", "leaf", "nonleaf"]))
    specs = [ArgSpec(first, shape, first == "nonleaf" or draw(st.booleans()))]
    for _ in range(draw(st.integers(1, 2))):
        kinds = ["leaf", "leaf", "leaf", "view", "view", "nonleaf", "same"]
        kind = draw(st.sampled_from(kinds if profile.aliased_arguments else ["leaf", "leaf", "nonleaf"]))
        if kind == "leaf":
            specs.append(ArgSpec("leaf", draw(st.sampled_from(SHAPES + (shape,))), draw(st.booleans())))
        elif kind == "view":
            views = [v for v in VIEW_ARGS if v not in profile.excluded]
            specs.append(ArgSpec("view", view=draw(st.sampled_from(views))))
        else:
            specs.append(ArgSpec(kind, shape, kind == "nonleaf"))
    return tuple(specs)


# ---------------------------------------------------------------- programs


@dataclass
class Program:
    specs: tuple[ArgSpec, ...]
    body: list[str] = field(default_factory=list)
    ret: str = "return None"

    @property
    def names(self) -> tuple[str, ...]:
        return ARG_NAMES[: len(self.specs)]

    def source(self, body: list[str] | None = None, ret: str | None = None) -> str:
        lines = [f"def prog({', '.join(self.names)}):"]
        lines += ["    " + line for line in (self.body if body is None else body)]
        lines.append("    " + (self.ret if ret is None else ret))
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        args = ", ".join(f"{n} = {s.describe(self.names[0])}" for n, s in zip(self.names, self.specs))
        return f"# inputs: {args}\n{self.source()}"


def load(src: str, tag: str):
    """``exec`` ``src`` (defining ``prog``) under a file name that linecache knows; return ``prog``."""
    filename = f"/tmp/stillframe_mutation_{tag}_{hashlib.sha1(src.encode()).hexdigest()[:12]}.py"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    namespace = {"torch": torch}
    exec(compile(src, filename, "exec"), namespace)  # noqa: S102 (the program under test)
    return namespace["prog"]


def simulate(program: Program, body: list[str], backward: bool = False):
    """Run ``body`` eagerly on fresh inputs: ``(locals, args)``, or the exception it raised.

    A run that leaves a tensor whose autograd metadata cannot even be read (eager raises on ``.is_leaf`` of
    a multi-output view whose base was modified in place, for instance) returns :class:`Unusable`: the
    checker reads that metadata on every input and output, so such a step is never kept. ``backward``: so does
    a run where backpropagating from every live tensor that requires grad raises.
    """
    fn = load(program.source(body, "return locals()"), "sim")
    torch.manual_seed(0)
    torch.set_grad_enabled(True)
    args = make_args_for(program.specs)()
    try:
        env = fn(*args)
    except Exception as e:  # noqa: BLE001 (the program's exception is data)
        return e
    finally:
        torch.set_grad_enabled(True)
    try:
        for t in [*args, *env.values()]:
            if isinstance(t, torch.Tensor):
                (t.requires_grad, t.is_leaf, t.grad_fn)
    except RuntimeError as e:
        return Unusable(e)
    if backward:
        outs = [t for t in env.values() if isinstance(t, torch.Tensor) and t.requires_grad]
        try:
            if outs:
                sum(t.float().sum() for t in outs).backward()
        except RuntimeError as e:
            return Unusable(e)
        fn, args = load(program.source(body, "return locals()"), "sim"), make_args_for(program.specs)()
        env = fn(*args)  # a fresh run for the pool (backward has used up this one's graph)
    return env, args


class Unusable(Exception):
    """A simulated prefix that must never be kept, not even as a program that raises (see :func:`simulate`)."""


@dataclass(frozen=True)
class Info:
    """What the generator knows of one live tensor: a meta stand-in (shape, stride, dtype), its storage, whether
    it requires grad and whether it shares storage with an argument."""

    meta: torch.Tensor
    storage: int
    requires_grad: bool
    argument_storage: bool


class Pool:
    """The tensors (by name) alive after the simulated prefix, with helpers to pick operands."""

    def __init__(self, env: dict, args: tuple):
        arg_storages = {t.untyped_storage().data_ptr() for t in args}
        self.info = {}
        for name, t in env.items():
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage().data_ptr()
                self.info[name] = Info(torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta"),
                                       storage, t.requires_grad, storage in arg_storages)
        self.names = sorted(self.info)

    def pick(self, draw, fits=lambda t: True, allowed=lambda name: True):
        """A name whose tensor ``fits``; now and then any allowed name at all (an operand that may not fit).

        ``allowed(name)`` is a hard filter (an excluded family), which even the wild pick obeys.
        """
        names = [n for n in self.names if allowed(n)]
        if names and draw(st.integers(0, 24)) == 0:
            return draw(st.sampled_from(names))
        candidates = [n for n in names if fits(self.info[n].meta)]
        return draw(st.sampled_from(candidates)) if candidates else None


def _broadcasts(x, y) -> bool:
    try:
        torch.broadcast_shapes(x.shape, y.shape)
        return True
    except RuntimeError:
        return False


def _broadcasts_into(x, y) -> bool:
    try:
        return torch.broadcast_shapes(x.shape, y.shape) == x.shape
    except RuntimeError:
        return False


def _min_dim(k):
    return lambda t: t.dim() >= k


# Out-of-place templates: (template, relation of y to x). {x}, {y} are operands; {dims} is x's sizes.
RELATIONS = {
    "bc": _broadcasts,
    "into": _broadcasts_into,
    "same": lambda x, y: x.shape == y.shape,
    "rows": lambda x, y: x.dim() >= 1 and y.dim() >= 1 and len(y) >= 2 and _broadcasts_into(x[0], y[0]),
    "cat": lambda x, y: x.dim() >= 1 and x.shape[1:] == y.shape[1:],
    "mm": lambda x, y: x.dim() == 2 and y.dim() == 2 and x.shape[1] == y.shape[1],
}
OUT_OF_PLACE = [
    ("{x} + {y}", "bc"), ("{x} - {y}", "bc"), ("{x} * {y}", "bc"), ("{x} * 2", None), ("{x} / 3", None),
    ("2 - {x}", None), ("torch.relu({x})", None), ("{x}.sigmoid()", None), ("{x}.exp()", None),
    ("torch.tanh({x})", None), ("{x}.sum(0, keepdim=True)", None), ("{x}.sum()", None), ("{x}.mean(-1)", None),
    ("{x}.clone()", None), ("{x}.contiguous()", None), ("torch.where({x} > 0, {x}, {y})", "bc"),
    ("torch.cat([{x}, {y}])", "cat"), ("{x}.double()", None), ("torch.zeros({dims})", None),
    ("torch.ones_like({x})", None), ("torch.zeros_like({x})", None), ("{x} @ {y}.t()", "mm"),
]
# View templates: (template, minimum dim of x).
VIEWS = [
    ("{x}[1:]", 1), ("{x}[0]", 1), ("{x}[:, ::2]", 2), ("{x}.t()", 0), ("{x}.view(-1)", 0),
    ("{x}.reshape(-1)", 0), ("{x}.unsqueeze(0)", 0), ("{x}.transpose(0, 1)", 2), ("{x}.detach()", 0),
    ("{x}.squeeze()", 0), ("{x}.expand(2, {dims})", 0), ("{x}.narrow(0, 1, 2)", 1), ("{x}.diagonal()", 2),
    ("{x}.unbind(0)[0]", 1), ("{x}.split(2)[0]", 1), ("{x}.view_as({x})", 0), ("{x}.chunk(2, -1)[1]", 1),
    ("{x}.select(-1, 0)", 1), ("{x}.flatten()", 0), ("{x}.movedim(0, -1)", 1), ("{x}[None]", 0),
    ("{x}[..., 1]", 1),
]
# In-place templates: (template, relation of y to x, precondition on x).
IN_PLACE = [
    ("{x}.add_({y})", "into", None), ("{x}.sub_({y}, alpha=2)", "into", None), ("{x}.mul_(2)", None, None),
    ("{x}.relu_()", None, None), ("{x}.clamp_(min=0)", None, None), ("{x}.zero_()", None, None),
    ("{x}.fill_(1.5)", None, None), ("{x}.copy_({y})", "into", None), ("{x}.t_()", None, lambda t: t.dim() <= 2),
    ("{x}.unsqueeze_(0)", None, None), ("{x}.squeeze_()", None, None), ("{x}.transpose_(0, 1)", None, _min_dim(2)),
    ("{x}.masked_fill_({x} > 0, 0.0)", None, None), ("{x}.requires_grad_()", None, None),
    ("{x}.requires_grad_(False)", None, None), ("{x}.detach_()", None, None), ("{x} += {y}", "into", None),
    ("{x} *= 0.5", None, None), ("{x}.sigmoid_()", None, None), ("{x}.exp_()", None, None),
    ("{x}.addcmul_({y}, {y})", "into", None), ("{x}.neg_()", None, None), ("{x}.div_(2)", None, None),
]
# Setitem templates: (template, relation of y to x, precondition on x).
SETITEM = [
    ("{x}[0] = {y}[0]", "rows", None), ("{x}[:, 1] = 3.0", None, _min_dim(2)),
    ("{x}[::2] = {y}[::2]", "same", None),
    ("{x}[torch.tensor([2, 0])] = {y}[:2]", "rows", lambda t: t.dim() >= 1 and len(t) >= 3),
    ("{x}[{x} > 0] = 0.0", None, None), ("{x}[None, 0] = {y}[0]", "rows", None),
    ("{x}[..., 0] = {y}[..., 1]", "same", None), ("{x}[1] = 2.0", None, lambda t: t.dim() >= 1 and len(t) > 1),
    ("{x}[:] = {y}", "into", None), ("{x}[1:, :2] = {y}[:-1, 1:3]", "same", None),
    ("{x}[0, 0] = {y}.sum()", None, _min_dim(2)),
]
FAMILIES = ["new", "new", "view", "view", "inplace", "inplace", "inplace", "setitem", "setitem", "probe", "skew"]
# Targets a template is never applied to, even by a wild pick: template -> predicate on x.
EXCLUDED_TARGETS = {
    # excluded until this is fixed: a boolean-mask setitem on a 0-d tensor breaks the graph ("data_dependent:
    # setitem depends on tensor data (DataDependentOutputException)"); on 1-d and larger tensors it is captured,
    # and torch.compile captures this one in a single graph too. Repro:
    #     def prog(a):                     # a = torch.randn(())
    #         a[a > 0] = 0.0
    #         return a
    # values match; stillframe.counters after two calls: graph_breaks 2, traces 2 (expected: one of each).
    "{x}[{x} > 0] = 0.0": lambda t: t.dim() == 0,
}


def _fill(draw, pool: Pool, template: str, relation=None, precondition=None, *, write=False,
          profile: "Profile | None" = None) -> str | None:
    """``template`` with operands from ``pool``: x satisfying ``precondition``, y in ``relation`` to x.

    ``write``: the template writes to x (in place or setitem), which the rules below may restrict.
    """
    excluded = EXCLUDED_TARGETS.get(template)
    x_rules = [] if excluded is None else [lambda info: not excluded(info.meta)]
    y_rules = []
    if write and profile and profile.separate_storage:
        y_rules.append(lambda info, x: info.storage != x.storage)
    if write and profile and profile.grad_free_argument_writes:
        x_rules.append(lambda info: not (info.argument_storage and info.requires_grad))
        y_rules.append(lambda info, x: not (x.argument_storage and info.requires_grad))
    x = pool.pick(draw, precondition or (lambda t: True), lambda n: all(r(pool.info[n]) for r in x_rules))
    if x is None:
        return None
    values = {"x": x, "dims": ", ".join(str(s) for s in pool.info[x].meta.shape)}
    if "{y}" in template:
        x_info = pool.info[x]
        related = RELATIONS[relation] if relation else (lambda a, b: True)
        y = pool.pick(draw, lambda t: related(x_info.meta, t),
                      lambda n: all(r(pool.info[n], x_info) for r in y_rules))
        if y is None:
            return None
        values["y"] = y
    return template.format(**values)


@dataclass(frozen=True)
class Profile:
    """Which programs a test draws.

    ``raising``: keep steps that raise (the program then ends with eager's exception). ``no_grad_blocks``: emit
    ``with torch.no_grad():`` blocks. ``excluded``: templates (of any family, argument views included) never
    used. ``separate_storage``: the second operand of a write never shares the target's storage.
    ``aliased_arguments``: arguments may be views of argument 0, or argument 0 itself.
    ``grad_free_argument_writes``: a write to (the storage of) an argument involves no tensor that requires grad.
    ``backward_must_succeed``: backpropagating from the live tensors after each step works in eager.
    """

    raising: bool = True
    aliased_arguments: bool = True
    no_grad_blocks: bool = True
    excluded: frozenset = frozenset()
    separate_storage: bool = False
    grad_free_argument_writes: bool = False
    backward_must_succeed: bool = False


EAGER = Profile()
# aot_eager runs the graph through AOTAutograd, which functionalizes it; where that departs from eager for
# torch.compile(backend="aot_eager") too, the programs are left out (a limitation of the backend, not of
# stillframe's capture; each was checked against torch.compile):
#   * errors eager raises from a kernel at run time (writes to overlapping memory, index_put value checks)
#     do not happen once in-place ops are functionalized: only programs that return normally;
#   * a write whose source overlaps its target (b[1:, :2] = b[:-1, 1:3]) computes other values;
#   * `with torch.no_grad(): a.add_(b)` on a leaf that requires grad gives a a gradient;
#   * an input mutated while another input is a non-differentiable alias of it (b = a.detach(), or a
#     .detach() taken inside the program): "aot_autograd() does not yet handle non-differentiable view input
#     mutations";
#   * outputs of multi-output views (unbind, split, chunk) come back as copies, not aliases of the input;
#   * x.contiguous() of a contiguous x is x itself in eager, a new tensor from the compiled graph;
#   * x.masked_fill_(m, v) of a transposed x: the graph's output is contiguous, eager keeps x's strides;
#   * in-place metadata ops (t_, transpose_, squeeze_, unsqueeze_) on a tensor with live views: a view taken
#     before `c.transpose_(0, 1)` comes back with the transposed strides, or AOTAutograd asserts
#     ("outs_to_grad length (1) != tangents length");
#   * writes through an expanded view (a.expand(2, 4, 4).zero_()): "more than one element of the written-to
#     tensor refers to a single memory location" while AOTAutograd traces;
#   * AOTAutograd traces the backward when it compiles, so a program whose backward raises in eager (a value
#     saved for backward, like sigmoid's output, modified in place afterwards) fails to compile; only programs
#     whose live tensors can all be backpropagated;
#   * a write to an argument that requires grad, or of a value that requires grad into an argument: "one of the
#     variables needed for gradient computation has been modified by an inplace operation" while AOTAutograd
#     traces, gradients for arguments the outputs do not depend on, backward errors;
#   * a write to one of two arguments that alias each other, where the graph reads both: wrong strides and
#     values of views taken afterwards, "incorrect out shape after application of ViewMeta sequence", or lost
#     requires_grad. stillframe also passes the backend arguments the graph never reads (see below), so the
#     arguments of these programs never alias.
# And the families that fail only under stillframe:
AOT_EAGER = Profile(
    raising=False,
    aliased_arguments=False,
    grad_free_argument_writes=True,
    backward_must_succeed=True,
    no_grad_blocks=False,
    separate_storage=True,
    excluded=frozenset({
        "{}.detach()", "{x}.detach()", "{x}.unbind(0)[0]", "{x}.split(2)[0]", "{x}.chunk(2, -1)[1]",
        "{x}.contiguous()", "{x}.masked_fill_({x} > 0, 0.0)", "{x}.expand(2, {dims})",
        "{x}.t_()", "{x}.transpose_(0, 1)", "{x}.squeeze_()", "{x}.unsqueeze_(0)",
        # excluded until this is fixed: with backend="aot_eager", requires_grad_() / detach_() on an argument
        # the graph has already read or written are dropped (eager backend: correct). Repros:
        #     def prog(a):                 # a = torch.randn(4, 4)
        #         a.mul_(2)
        #         a.requires_grad_()
        #         return a                 # eager: a.requires_grad True; stillframe: False
        #     def prog(a):                 # a = torch.randn(4, 4, requires_grad=True) * 1
        #         a.mul_(2)
        #         a.detach_()
        #         return a                 # eager: a is a leaf that does not require grad; stillframe: not
        #     def prog(a, c):              # a = torch.randn(4, 4, requires_grad=True) * 1; c = a.unsqueeze(0)
        #         c[0] = a[0]
        #         a.detach_()
        #         return a                 # stillframe: internal error "Can't detach views in-place", fallback
        # torch.compile(backend="aot_eager") gets all three right.
        "{x}.requires_grad_()", "{x}.requires_grad_(False)", "{x}.detach_()",
    }),
)
# excluded until this is fixed (with the AOTAutograd limitation on aliased arguments above): an argument the
# graph never reads, only its metadata, still becomes a placeholder handed to the backend (torch.compile
# leaves it out), which exposes AOTAutograd's aliased-input handling. Repro, backend="aot_eager":
#     def prog(a, b):                      # a = torch.randn(4, 4); b = a.t()
#         b[:, 1] = 3.0
#         return b.transpose(0, 1), a.shape
# eager: result[0] has strides (4, 1); stillframe: (1, 4) and other values; torch.compile: as eager.
# excluded until this is fixed (and, with it, the no_grad blocks of AOT_EAGER): with backend="aot_eager", an
# in-place metadata op under no_grad on a leaf argument that requires grad raises. Repro:
#     def prog(a):                         # a = torch.randn(4, 4, requires_grad=True)
#         with torch.no_grad():
#             a.t_()
#         return a
# eager returns a transposed; stillframe raises "a leaf Variable that requires grad is being used in an in-place
# operation." (torch.compile(backend="aot_eager") returns a transposed).


@st.composite
def step(draw, pool: Pool, fresh: str, profile: Profile) -> str | None:
    """One statement (maybe several lines) over the tensors of ``pool``, binding new names from ``fresh``."""
    family = draw(st.sampled_from(FAMILIES))
    target = fresh
    if family in ("new", "view") and draw(st.integers(0, 6)) == 0:
        target = draw(st.sampled_from(pool.names))  # rebind an existing name (an argument, sometimes)

    def templates(table):
        return [t for t in table if t[0] not in profile.excluded]

    if family == "new":
        template, relation = draw(st.sampled_from(templates(OUT_OF_PLACE)))
        expr = _fill(draw, pool, template, relation)
        return f"{target} = {expr}" if expr else None
    if family == "view":
        template, minimum_dim = draw(st.sampled_from(templates(VIEWS)))
        expr = _fill(draw, pool, template, None, _min_dim(minimum_dim))
        return f"{target} = {expr}" if expr else None
    if family in ("inplace", "setitem"):
        template, relation, precondition = draw(st.sampled_from(templates(IN_PLACE if family == "inplace"
                                                                          else SETITEM)))
        return _fill(draw, pool, template, relation, precondition, write=True, profile=profile)
    if family == "probe":
        x = pool.pick(draw)
        return f"{fresh} = ({x}.requires_grad, {x}.is_leaf, {x}.shape, {x}.stride(), {x}.is_contiguous())"
    # skew: the sliced assignment of seeds/001, m[:, rows, cols] = vec on a fresh zeros tensor.
    vec = pool.pick(draw, lambda t: t.dim() >= 1 and t.shape[-1] >= 6)
    if vec is None:
        return None
    lead = draw(st.sampled_from(["", "1, ", "2, "]))
    n = draw(st.sampled_from([4, 5]))  # 4: six pairs, as many as vec[..., :6]; 5: ten (a shape error)
    return (f"{target} = torch.zeros({lead}{n}, {n})\n"
            f"r{fresh}, c{fresh} = torch.triu_indices({n}, {n}, 1)\n"
            f"{target}[{':, ' if lead else ''}r{fresh}, c{fresh}] = {vec}[..., :6]")


def _views_read(program: Program) -> bool:
    """Whether every argument that is a view has been read by the program so far.

    excluded until this is fixed: an argument that is a view, read for the first time inside a
    `with torch.no_grad():` block, is recorded as a view created under no_grad, so a later in-place op on it with
    grad enabled is predicted to raise ("A view was created in no_grad mode and is being modified inplace with
    grad mode enabled"), and the trace breaks the graph there (eager raises nothing; the real step then runs
    fine, so only the counters show it). Repro:
        def prog(a, c):                  # a = torch.randn(3, 4, requires_grad=True) * 1; c = a[1:]
            with torch.no_grad():
                t = c * 2
            c.mul_(2)
            return a
    stillframe.counters after two calls: graph_breaks 2, traces 2 (expected: one graph, one trace). So a block
    is emitted only once every view argument has been read outside one.
    """
    text = "\n".join(program.body)
    return all(re.search(rf"\b{name}\b", text) for name, spec in zip(program.names, program.specs)
               if spec.kind == "view")


@st.composite
def programs(draw, profile: Profile = EAGER) -> Program:
    """A random program of up to MAX_STEPS statements (see the module docstring)."""
    program = Program(draw(arg_specs(profile)))
    state = simulate(program, [])
    assert not isinstance(state, Exception), state
    counter = 0
    wanted = draw(st.integers(1, MAX_STEPS))
    for _ in range(2 * wanted):  # attempts: a step that does not fit is dropped
        if len(program.body) >= wanted:
            break
        pool = Pool(*state)
        in_block = profile.no_grad_blocks and _views_read(program) and draw(st.integers(0, 7)) == 0
        lines: list[str] = []
        for _ in range(draw(st.integers(1, 2)) if in_block else 1):
            statement = draw(step(pool, f"t{counter}", profile))
            counter += 1
            if statement:
                lines.extend(statement.split("\n"))
        if not lines:
            continue
        if in_block:
            lines = ["with torch.no_grad():"] + ["    " + line for line in lines]
        got = simulate(program, program.body + lines, profile.backward_must_succeed)
        if isinstance(got, Exception):
            # excluded until this is fixed: an error that fake tensors do not predict (a write to a tensor with
            # internal overlap, or from a partially overlapping one), raised by the compiled graph between its
            # set_grad_enabled(False) and set_grad_enabled(True) nodes, leaves grad mode disabled after the call
            # (eager's `with` restores it). Repro (both raise "unsupported operation: more than one element of
            # the written-to tensor refers to a single memory location..."; afterwards torch.is_grad_enabled()
            # is False after the compiled call only):
            #     def prog(x):                 # x = torch.randn(4)
            #         with torch.no_grad():
            #             x.expand(2, 4).mul_(2)
            #         return x
            # So a step inside a block that raises is always dropped.
            keep = (profile.raising and not in_block and not isinstance(got, Unusable)
                    and draw(st.integers(0, 3)) == 0)
            if keep:  # the program ends by raising
                program.body += lines
                break
            continue
        program.body += lines
        state = got
    # Return one to three of the tensors and probes alive at the end (arguments included, maybe one twice).
    live = sorted(k for k, v in state[0].items() if isinstance(v, (torch.Tensor, tuple)))
    picked = draw(st.lists(st.sampled_from(live), min_size=1, max_size=3))
    if len(picked) == 1 and draw(st.booleans()):
        program.ret = f"return {picked[0]}"
    else:
        program.ret = f"return ({', '.join(picked)},)"
    return program


# ---------------------------------------------------------------- the property


# Graph breaks stillframe takes by design (torch.compile breaks there too), by the kind its breaks log names.
# Any other break in a program that returns normally fails the example: these programs are straight-line
# tensor code and must be captured whole.
EXPECTED_BREAKS = {
    "autograd_leaf",  # requires_grad_() on a tensor made inside the compiled region
}
# On AOTAutograd's backends only: a tensor saved for backward, then written in place (eager's backward raises;
# a functional graph would save the value from before the write, where torch.compile diverges): the saving
# call runs for real (tensors/saved.py). The eager backend's graph runs the real ops and needs no break.
EXPECTED_BREAKS_AOT = EXPECTED_BREAKS | {"saved_for_backward"}


class _BreakLog(logging.Handler):
    """Collects the kinds of the graph breaks stillframe logs on its ``stillframe.breaks`` channel."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.breaks: list[str] = []

    def emit(self, record):
        self.breaks.append(record.getMessage())

    def unexpected(self, backend: str) -> list[str]:
        expected = EXPECTED_BREAKS if backend == "eager" else EXPECTED_BREAKS_AOT
        found = []
        for text in self.breaks:
            match = re.match(r"graph break in \S+: (\w+):", text)
            if match is None or match.group(1) not in expected:
                found.append(text)
        return found


@contextlib.contextmanager
def _recording_breaks():
    logger = logging.getLogger("stillframe.breaks")
    handler, level = _BreakLog(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def check_program(program: Program, backend: str) -> None:
    stillframe.reset()
    torch.set_grad_enabled(True)
    fn = load(program.source(), backend)
    try:
        with _recording_breaks() as log:
            report = compare(fn, make_args_for(program.specs), backend=backend, grad=True, calls=2)
        grad_mode_after = torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)
    where = f"stillframe (backend={backend!r}) differs from eager on:\n\n{program}\n"
    if not report.ok:
        pytest.fail(where + report.format(), pytrace=False)
    if not grad_mode_after:
        pytest.fail(where + "grad mode is disabled after the compiled call (eager restores it)", pytrace=False)
    counters = dict(stillframe.counters)
    if counters.get("recompiles", 0):
        pytest.fail(where + f"the second call, on inputs with the same metadata, recompiled: counters {counters}: "
                    f"guards do not hold for the inputs they were built from\n{report.format()}", pytrace=False)
    if any(isinstance(r, Exception) for r in report.eager_results):
        return  # a user exception may end the graph early (a break before the step that raises)
    if log.unexpected(backend):
        breaks = "\n".join(log.unexpected(backend))
        pytest.fail(where + f"a straight-line program that returns normally was not captured whole; graph "
                    f"breaks:\n{breaks}\ncounters {counters}\n{report.format()}", pytrace=False)


@settings(max_examples=EAGER_EXAMPLES, **SETTINGS)
@given(programs())
def test_random_mutation_programs_eager_backend(program):
    check_program(program, "eager")


@settings(max_examples=AOT_EAGER_EXAMPLES, **SETTINGS)
@given(programs(AOT_EAGER))
def test_random_mutation_programs_aot_eager_backend(program):
    check_program(program, "aot_eager")
