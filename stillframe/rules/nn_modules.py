"""``torch.nn.Module`` in the trace: calling a module as ``Module.__call__`` does, its attributes and registries.

:func:`call_module` runs forward pre-hooks, ``forward`` and forward hooks, inlined, with the module's hook
dictionaries guarded (:func:`module_hooks_guard`); a module with backward hooks, or marked by
``torch.compiler.disable``, runs for real. :func:`module_attr` reads ``self.name`` as ``nn.Module.__getattr__``
does (ordinary lookup first, then ``_parameters``, ``_buffers``, ``_modules``), and :func:`module_iterator`
unrolls ``parameters()``, ``named_modules()`` ... from the live module tree, guarding each registry's keys.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

import functools
import inspect
import types
from typing import TYPE_CHECKING, Any

import torch
from ..errors import InternalError
from ..guards.guard import Guard, hook_ids
from ..guards.source import AttrSource, GetItemSource, ModuleMemberSource
from ..variables.base import (ConstantVariable, DictVariable, NNModuleVariable, PythonObjectVariable, TupleVariable,
                              UserFunctionVariable, UserMethodVariable, VariableTracker)
from ..variables.builder import wrap, wrap as wrap_value, wrapped
from ..variables.objects import DELETED
from .disable import is_disabled
from .objects import MISSING, _static_lookup
from . import attrs, calls, frames, known

if TYPE_CHECKING:
    from ..trace.interpreter import Tracer


def module_hooks_guard(tx: Any, mod: NNModuleVariable) -> None:
    """Guard that ``mod`` still has exactly the forward hooks it has now, still no backward hooks, and that no
    global hooks exist."""
    m = mod.module
    if mod.source is not None:
        if m._forward_hooks or m._forward_pre_hooks:
            tx.add_guard(Guard(mod.source, "HOOKS", hook_ids(m)))
        else:
            tx.add_guard(Guard(mod.source, "NO_HOOKS"))
    tx.add_guard(Guard(None, "GLOBAL", ("global_hooks", True)))


def global_module_hooks() -> bool:
    """Whether process-wide module hooks are registered (``nn.Module.__call__`` runs them on every module)."""
    m = torch.nn.modules.module
    return bool(m._global_forward_hooks or m._global_forward_pre_hooks or m._global_backward_hooks or
                m._global_backward_pre_hooks)


def call_module(tx: Tracer, mod: NNModuleVariable, args: list, kwargs: dict) -> None:
    """``module(*args)`` as ``nn.Module.__call__`` does it: forward pre-hooks, ``forward``, forward hooks."""
    module = mod.module
    _refuse_unsupported_hooks(tx, module)
    call_override = type(module).__call__
    if is_disabled(call_override) or is_disabled(module.__dict__.get("forward")):  # torch.compiler.disable(mod)
        tx.unsupported("disabled", f"{type(module).__name__} is marked never to be compiled",
                       ("it runs for real; tracing resumes after it",))
    if call_override is not torch.nn.Module.__call__:  # a subclass's own __call__ runs instead of Module's
        if not isinstance(call_override, types.FunctionType):
            tx.unsupported("unsupported_call", f"{type(module).__name__}.__call__ is not a Python function")
        return frames.inline_call(tx, call_override, None, [mod, *args], kwargs)
    call_module_impl(tx, mod, args, kwargs)


def _refuse_unsupported_hooks(tx: Tracer, module: torch.nn.Module) -> None:
    """Break before a call of ``module`` that runs hooks the trace does not inline: global module hooks, backward
    hooks, forward hooks that run even when forward raises. The module call runs for real (the guards of
    :func:`module_hooks_guard` send a call traced without them there once one is registered)."""
    if global_module_hooks():
        tx.unsupported("module_hooks", f"calling {type(module).__name__} while global module hooks are registered "
                       "(torch.nn.modules.module.register_module_*_hook)", ("the module call runs for real",))
    if module._backward_hooks or module._backward_pre_hooks or getattr(module, "_forward_hooks_always_called", None):
        tx.unsupported("module_hooks", f"calling {type(module).__name__} that has backward hooks",
                       ("forward hooks and forward pre-hooks are supported",))


#: ``nn.Module.__call__`` and the functions behind it: a subclass's ``__call__`` reaches them through
#: ``super().__call__(...)`` (transformers' GradientCheckpointingLayer); they run as :func:`call_module_impl`.
MODULE_CALL_IMPLS = (torch.nn.Module.__call__, torch.nn.Module._wrapped_call_impl, torch.nn.Module._call_impl)


def call_module_impl(tx: Tracer, mod: NNModuleVariable, args: list, kwargs: dict) -> None:
    """What ``nn.Module.__call__`` itself does for ``mod``: forward pre-hooks, ``forward``, forward hooks."""
    module = mod.module
    _refuse_unsupported_hooks(tx, module)  # (again: super().__call__(...) in a subclass's __call__ comes here)
    module_hooks_guard(tx, mod)
    replaced = "forward" in module.__dict__  # module.forward = fn: Module.__call__ finds the instance's
    if mod.source is not None:
        tx.add_guard(Guard(AttrSource(mod.source, "__dict__"), "HAS_KEY", ("forward", replaced)))
    if replaced:
        forward_var = wrap_value(tx, module.__dict__["forward"], GetItemSource(AttrSource(mod.source, "__dict__"),
                                                                                  "forward") if mod.source else None)
    else:
        forward = type(module).forward
        if not isinstance(forward, types.FunctionType):
            tx.unsupported("unsupported_call", f"{type(module).__name__}.forward is not a Python function")
        static = isinstance(inspect.getattr_static(type(module), "forward"), staticmethod)
        forward_var = UserFunctionVariable(forward) if static else UserMethodVariable(forward, mod)
    for hook_id, hook in list(module._forward_pre_hooks.items()):
        if hook_id in module._forward_pre_hooks_with_kwargs:  # hook(module, args, kwargs) -> (args, kwargs)
            result = calls.call_sync(tx, wrap_value(tx, hook, None),
                               [mod, TupleVariable(tuple(args)), tx.new_dict(tuple(kwargs.items()))], {})
            if not (isinstance(result, ConstantVariable) and result.value is None):
                args, kwargs = _pre_hook_args_kwargs(tx, result)
            continue
        result = calls.call_sync(tx, wrap_value(tx, hook, None), [mod, TupleVariable(tuple(args))], {})
        if not (isinstance(result, ConstantVariable) and result.value is None):
            args = list(result.items) if isinstance(result, TupleVariable) else [result]
    post = list(module._forward_hooks.items())
    if not post:
        return calls.call(tx, forward_var, list(args), kwargs)
    output = calls.call_sync(tx, forward_var, list(args), kwargs)
    for hook_id, hook in post:
        hook_args = [mod, TupleVariable(tuple(args))]
        if hook_id in module._forward_hooks_with_kwargs:  # hook(module, args, kwargs, output)
            hook_args.append(tx.new_dict(tuple(kwargs.items())))
        result = calls.call_sync(tx, wrap_value(tx, hook, None), [*hook_args, output], {})
        if not (isinstance(result, ConstantVariable) and result.value is None):
            output = result
    tx.push(output)


def _pre_hook_args_kwargs(tx: Tracer, result: VariableTracker) -> tuple[list, dict]:
    """The ``(args, kwargs)`` a ``with_kwargs=True`` forward pre-hook returned, checked as ``Module._call_impl``
    checks it: anything but a tuple of two is its ``RuntimeError``, whose message prints the value (so a value
    holding tensors, whose text is their data, runs the module call for real to raise it)."""
    if not (isinstance(result, TupleVariable) and len(result.items) == 2):
        if known.is_const(tx, result):
            tx.user_error(RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                       f"but got {known.const_value(tx, result)}."))
        tx.unsupported("module_hooks", "a forward pre-hook (with_kwargs=True) returned something other than "
                       "(args, kwargs)", ("the module call runs for real and raises eager's RuntimeError",))
    new_args, new_kwargs = result.items
    if not isinstance(new_kwargs, DictVariable):
        tx.unsupported("module_hooks", "a forward pre-hook (with_kwargs=True) returned kwargs that are not a dict",
                       ("the module call runs for real",))
    return list(known.sequence_items(tx, new_args)), dict(tx.dict_entry(new_kwargs).items)


MODULE_ITERATORS = {"modules", "named_modules", "children", "named_children", "parameters", "named_parameters",
                    "buffers", "named_buffers"}


def module_iterator(var: NNModuleVariable, method: str, tx: Any, args: list, kwargs: dict) -> VariableTracker:
    """``self.named_modules()``, ``self.parameters()`` ...: unrolled from the live module tree, as
    ``nn.Module._named_members`` / ``named_modules`` walk it (``remove_duplicate=False`` keeps a module or member
    reached twice).

    Each visited module's registry keys are guarded, so adding or removing a
    submodule or parameter recompiles.
    """
    def _removed(tx: Any, m: torch.nn.Module) -> frozenset:
        removed = removed_members(tx, m)
        if removed is None:  # written between the method's load (see _guard_registry_writes) and its call
            raise InternalError(f"{method}() after a traced write that may change {type(m).__name__}'s registries")
        return removed

    try:  # as the method's own signature takes them (named_modules(memo=None, prefix='', remove_duplicate=True))
        bound = inspect.signature(getattr(torch.nn.Module, method)).bind(
            None, *(known.const_value(tx, a) for a in args), **{k: known.const_value(tx, v) for k, v in kwargs.items()})
    except TypeError:
        tx.unsupported("unsupported_call", f"{method}() with arguments it does not take", ("it runs for real",))
    bound.apply_defaults()
    options = bound.arguments
    if options.get("memo") is not None:
        tx.unsupported("unsupported_call", "named_modules() with a memo set (it fills the set)", ("it runs for real",))
    recurse = options.get("recurse", True)
    remove_duplicate = options.get("remove_duplicate", True)
    walk: list = []  # (qualified name, VT of module)

    def visit(mod_var: NNModuleVariable, prefix: str, depth: int) -> None:
        walk.append((prefix, mod_var))
        m = mod_var.module
        if mod_var.source is not None:
            tx.add_guard(Guard(AttrSource(mod_var.source, "_modules"), "KEYS", tuple(m._modules)))
        if depth == 0 or method in ("modules", "named_modules") or recurse:
            removed = _removed(tx, m)
            for child in m._modules:
                if m._modules[child] is None or child in removed:
                    continue
                child_var = module_attr(tx, mod_var, child)
                if method in ("children", "named_children") and depth == 0:
                    walk.append((child, child_var))
                    continue
                visit(child_var, f"{prefix}.{child}" if prefix else child, depth + 1)

    if method in ("children", "named_children"):
        m = var.module
        removed = _removed(tx, m)
        for child in m._modules:
            if m._modules[child] is not None and child not in removed:
                walk.append((child, module_attr(tx, var, child)))
        if var.source is not None:
            tx.add_guard(Guard(AttrSource(var.source, "_modules"), "KEYS", tuple(m._modules)))
        items = walk
    else:
        visit(var, options.get("prefix", ""), 0)
        # remove_duplicate=False (named_modules, named_parameters, named_buffers): a module or member reached
        # twice is yielded each time, under each name
        if method in ("modules", "named_modules"):
            seen, items = set(), []
            for qual, mv in walk:
                if id(mv.module) not in seen or not remove_duplicate:
                    seen.add(id(mv.module))
                    items.append((qual, mv))
        else:
            registry = "_parameters" if "parameters" in method else "_buffers"
            modules = walk if recurse else walk[:1]
            seen, visited, items = set(), set(), []
            for qual, mv in modules:
                if id(mv.module) in visited and remove_duplicate:  # (its members are all seen already)
                    continue
                visited.add(id(mv.module))
                regs = getattr(mv.module, registry)
                if mv.source is not None:
                    tx.add_guard(Guard(AttrSource(mv.source, registry), "KEYS", tuple(regs)))
                removed = _removed(tx, mv.module)
                for pname, value in regs.items():
                    if value is None or pname in removed or (id(value) in seen and remove_duplicate):
                        continue
                    seen.add(id(value))
                    items.append((f"{qual}.{pname}" if qual else pname, module_attr(tx, mv, pname)))
    if method.startswith("named_"):
        return tx.new_iterator(tuple(TupleVariable((ConstantVariable(q), v)) for q, v in items))
    return tx.new_iterator(tuple(v for _, v in items))


#: The dicts ``nn.Module`` keeps its members in, in the order ``nn.Module.__getattr__`` searches them.
REGISTRIES = ("_parameters", "_buffers", "_modules")


def traced_registry(tx: Any, m: torch.nn.Module, registry: str) -> DictVariable | None:
    """``m.<registry>`` as the trace holds it: the heap dict made when traced code read it (``self._modules`` in
    ``add_module``, ``ModuleList.insert`` ...; one heap dict per live dict, by identity), else ``None``."""
    members = m.__dict__.get(registry)
    hit = wrapped(tx, members) if members is not None else None
    return hit if isinstance(hit, DictVariable) else None


def registries_written(tx: Any, m: torch.nn.Module) -> bool:
    """Whether traced code stored into one of ``m``'s registry dicts (``self._modules[name] = module`` in
    ``add_module``, ``ModuleList.append``, ``register_parameter`` ...), a write not yet replayed on the live dict
    that every rule reading the live registries (``len(m)``, ``m[i]``, ``iter(m)``, ``m.named_children()``) would
    miss."""
    if not tx.state.side_effects:
        return False
    return any((dv := traced_registry(tx, m, r)) is not None and ("dict", dv.oid) in tx.state.side_effects
               for r in REGISTRIES)


def guard_registry_read(tx: Any, var: NNModuleVariable, what: str) -> None:
    """Break the graph where ``what`` reads ``var``'s registries from the live module while a traced write may
    have changed them: a store into a registry dict (:func:`registries_written`), or a pending attribute write on
    the module (``nn.Module.__setattr__`` / ``__delattr__`` register, clear or remove members; any such write,
    see :func:`removed_members`). The read runs for real after the writes are replayed."""
    m = var.module
    if registries_written(tx, m) or removed_members(tx, m) != frozenset():
        tx.unsupported("side_effect", f"{what} of a {type(m).__name__} after a traced write that may change its "
                       "parameters, buffers or submodules", ("it runs for real after the writes",))


def removed_members(tx: Any, m: torch.nn.Module) -> frozenset | None:
    """The registry members of ``m`` that attribute writes traced so far, not yet replayed, take away; ``None``
    when a pending write on ``m`` is one this does not model.

    ``nn.Module.__setattr__`` stores ``m.name = None`` for a name in ``_parameters``, ``_modules`` or ``_buffers``
    as a ``None`` entry (which the iterators skip), and ``nn.Module.__delattr__`` removes the entry; a plain
    constant written to (or a deletion of) another name touches no registry. Any other pending write (a tensor,
    a ``Parameter`` or a module, which ``__setattr__`` may register; a registry name deleted and written again)
    is not modelled.
    """
    removed = set()
    for key, (_, payload) in tx.state.side_effects.items() if tx.state.side_effects else ():
        if key[0] not in ("attr", "attr_del") or key[1] != id(m):
            continue
        name, value = key[2], payload[1]
        registered = any(name in m.__dict__.get(r, {}) for r in ("_parameters", "_buffers", "_modules"))
        cleared = value is DELETED or (isinstance(value, ConstantVariable) and value.value is None)
        plain = value is DELETED or (isinstance(value, ConstantVariable) and value.value is not None)
        if registered and key[0] == "attr" and cleared and ("attr_del", id(m), name) not in tx.state.side_effects:
            removed.add(name)
        elif registered or not plain:
            return None
    return frozenset(removed)


def _guard_registry_writes(tx: Any, var: NNModuleVariable, name: str) -> None:
    """Break the graph at ``var.<name>`` (an iterator method) when a pending attribute write on ``var``'s module
    tree is one :func:`removed_members` does not model, or traced code stored into a registry dict of the tree
    (:func:`registries_written`): the method is read, and called, for real after the writes are replayed (the
    attribute load, not the call: the rebuilt iterator is no live method)."""
    stack, seen = [var.module], set()
    while stack:
        m = stack.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        removed = removed_members(tx, m)
        if removed is None or registries_written(tx, m):
            tx.unsupported("side_effect", f"{type(var.module).__name__}.{name} after a traced write on a "
                           f"{type(m).__name__} that may change its parameters, buffers or submodules",
                           ("it runs for real after the writes",))
        stack.extend(c for k, c in m._modules.items() if c is not None and k not in removed)


def module_attr(tx: Any, var: NNModuleVariable, name: str) -> VariableTracker:
    m = var.module
    src = AttrSource(var.source, name) if var.source is not None else None
    found = _static_lookup(m, name)
    if found is MISSING:  # as Python: nn.Module.__getattr__ (its registries) only when ordinary lookup fails
        for registry in REGISTRIES:
            traced = traced_registry(tx, m, registry)
            if traced is not None:  # read (and maybe written: add_module) by traced code: the trace's view of it
                member = tx.dict_lookup(traced, name, MISSING)
                if member is not MISSING:
                    return member
                continue
            members = m.__dict__.get(registry, {})
            if name in members:
                member_src = ModuleMemberSource(var.source, name, registry) if var.source is not None else None
                return wrap(tx, members[name], member_src)
    if name in REGISTRIES and found is not MISSING and found[0] == "instance" and \
            removed_members(tx, m) != frozenset():
        # the trace models an attribute write that (un)registers a member apart from this dict (probe nn
        # A5: ModuleList.__delitem__'s delattr, then its read of self._modules): the read runs after the write
        tx.unsupported("side_effect", f"reading {type(m).__name__}.{name} after a traced attribute write that may "
                       "change it", ("it runs for real after the write",))
    if name in MODULE_ITERATORS and found == ("class", getattr(torch.nn.Module, name)):
        _guard_registry_writes(tx, var, name)
        return PythonObjectVariable(functools.partial(module_iterator, var, name))
    if found is MISSING:
        if type(m).__getattr__ is not torch.nn.Module.__getattr__:
            if isinstance(type(m).__getattr__, types.FunctionType):  # the class's own, traced (as Python calls it)
                return attrs._class_getattr(tx, var, type(m), name)
            tx.unsupported("unsupported_attribute", f"{type(m).__name__} defines __getattr__")
        attrs.guard_not_shadowed(tx, var, m, name)
        tx.user_error(AttributeError(f"'{type(m).__name__}' object has no attribute '{name}'"))
    return attrs._bind_found(tx, var, m, name, found, src)
