"""Statements of generated programs about autograd, grad modes, modules and training (see :mod:`.programs`).

Advanced-index assignment (``m[:, rows, cols] = v``, the seed bug of ``requires_grad`` lost after it),
``index_put_``, ``masked_fill_``, ``index_add_`` and ``scatter_``; the storage-changing metadata ops
(``resize_``, ``as_strided_``, ``set_``); tensor hooks (``register_hook``, a hook that changes the gradient, one
removed again, ``register_post_accumulate_grad_hook``, a hook on a module's parameter); grad-mode blocks
(``enable_grad`` inside ``no_grad``, ``set_grad_enabled(True)``, ``inference_mode``, CPU ``autocast``); the
version counter; a module call (``MOD``: a parameter, buffers, forward hooks and pre-hooks added and removed,
train and eval) and an optimizer step (``OPT``: SGD with momentum); dropout and more random ops; and
``autograd.Function`` with ``mark_dirty``, a non-tensor ``ctx`` attribute, ``needs_input_grad`` and a
non-differentiable output. The module, optimizer and functions are defined in every program's header
(:data:`.program_writer.HEADER`).
"""

from __future__ import annotations

from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from .program_writer import Var, WriterBase

#: The deps of a tensor computed by ``MOD``: it requires grad through the module's parameters, which no name
#: of the program holds (so no statement picks them as the leaves of a backward)
MODULE_DEPS = frozenset({"MOD.weight"})


