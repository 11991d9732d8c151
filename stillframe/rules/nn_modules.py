"""``torch.nn.Module`` in the trace: calling a module as ``Module.__call__`` does, its attributes and registries.

:func:`call_module` runs forward pre-hooks, ``forward`` and forward hooks, inlined, with the module's hook
dictionaries guarded (:func:`module_hooks_guard`); a module with backward hooks, or marked by
``torch.compiler.disable``, runs for real. :func:`module_attr` reads ``self.name`` as ``nn.Module.__getattr__``
does (ordinary lookup first, then ``_parameters``, ``_buffers``, ``_modules``), and :func:`module_iterator`
unrolls ``parameters()``, ``named_modules()`` ... from the live module tree, guarding each registry's keys.
"""

from __future__ import annotations

import functools
import inspect
import types
from typing import TYPE_CHECKING, Any

import torch
from ..errors import InternalError
from ..guards.guard import Guard, hook_ids
from ..guards.source import AttrSource, GetItemSource, ModuleMemberSource
from ..variables.base import (ConstantVariable, NNModuleVariable, PythonObjectVariable, TupleVariable,
                              UserFunctionVariable, UserMethodVariable, VariableTracker)
from ..variables.builder import wrap, wrap as wrap_value
from ..variables.objects import DELETED
from .disable import is_disabled
from .objects import MISSING, _static_lookup
from . import attrs, calls, frames, known

if TYPE_CHECKING:
    from ..trace.interpreter import Tracer


def module_hooks_guard(tx: Any, mod: NNModuleVariable) -> None:
    """Guard that ``mod`` still has exactly the forward hooks it has now (and that no global hooks exist)."""
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
    if global_module_hooks():
        tx.unsupported("module_hooks", f"calling {type(module).__name__} while global module hooks are registered "
                       "(torch.nn.modules.module.register_module_*_hook)", ("the module call runs for real",))
    if module._backward_hooks or module._backward_pre_hooks or getattr(module, "_forward_hooks_always_called", None):
        tx.unsupported("module_hooks", f"calling {type(module).__name__} that has backward hooks",
                       ("forward hooks and forward pre-hooks are supported",))
    call_override = type(module).__call__
    if is_disabled(call_override) or is_disabled(module.__dict__.get("forward")):  # torch.compiler.disable(mod)
        tx.unsupported("disabled", f"{type(module).__name__} is marked never to be compiled",
                       ("it runs for real; tracing resumes after it",))
    if call_override is not torch.nn.Module.__call__:  # a subclass's own __call__ runs instead of Module's
        if not isinstance(call_override, types.FunctionType):
            tx.unsupported("unsupported_call", f"{type(module).__name__}.__call__ is not a Python function")
        return frames.inline_call(tx, call_override, None, [mod, *args], kwargs)
    call_module_impl(tx, mod, args, kwargs)


#: ``nn.Module.__call__`` and the functions behind it: a subclass's ``__call__`` reaches them through
#: ``super().__call__(...)`` (transformers' GradientCheckpointingLayer); they run as :func:`call_module_impl`.
MODULE_CALL_IMPLS = (torch.nn.Module.__call__, torch.nn.Module._wrapped_call_impl, torch.nn.Module._call_impl)


def call_module_impl(tx: Tracer, mod: NNModuleVariable, args: list, kwargs: dict) -> None:
    """What ``nn.Module.__call__`` itself does for ``mod``: forward pre-hooks, ``forward``, forward hooks."""
    module = mod.module
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
                new_args, new_kwargs = known.sequence_items(tx, result)
                args = list(known.sequence_items(tx, new_args))
                kwargs = dict(tx.dict_entry(new_kwargs).items)
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


MODULE_ITERATORS = {"modules", "named_modules", "children", "named_children", "parameters", "named_parameters",
                    "buffers", "named_buffers"}


def module_iterator(var: NNModuleVariable, method: str, tx: Any, args: list, kwargs: dict) -> VariableTracker:
    """``self.named_modules()``, ``self.parameters()`` ...: unrolled from the live module tree.

    Each visited module's registry keys are guarded, so adding or removing a
    submodule or parameter recompiles.
    """
    def _removed(tx: Any, m: torch.nn.Module) -> frozenset:
        removed = removed_members(tx, m)
        if removed is None:  # written between the method's load (see _guard_registry_writes) and its call
            raise InternalError(f"{method}() after a traced write that may change {type(m).__name__}'s registries")
        return removed

    options = {k: known.const_value(tx, v) for k, v in kwargs.items()}
    positional = ("prefix", "recurse") if method.startswith("named_") else ("recurse",)
    options.update(zip(positional, (known.const_value(tx, a) for a in args)))
    recurse = options.get("recurse", True)
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
        if method in ("modules", "named_modules"):
            seen, items = set(), []
            for qual, mv in walk:
                if id(mv.module) not in seen:
                    seen.add(id(mv.module))
                    items.append((qual, mv))
        else:
            registry = "_parameters" if "parameters" in method else "_buffers"
            modules = walk if recurse else walk[:1]
            seen, items = set(), []
            for qual, mv in modules:
                regs = getattr(mv.module, registry)
                if mv.source is not None:
                    tx.add_guard(Guard(AttrSource(mv.source, registry), "KEYS", tuple(regs)))
                removed = _removed(tx, mv.module)
                for pname, value in regs.items():
                    if value is None or pname in removed or id(value) in seen:
                        continue
                    seen.add(id(value))
                    items.append((f"{qual}.{pname}" if qual else pname, module_attr(tx, mv, pname)))
    if method.startswith("named_"):
        return tx.new_iterator(tuple(TupleVariable((ConstantVariable(q), v)) for q, v in items))
    return tx.new_iterator(tuple(v for _, v in items))


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
    tree is one :func:`removed_members` does not model: the method is read, and called, for real after the
    writes are replayed (the attribute load, not the call: the rebuilt iterator is no live method)."""
    stack, seen = [var.module], set()
    while stack:
        m = stack.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        removed = removed_members(tx, m)
        if removed is None:
            tx.unsupported("side_effect", f"{type(var.module).__name__}.{name} after a traced attribute write on a "
                           f"{type(m).__name__} that may change its parameters, buffers or submodules",
                           ("it runs for real after the writes",))
        stack.extend(c for k, c in m._modules.items() if c is not None and k not in removed)


def module_attr(tx: Any, var: NNModuleVariable, name: str) -> VariableTracker:
    m = var.module
    src = AttrSource(var.source, name) if var.source is not None else None
    found = _static_lookup(m, name)
    if found is MISSING:  # as Python: nn.Module.__getattr__ (its registries) only when ordinary lookup fails
        for registry in ("_parameters", "_buffers", "_modules"):
            members = m.__dict__.get(registry, {})
            if name in members:
                member_src = ModuleMemberSource(var.source, name, registry) if var.source is not None else None
                return wrap(tx, members[name], member_src)
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
