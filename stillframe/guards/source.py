"""Sources: where a traced value lives in the caller's world, as a Python expression.

A Source is a frozen chain that renders as the expression that fetches the value
from the frame being compiled (STYLE habit 5)::

    >>> s = AttrSource(AttrSource(LocalSource("self"), "fc"), "weight")
    >>> s.name
    "L['self'].fc.weight"

The same object builds guards, fetches graph inputs on every call, and names
values in messages. Expressions are evaluated in a namespace with three roots:

* ``L``: the call's arguments, by parameter name (the frame's locals at entry);
* ``G``: the globals of the compiled function;
* ``F``: the function object itself (for closure cells and defaults).

``GlobalSource(name, module=...)`` reads another module's globals through
``___module_globals(key)``, provided by the guard namespace (the key is the
module's name, or for globals no module in ``sys.modules`` owns, a key of their
own: ``stillframe.guards.guard.globals_key``); ``BuiltinsSource(module=...)``
is the builtins namespace of those globals, ``___builtins(G)``.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from dataclasses import dataclass


class Source:
    """Base class of every source; subclasses are frozen dataclasses."""

    __slots__ = ()

    @property
    def name(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class LocalSource(Source):
    """An argument of the compiled frame: ``L['x']``."""

    local: str

    @property
    def name(self) -> str:
        return f"L[{self.local!r}]"


@dataclass(frozen=True, slots=True)
class ScalarOutputSource(LocalSource):
    """A Python float that a step run for real read out of a tensor (``t.item()``, ``float(t)``) or returned
    (``random.random()``, ``time.time()``), on the stack where tracing resumes or in a local it was stored in.
    Its value is data, never guarded by value: it enters the graph as a symbolic float input (tensor math on
    it is captured, as torch.compile passes the float its resumed frame receives), and a Python use of its
    exact value (a branch, ``str``) breaks the graph again, that use running for real, rather than
    re-tracing on every new value."""


@dataclass(frozen=True, slots=True)
class GlobalSource(Source):
    """A global of the compiled function (``G['torch']``) or of another module's function."""

    global_name: str
    module: str | None = None

    @property
    def name(self) -> str:
        if self.module is None:
            return f"G[{self.global_name!r}]"
        return f"___module_globals({self.module!r})[{self.global_name!r}]"


@dataclass(frozen=True, slots=True)
class GlobalsSource(Source):
    """The globals dict itself of the compiled function (``G``) or of another module's function (a guard that a
    builtin the trace read is not shadowed by a global of that name)."""

    module: str | None = None

    @property
    def name(self) -> str:
        return "G" if self.module is None else f"___module_globals({self.module!r})"


@dataclass(frozen=True, slots=True)
class BuiltinsSource(Source):
    """The builtins namespace (a dict) that code run with the globals of the compiled function, or of another
    module's function, looks a name up in when those globals lack it: ``___builtins(G)``
    (``guard.builtins_of``). A builtin the trace read is ``GetItemSource(BuiltinsSource(...), 'len')``: a user may
    rebind it (``builtins.len = ...``) and its guard sees that, as torch.compile guards the builtins dict entries
    it read."""

    module: str | None = None

    @property
    def name(self) -> str:
        return f"___builtins({GlobalsSource(self.module).name})"


@dataclass(frozen=True, slots=True)
class FunctionSource(Source):
    """The compiled function object itself: ``F``."""

    @property
    def name(self) -> str:
        return "F"


@dataclass(frozen=True, slots=True)
class AttrSource(Source):
    """``base.attr``."""

    base: Source
    attr: str

    @property
    def name(self) -> str:
        if not self.attr.isidentifier():
            return f"getattr({self.base.name}, {self.attr!r})"
        return f"{self.base.name}.{self.attr}"


@dataclass(frozen=True, slots=True)
class ModuleMemberSource(Source):
    """A parameter, buffer or submodule of an ``nn.Module``: named ``base.attr``, fetched as ``base._parameters['attr']``.

    Reading the registry dict directly skips ``nn.Module.__getattr__`` on every call.
    """

    base: Source
    attr: str
    registry: str  # "_parameters", "_buffers" or "_modules"

    @property
    def name(self) -> str:
        return f"{self.base.name}.{self.attr}"