class AutogradStatements(WriterBase):
    """One ``s_*`` method per family; each returns ``False`` when nothing visible fits it."""

    # ------------------------------------------------------------ writes through indices

    def s_advanced_setitem(self):
        """``m[:, rows, cols] = v`` on a fresh 3-d tensor (``v`` perhaps requiring grad), or an indexed in-place op
        (``index_put_``, ``masked_fill_``, ``index_add_``, ``scatter_``, ``t[rows, cols] = v``) on a tensor."""
        r = self.rng
        src = self.pick(lambda n, v: v.shape == ("N",) and v.deps is not None)
        roll = r.randrange(6)
        if roll <= 1 or src is None:
            a = self.pick(lambda n, v: len(v.shape) >= 1 and v.shape[0] == "N" and v.deps is not None)
            if a is None:
                return False
            m = self.fresh("m")
            self.emit(f"{m} = torch.zeros(2, {a}.shape[0], {a}.shape[0])")
            if src is None or r.random() < 0.2:
                value, deps = r.choice(["1.5", "k"]), frozenset()
            else:
                value, deps = f"{src}[:2]" + r.choice(["", " * 2", ".sin()"]), self.deps_of(self.lookup(src))
            rows, cols = r.choice([("[0, 1]", "[1, 0]"), ("[1]", "[0]"), ("[0, 1]", "[0, 1]")])
            if rows == "[1]":
                value = value if deps == frozenset() else f"{value}[:1]"
            aug = "+=" if r.random() < 0.25 else "="
            self.emit(f"{m}[:, torch.tensor({rows}), torch.tensor({cols})] {aug} {value}")
            if r.random() < 0.4:
                self.emit(f"OUT.append(({m}.requires_grad, {m}.is_leaf, {m}.grad_fn is None))")
            if r.random() < 0.3:
                self.emit(self.breaker())
            self.new_tensor(f"{m}.sum(0)", ("N", "N"), deps if not self.nograd else frozenset())
            self.families.add("advanced_setitem")
            return
        t = self.pick(lambda n, v: v.shape == ("N", "N") and self.can_write(n, self.lookup(src)))
        if t is None:
            return False
        vs = self.lookup(src)
        if roll == 2:
            self.emit(f"{t}.index_put_((torch.tensor([0, 1]), torch.tensor([1, 1])), {src}[:2], accumulate=True)")
        elif roll == 3:
            self.emit(f"{t}[torch.tensor([1, 0]), torch.tensor([0, 1])] = {src}[:2]")
        elif roll == 4:
            self.emit(f"{t}.index_add_(0, torch.tensor([1, 0]), {src}.expand(2, -1), alpha=0.5)")
        else:
            vs = None
            self.emit(r.choice([f"{t}.masked_fill_({t} > 0, k)",
                                f"{t}.scatter_(1, torch.zeros({t}.shape[0], 1, dtype=torch.long), 2.0)"]))
        self.after_write(t, vs)
        self.families.add("advanced_setitem")

    # ------------------------------------------------------------ metadata ops that change the storage

    def s_storage_metadata(self):
        """``resize_``, ``as_strided_`` and ``set_`` on a tensor requiring no grad that no other name views."""
        r = self.rng
        names = self.visible()

        def fits(n, v):
            return (len(v.shape) == 2 and v.deps == frozenset() and v.base is None and self.can_write(n)
                    and not self.meta_frozen(n) and not v.retained
                    and not any(o.base == n for o in names.values()))

        t = self.pick(fits)
        if t is None:
            return False
        vt = self.lookup(t)
        roll = r.randrange(3)
        if roll == 0 and "N" in vt.shape:
            dim = vt.shape.index("N")
            self.emit(f"{t}.resize_({t}.shape[{dim}])")
            self.update(t, shape=("N",), contig=True)
        elif roll == 1 and vt.shape == ("N", "N"):
            self.emit(f"{t}.as_strided_(({t}.shape[0],), ({t}.shape[0] + 1,))")
            self.update(t, shape=("N",), contig=False)
        else:
            src = self.pick(lambda n, v: n != t and v.deps == frozenset() and v.base is None and v.leaf
                            and not self.meta_frozen(n))
            if src is None:
                return False
            self.emit(f"{t}.set_({src})")
            vs = self.lookup(src)
            self.update(t, shape=vs.shape, contig=vs.contig, base=src, leaf=True)
        if r.random() < 0.4:
            self.emit(f"OUT.append(({t}.shape, {t}.stride(), {t}.storage_offset()))")
        self.families.add("metadata")

    # ------------------------------------------------------------ hooks

    def s_hook(self):
        """A hook on a tensor requiring grad (it logs, or changes the gradient), sometimes removed again; a hook
        run after a leaf's gradient is accumulated; or a hook on the module's parameter (it stays)."""
        r = self.rng
        if self.nograd:
            return False
        t = self.pick(lambda n, v: bool(v.deps) and v.deps != MODULE_DEPS)
        roll = r.randrange(5)
        if roll == 4 or t is None:
            self.emit("MOD.weight.register_hook(lambda g: OUT.append(('param hook', float(g))))")
            self.families.add("hook")
            return
        vt = self.lookup(t)
        if roll == 3 and vt.leaf:
            self.emit(f"{t}.register_post_accumulate_grad_hook(lambda p: OUT.append(('accumulated', p.grad.shape)))")
        else:
            body = r.choice(["lambda g: OUT.append(('hook', tuple(g.shape)))", "lambda g: g * 2",
                             "lambda g: g + 1", "lambda g: print('grad', g.shape, file=BUF)"])
            handle = self.fresh("hk")
            self.emit(f"{handle} = {t}.register_hook({body})")
            if roll == 2:
                self.block(size=1)
                self.emit(f"{handle}.remove()")
        self.families.add("hook")

    # ------------------------------------------------------------ grad modes

    def s_grad_mode(self):
        """A block under a grad mode other than ``no_grad``: ``enable_grad`` (inside ``no_grad``),
        ``set_grad_enabled(True)``, ``inference_mode`` (its result cloned out), CPU ``autocast`` (bfloat16)."""
        r = self.rng
        roll = r.randrange(4)
        if roll == 0 and self.nograd:
            self.emit(r.choice(["with torch.enable_grad():", "with torch.set_grad_enabled(True):"]))
            saved, self.nograd = self.nograd, False
            with self.nested(False):
                self.block()
            self.nograd = saved
        elif roll <= 1:
            self.emit("with torch.set_grad_enabled(True):")
            with self.nested(False):
                if r.random() < 0.4:
                    self.emit(self.breaker())
                self.block()
        elif roll == 2:
            a = self.pick()
            va = self.lookup(a)
            inner = self.fresh("inf")
            self.emit("with torch.inference_mode():")
            saved, self.nograd = self.nograd, True
            with self.nested(False):
                self.emit(f"{inner} = {a} * 2 + 1")
                if r.random() < 0.4:
                    self.emit(self.breaker())
                self.emit(f"OUT.append(({inner}.is_inference(), {inner}.requires_grad, "
                          "torch.is_inference_mode_enabled()))")
            self.nograd = saved
            self.new_tensor(f"{inner}.clone() * {a}", va.shape, self.deps_of(va))
        else:
            a = self.pick(lambda n, v: len(v.shape) == 2 and v.shape[-1] == "N")
            if a is None:
                return False
            va = self.lookup(a)
            b = self.pick(lambda n, v: len(v.shape) in (1, 2) and v.shape[0] == "N")
            if b is None:  # a (1, N) tensor alone, in a callee
                return False
            vb = self.lookup(b)
            self.emit('with torch.autocast("cpu", dtype=torch.bfloat16):')
            with self.nested(False):
                low = self.new_tensor(f"{a} @ {b}", va.shape[:-1] + vb.shape[1:], self.deps_of(va, vb))
                self.emit(f"OUT.append(({low}.dtype, torch.is_autocast_enabled('cpu')))")
                if r.random() < 0.3:
                    self.emit(self.breaker())
            self.new_tensor(f"{low}.float() + 1", va.shape[:-1] + vb.shape[1:], self.deps_of(va, vb))
        self.families.add("grad_mode")

    # ------------------------------------------------------------ the version counter

    def s_version(self):
        """A tensor's ``_version`` read (in-place ops, index assignment and ``mark_dirty`` bump it)."""
        t = self.pick()
        self.emit(self.rng.choice([f"OUT.append({t}._version)", f"STATE['v'] = {t}._version - STATE.get('v', 0)"]))
        self.families.add("version")

    # ------------------------------------------------------------ a module and an optimizer

    def s_module(self):
        """``MOD`` (a scalar weight and bias, a counter buffer and a running mean) called, with a forward hook or
        pre-hook added (and removed, or left for the next call), switched between train and eval, its buffers
        read; its output requires grad through the module's parameters."""
        r = self.rng
        a = self.pick()
        va = self.lookup(a)
        roll = r.randrange(5)
        handle = self.fresh("mh")
        if roll == 0:
            self.emit(f"{handle} = MOD.register_forward_hook(lambda m, args, out: OUT.append(('fwd', out.shape)))")
        elif roll == 1:
            self.emit(f"{handle} = MOD.register_forward_pre_hook(lambda m, args: (args[0] * 2,))")
        elif roll == 2:
            self.emit(r.choice(["MOD.eval()", "MOD.train(k > 1)", "MOD.train()"]))
        deps = self.deps_of(va)
        self.new_tensor(f"MOD({a})", va.shape, None if deps is None else deps | (
            frozenset() if self.nograd else MODULE_DEPS))
        if r.random() < 0.3:
            self.emit(self.breaker())
        if roll <= 1 and r.random() < 0.7:
            self.emit(f"{handle}.remove()")
        if r.random() < 0.5:
            self.emit(r.choice(["OUT.append((MOD.calls.item(), MOD.training))", "OUT.append(MOD.running.clone())",
                                "OUT.append(sorted(n for n, _ in MOD.named_buffers()))"]))
        self.families.add("module")

    def s_optimizer(self):
        """A training step of ``MOD`` with ``OPT``: the loss, ``backward``, ``OPT.step()`` and a ``zero_grad``
        (to None or to zeros), sometimes with a graph break between them or the gradient read first."""
        r = self.rng
        if self.nograd:
            return False
        a = self.pick()
        loss = self.fresh("loss")
        self.emit(f"{loss} = MOD({a}.detach()).pow(2).mean()")
        self.emit(f"{loss}.backward()")
        if r.random() < 0.3:
            self.emit(self.breaker())
        if r.random() < 0.3:
            self.emit("OUT.append(MOD.weight.grad.clone())")
        self.emit("OPT.step()")
        self.emit(r.choice(["OPT.zero_grad()", "OPT.zero_grad(set_to_none=False)", "MOD.zero_grad()", "pass"]))
        if r.random() < 0.4:
            self.emit("OUT.append((MOD.weight.detach().clone(), len(OPT.state)))")
        self.families.add("optimizer")

    # ------------------------------------------------------------ random ops and autograd.Function

    def s_dropout(self):
        """Dropout (functional, and a module in train mode), ``bernoulli``, ``randperm`` and ``torch.rand``."""
        r = self.rng
        a = self.pick()
        va = self.lookup(a)
        roll = r.randrange(4)
        if roll == 0:
            self.new_tensor(f"torch.nn.functional.dropout({a}, p=0.5, training={r.choice(['True', 'k > 1'])})",
                            va.shape, self.deps_of(va))
        elif roll == 1:
            self.new_tensor(f"torch.nn.Dropout(0.3)({a})", va.shape, self.deps_of(va))
        elif roll == 2:
            self.new_tensor(f"{a} * torch.bernoulli(torch.full_like({a}, 0.5))", va.shape, self.deps_of(va))
        else:
            if len(va.shape) >= 1 and va.shape[0] == "N":
                self.new_tensor(f"{a}[torch.randperm({a}.shape[0])]", va.shape, self.deps_of(va))
            else:
                self.new_tensor(f"{a} + torch.rand(())", va.shape, self.deps_of(va))
        self.families.add("rng")

    def s_function_variant(self):
        """``autograd.Function`` beyond ``Twice``: ``Dirty`` (writes its input, ``mark_dirty``), ``Scaled`` (a
        non-tensor ``ctx`` attribute, ``needs_input_grad`` logged, a non-differentiable second output)."""
        a = self.pick()
        va = self.lookup(a)
        if self.rng.random() < 0.5:
            self.new_tensor(f"Dirty.apply({a}.clone())", va.shape, self.deps_of(va))
        else:
            scaled, extra = self.fresh(), self.fresh("nd")
            self.emit(f"{scaled}, {extra} = Scaled.apply({a}, k)")
            self.bind(scaled, Var(va.shape, self.deps_of(va), not self.deps_of(va), None))
            self.emit(f"OUT.append(({extra}.requires_grad, {extra}.sum().item()))")
        self.families.add("autograd_function")