@dataclass(frozen=True, slots=True)
class GetItemSource(Source):
    """``base[index]`` with a constant index (int, str or other hashable constant)."""

    base: Source
    index: object

    @property
    def name(self) -> str:
        return f"{self.base.name}[{self.index!r}]"


@dataclass(frozen=True, slots=True)
class BaseItemSource(Source):
    """An instance of a ``dict`` subclass read as a plain dict, bypassing the subclass's overrides:
    ``dict.copy(base)`` (``index`` None) or ``dict.__getitem__(base, index)``."""

    base: Source
    builtin: type
    index: object

    @property
    def name(self) -> str:
        if self.index is None:
            return f"{self.builtin.__name__}.copy({self.base.name})"
        return f"{self.builtin.__name__}.__getitem__({self.base.name}, {self.index!r})"


@dataclass(frozen=True, slots=True)
class KeyedItemSource(Source):
    """The value a live ``dict`` (or ``defaultdict``) holds under a key that is itself a live object reached by a
    source (an optimizer's ``self.state[p]``, keyed by a parameter): named ``base[key]``, fetched without calling
    a ``defaultdict``'s ``__missing__`` (a ``HAS_ITEM`` guard checks the key is there first)."""

    base: Source
    key: Source

    @property
    def name(self) -> str:
        return f"{self.base.name}[{self.key.name}]"


@dataclass(frozen=True, slots=True)
class DefaultSource(Source):
    """A default argument value: positional (``__defaults__[i]``) or keyword-only (``__kwdefaults__['k']``)."""

    function: Source
    index: object
    kwonly: bool = False

    @property
    def name(self) -> str:
        if self.kwonly:
            return f"{self.function.name}.__kwdefaults__[{self.index!r}]"
        return f"{self.function.name}.__defaults__[{self.index}]"


@dataclass(frozen=True, slots=True)
class LiftedSource(Source):
    """A leaf tensor that the traced code creates (``torch.ones(3, requires_grad=True)``), made by the plan.

    A graph cannot return a new leaf that requires grad, so the plan calls the
    factory before the graph runs and passes the result in as a graph input.
    ``kwargs`` is a tuple of ``(name, value)`` pairs; every argument is a constant.
    """

    factory: object
    args: tuple
    kwargs: tuple

    @property
    def name(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs]
        return f"{getattr(self.factory, '__name__', self.factory)}({', '.join(parts)})"


@dataclass(frozen=True, slots=True)
class CallSource(Source):
    """The value ``fn(base)``, made afresh from the live ``base`` on each call: an ndarray argument's data as a
    tensor, ``torch.from_numpy(L['a'])`` (it shares the array's memory)."""

    base: Source
    fn: object

    @property
    def name(self) -> str:
        return f"{getattr(self.fn, '__name__', self.fn)}({self.base.name})"


@dataclass(frozen=True, slots=True)
class SizeSource(Source):
    """One size of a tensor: ``L['x'].size()[0]`` (a symbolic size passed to the graph as an input of its own,
    as torch.compile passes it); with ``method="stride"``, one of its strides (``L['x'].stride()[0]``: a view
    whose stride is a symbol of its own)."""

    base: Source
    index: int
    method: str = "size"

    @property
    def name(self) -> str:
        return f"{self.base.name}.{self.method}()[{self.index}]"


def root_of(source: Source) -> Source:
    """The root (``L[...]``, ``G[...]`` or ``F``) a source chain starts from."""
    while hasattr(source, "base") or hasattr(source, "function"):
        source = getattr(source, "base", None) or getattr(source, "function")
    return source


def is_user_argument(source: Source) -> bool:
    """True for values reached from the call's arguments by indexing alone (``L['x']``, ``L['xs'][1]``).

    Used for the input-aliasing guard: two arguments of one call may alias each
    other; module attributes (parameters, buffers) are assumed not to alias them.
    """
    while isinstance(source, GetItemSource):
        source = source.base
    return isinstance(source, LocalSource)
