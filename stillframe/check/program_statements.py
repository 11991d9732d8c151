"""The statements of generated programs, one method per construct family (see :mod:`.programs`).

Each ``s_*`` method writes one statement (or a block) at the current indentation and records its family in
``self.families``; it returns ``False`` when nothing visible fits it, and another is drawn.
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from dataclasses import replace

from .program_autograd import AutogradStatements
from .program_objects import ObjectStatements
from .program_writer import Scope, Var


class Writer(ObjectStatements, AutogradStatements):
    """Writes programs: the bookkeeping of :class:`.program_writer.WriterBase`, the object-model statements of
    :class:`.program_objects.ObjectStatements`, the autograd, module and training statements of
    :class:`.program_autograd.AutogradStatements`, and the tensor, autograd and control-flow statements here."""

    def s_compute(self):
        r = self.rng
        a = self.pick()
        va = self.lookup(a)
        roll = r.random()
        if roll < 0.35:
            fmt = r.choice(["{a}.sin()", "torch.relu({a})", "{a} * 2", "({a} + 1.5)", "{a}.tanh()",
                            "{a}.clone()", "torch.sigmoid({a})", "{a}.abs()", "-{a}", "{a}.pow(2)",
                            "torch.where({a} > 0, {a}, {a} * 0.5)", "{a}.exp().clamp(max=10.0)"])
            self.new_tensor(fmt.format(a=a), va.shape, self.deps_of(va))
        elif roll < 0.7:
            b = self.pick(lambda n, v: self.broadcast(va.shape, v.shape) is not None)
            vb = self.lookup(b)
            op = r.choice(["{a} + {b}", "{a} - {b}", "{a} * {b}", "torch.maximum({a}, {b})",
                           "torch.add({a}, {b}, alpha=0.5)", "{a} / ({b}.abs() + 1)"])
            self.new_tensor(op.format(a=a, b=b), self.broadcast(va.shape, vb.shape), self.deps_of(va, vb))
        elif roll < 0.85 and len(va.shape) in (1, 2) and "N" in va.shape[-1:]:
            b = self.pick(lambda n, v: len(v.shape) in (1, 2) and v.shape[0] == "N")
            if b is None:  # nothing to multiply with (a callee holding only a (1, N) tensor)
                self.new_tensor(f"{a} * 2", va.shape, self.deps_of(va))
                return
            vb = self.lookup(b)
            shape = va.shape[:-1] + vb.shape[1:]
            self.new_tensor(f"{a} @ {b}", shape, self.deps_of(va, vb))
        else:
            if len(va.shape) == 0 or r.random() < 0.4:
                fmt, shape = r.choice(["{a}.sum()", "{a}.mean()", "{a}.norm()"]), ()
            else:
                fmt, shape = r.choice(["{a}.sum(0)", "{a}.mean(0)"]), va.shape[1:]
                if r.random() < 0.5:
                    fmt, shape = "{a}.amax(-1)", va.shape[:-1]
            self.new_tensor(fmt.format(a=a), shape, self.deps_of(va))

    def s_view(self):
        r = self.rng
        a = self.pick(lambda n, v: len(v.shape) >= 1)
        if a is None:
            return False
        va = self.lookup(a)
        base = va.base or a
        options = [("{a}.unsqueeze(0)", (1, *va.shape), va.contig), ("{a}[0]", va.shape[1:], va.contig),
                   ("{a}.narrow(0, 0, 1)", (1, *va.shape[1:]), va.contig)]
        if len(va.shape) == 2:
            options += [("{a}.t()", va.shape[::-1], False), ("{a}.transpose(0, 1)", va.shape[::-1], False),
                        ("{a}[:, 1]", va.shape[:1], False)]
            if va.shape == ("N", "N"):
                options.append(("{a}.diagonal()", ("N",), False))
        if va.contig and len(va.shape) == 1:
            options.append(("{a}.view(-1)", va.shape, True))
        if va.contig and va.shape in ((1, "N"), ("N", 1)):
            options.append(("{a}.view(-1)", ("N",), True))
        options.append(("{a}.detach()", va.shape, va.contig))
        fmt, shape, contig = r.choice(options)
        if fmt == "{a}.detach()":
            self.new_tensor(fmt.format(a=a), shape, frozenset(), base=base, contig=contig, leaf=True)
        else:
            self.new_tensor(fmt.format(a=a), shape, self.deps_of(va), base=base, contig=contig,
                            leaf=False if va.deps else True)
        self.families.add("view")

    def s_inplace(self):
        r = self.rng
        unary = r.random() < 0.35
        t = self.pick(lambda n, v: len(v.shape) >= 1 and self.can_write(n))
        if t is None:
            return False
        vt = self.lookup(t)
        if unary:
            op = r.choice(["{t}.add_(1)", "{t}.mul_(0.5)", "{t}.clamp_(min=-1.0, max=1.0)", "{t}.zero_()",
                           "{t}.fill_(2.0)", "{t}.sigmoid_()", "{t}.relu_()", "{t}.neg_()", "{t} += 1",
                           "{t} *= k"])
            self.emit(op.format(t=t))
        else:
            o, vo = self.operand(vt.shape)
            if vo is not None and (not self.can_write(t, vo) or o == t):
                return False
            op = r.choice(["{t}.add_({o})", "{t}.mul_({o})", "{t}.sub_({o}, alpha=0.5)", "{t} += {o}",
                           "{t} -= {o}", "{t}.copy_({o})" if vo is not None else "{t}.add_({o})"])
            self.emit(op.format(t=t, o=o))
            self.after_write(t, vo)
        self.families.add("inplace")

    def s_metadata(self):
        r = self.rng
        # not on a tensor that retains grad: torch's own autograd asserts (variable.cpp) on a later write
        t = self.pick(lambda n, v: len(v.shape) >= 1 and self.can_write(n) and not self.meta_frozen(n)
                      and not (v.base and self.meta_frozen(v.base)) and not v.retained)
        if t is None:
            return False
        vt = self.lookup(t)
        options = [("unsqueeze_(0)", (1, *vt.shape))]
        if len(vt.shape) == 2:
            options += [("t_()", vt.shape[::-1]), ("transpose_(0, 1)", vt.shape[::-1])]
        if vt.shape[:1] == (1,):
            options.append(("squeeze_(0)", vt.shape[1:]))
        op, shape = r.choice(options)
        self.emit(f"{t}.{op}")
        self.update(t, shape=shape, contig=vt.contig and op.startswith(("unsqueeze", "squeeze")))
        self.families.add("metadata")

    def s_requires_grad(self):
        t = self.pick(lambda n, v: v.leaf and v.deps == frozenset() and v.base is None and not self.meta_frozen(n))
        if t is None:
            return False
        self.emit(f"{t}.requires_grad_()")
        self.update(t, deps=frozenset({t}))
        self.families.add("requires_grad")

    def s_setitem(self):
        r = self.rng
        t = self.pick(lambda n, v: len(v.shape) >= 1 and self.can_write(n))
        if t is None:
            return False
        vt = self.lookup(t)
        forms = [("{t}[0]", vt.shape[1:]), ("{t}[torch.tensor([0, 1])]", (2, *vt.shape[1:])),
                 ("{t}[{t} > 0]", None), ("{t}[1:]", vt.shape)]
        if len(vt.shape) == 2:
            forms += [("{t}[:, 0]", vt.shape[:1]), ("{t}[..., 1]", vt.shape[:1])]
        target, shape = r.choice(forms)
        if shape is None or (shape[:1] == (2,) and r.random() < 0.5):
            value, vo = r.choice(["0.0", "1.5", "k"]), None
        else:
            value, vo = self.operand(shape if shape[:1] != (2,) else shape[1:])
            if vo is not None and not self.can_write(t, vo):
                value, vo = "-2.0", None
        if target == "{t}[1:]" and vo is not None:
            value = f"{value}[1:]" if len(vo.shape) == len(vt.shape) and vo.shape[0] == "N" else value
        aug = r.random() < 0.25
        self.emit(f"{target.format(t=t)} {'+=' if aug else '='} {value}")
        self.after_write(t, vo)
        self.families.add("setitem")

    def loss_source(self):
        return self.pick(lambda n, v: bool(self.grad_leaves(v)) and not self.nograd)

    def s_backward(self):
        s = self.loss_source()
        if s is None:
            return False
        form = self.rng.choice([
            "{s}.sum().backward(retain_graph=True)", "torch.autograd.backward([{s}.sum()], retain_graph=True)",
            "{s}.backward(torch.ones_like({s}), retain_graph=True)", "({s} * {s}).sum().backward()"])
        self.emit(form.format(s=s))
        self.families.add("backward")

    def s_autograd_grad(self):
        s = self.loss_source()
        if s is None:
            return False
        leaf = self.rng.choice(self.grad_leaves(self.lookup(s)))
        name = self.fresh("g")
        self.emit(f"{name}, = torch.autograd.grad({s}.sum(), [{leaf}], retain_graph=True)")
        self.bind(name, Var(self.lookup(leaf).shape, frozenset(), True, None))
        self.families.add("autograd_grad")

    def s_retain_grad(self):
        t = self.pick(lambda n, v: bool(v.deps) and not v.leaf and not v.retained and not self.nograd)
        if t is None:
            return False
        self.emit(f"{t}.retain_grad()")
        self.update(t, retained=True)
        self.families.add("retain_grad")

    def s_grad_read(self):
        t = self.pick(lambda n, v: (v.leaf and bool(v.deps)) or v.retained)
        if t is None:
            return False
        form = self.rng.choice([
            "OUT.append(None if {t}.grad is None else {t}.grad.clone())",
            "STATE['gsum'] = 0.0 if {t}.grad is None else float({t}.grad.sum())",
            "{t}.grad = None",
            "if {t}.grad is not None:\n    {t}.grad.zero_()",
        ])
        if self.lookup(t).leaf and self.rng.random() < 0.3:
            form = "with torch.no_grad():\n    if {t}.grad is not None:\n        {t}.sub_(0.1 * {t}.grad)"
            self.families.add("no_grad")
        for line in form.format(t=t).splitlines():
            self.emit(line)
        self.families.update({"grad_read", "side_effect"})

    def s_side_effect(self):
        r = self.rng
        t = self.pick()
        key = f"s{r.randint(0, 3)}"
        form = r.choice([
            "OUT.append({t})", "OUT.append({t}.shape)", "OUT.append(k)", "OUT.extend([{t}, len(OUT)])",
            "STATE[{key!r}] = {t}", "STATE['n'] = STATE.get('n', 0) + 1", "STATE.pop({key!r}, None)",
            "OBJ.last = {t}", "OBJ.count += 1", "setattr(OBJ, {key!r}, k)",
        ])
        self.emit(form.format(t=t, key=key))
        if r.random() < 0.4:
            vt = self.lookup(t)
            read = r.choice(["len(OUT)", "OBJ.count", "STATE.get('n', 0)", "len(STATE)"])
            self.new_tensor(f"{t} * {read}", vt.shape, self.deps_of(vt))
        self.families.add("side_effect")

    def s_print(self):
        t = self.pick()
        form = self.rng.choice([
            'print("{t}", {t}.shape, {t}.requires_grad, {t}.is_leaf, file=BUF)',
            'print("{t}", f"{{float({t}.sum()):.2f}}", file=BUF)',
            'print("k", k, len(OUT), file=BUF)',
        ])
        self.emit(form.format(t=t))
        self.families.add("print")

    def s_graph_break(self):
        self.emit("torch._dynamo.graph_break()")
        self.families.add("graph_break")

    def s_item_branch(self):
        t = self.pick()
        cond = self.rng.choice(["{t}.sum().item() > 0", "{t}.sum() > 0", "bool(({t} > 0).any())",
                                "{t}.numel() > 3 and {t}.mean().item() < 0"]).format(t=t)
        self.emit(f"if {cond}:")
        with self.nested(True):
            self.block()
        if self.rng.random() < 0.6:
            self.emit("else:")
            with self.nested(True):
                self.block()
        self.families.add("item_branch")

    def s_branch(self):
        cond = self.rng.choice(["k > 1", "k % 2 == 0", "len(OUT) > 2", "OBJ.count > 1", "'s1' in STATE"])
        self.emit(f"if {cond}:")
        with self.nested(True):
            self.block()
        self.families.add("branch")

    def s_loop(self):
        i = self.fresh("i")
        self.emit(f"for {i} in range({self.rng.choice(['k', '2', 'k + 1'])}):")
        with self.nested(True):
            t = self.pick()
            vt = self.lookup(t)
            self.new_tensor(f"{t} * {i}", vt.shape, self.deps_of(vt))
            self.block()
        self.families.add("loop")

    def s_while(self):
        n = self.fresh("n")
        self.emit(f"{n} = 0")
        self.emit(f"while {n} < k:")
        with self.nested(True):
            self.emit(f"{n} += 1")
            self.block()
            if self.rng.random() < 0.3:
                self.emit(f"if {n} == 2:")
                with self.nested(True):
                    self.emit("break")
        self.families.add("while")

    def s_try(self):
        r = self.rng
        self.emit("try:")
        with self.nested(True):
            self.block()
            risky = r.random()
            t = self.pick()
            if risky < 0.25:
                self.emit(f"raise ValueError('boom ' + str(k))")
            elif risky < 0.45:
                self.emit(f"OUT.append({t} + torch.ones(7))")
            elif risky < 0.6:
                self.emit(f"OUT.append({t}[9])" if self.lookup(t).shape else "OUT.append(STATE['missing'])")
            elif risky < 0.75:
                leaf = self.pick(lambda n, v: v.leaf and bool(v.deps))
                if leaf is not None:
                    self.emit(f"{leaf}.add_(1)")
        e = self.fresh("e")
        self.emit(f"except (RuntimeError, ValueError, IndexError, KeyError) as {e}:")
        with self.nested(True):
            self.emit(r.choice([f"print(type({e}).__name__, file=BUF)", f"OUT.append(str({e}))",
                                f"STATE['err'] = type({e}).__name__"]))
            if r.random() < 0.3:
                self.block(size=1)
        if r.random() < 0.3:
            self.emit("finally:")
            with self.nested(False):
                self.emit("OBJ.count += 1")
        self.families.add("try_except")

    def s_raise(self):
        self.emit(self.rng.choice(["if k == 3:", "if k > 1:", "if len(OUT) > 6:", "if OBJ.count > 2:"]))
        with self.nested(True):
            self.emit("raise ValueError(f'k is {k}, OUT has {len(OUT)}')")
        self.families.add("raise")

    def s_no_grad(self):
        self.emit(self.rng.choice(["with torch.no_grad():", "with torch.set_grad_enabled(False):"]))
        saved, self.nograd = self.nograd, True
        with self.nested(False):
            self.block()
        self.nograd = saved
        self.families.add("no_grad")

    def _same_shape_pair(self):
        """Two visible tensors of one shape (perhaps one tensor twice), for a list or dict of them."""
        a = self.pick()
        va = self.lookup(a)
        same = [n for n, v in self.visible().items() if v.shape == va.shape and v.deps is not None]
        b = self.rng.choice(same) if same else a
        return a, b, va.shape, self.deps_of(va, self.lookup(b))

    def s_mutate_iter(self):
        """A container changed while a ``for`` runs over it: a list that grows (bounded by a counter), a dict or set
        that changes size (eager raises RuntimeError, caught and logged), a list of ints shrinking under the
        loop; sometimes with a break in the loop body."""
        r = self.rng
        a, b, shape, deps = self._same_shape_pair()
        roll = r.randrange(4)
        v = self.fresh("v")
        if roll == 0:
            lst, c = self.fresh("lst"), self.fresh("c")
            self.emit(f"{lst} = [{a}, {b}]")
            self.emit(f"{c} = 0")
            self.emit(f"for {v} in {lst}:")
            with self.nested(True):
                self.emit(f"{c} += 1")
                if r.random() < 0.5:
                    self.emit(self.breaker())
                self.emit(f"if {c} <= k:")
                self.emit(f"    {lst}.append({v} * 2)")
            self.emit(f"OUT.append(({c}, len({lst})))")
            self.new_tensor(f"torch.stack({lst}).sum(0)", shape, deps)
        elif roll == 1:
            d, e = self.fresh("d"), self.fresh("e")
            self.emit(f"{d} = {{'p': {a}, 'q': {b}}}")
            self.emit("try:")
            with self.nested(True):
                self.emit(f"for {v} in {d}:")
                with self.nested(True):
                    if r.random() < 0.5:
                        self.emit(self.breaker())
                    self.emit(r.choice([f"{d}[{v} + '2'] = {d}[{v}] * 2", f"{d}[{v} + 'x'] = {d}.pop({v})",
                                        f"{d}[{v}] = {d}[{v}] + 1", f"del {d}[{v}]"]))
            self.emit(f"except RuntimeError as {e}:")
            self.emit(f"    OUT.append(str({e}))")
            self.emit(f"OUT.append(sorted({d}))")
            self.new_tensor(f"sum({d}.values(), {a} * 0)", shape, deps)
        elif roll == 2:
            st, e = self.fresh("st"), self.fresh("e")
            self.emit(f"{st} = set(range(k + 2))")
            self.emit("try:")
            with self.nested(True):
                self.emit(f"for {v} in {st}:")
                with self.nested(True):
                    if r.random() < 0.5:
                        self.emit(self.breaker())
                    self.emit(f"OUT.append({v})")
                    self.emit(f"{st}.add({v} + 100)")
            self.emit(f"except RuntimeError as {e}:")
            self.emit(f"    OUT.append(str({e}))")
            self.emit(f"OUT.append(sorted({st}))")
        else:
            nums = self.fresh("nums")
            self.emit(f"{nums} = list(range(k + 3))")
            self.emit(f"for {v} in {nums}:")
            with self.nested(True):
                if r.random() < 0.5:
                    self.emit(self.breaker())
                self.emit(f"if {v} % 2 == 0:")
                self.emit(f"    {nums}.remove({v})")
                if r.random() < 0.4:
                    self.block(size=1)
            self.emit(f"OUT.append({nums})")
        self.families.add("mutate_iter")

    def s_iter_builtin(self):
        """``zip``, ``enumerate`` and ``reversed`` over a list of tensors, with a break in the loop body sometimes,
        or an iterator partly consumed before a break and finished after it."""
        r = self.rng
        a, b, shape, deps = self._same_shape_pair()
        lst, acc = self.fresh("lst"), self.fresh("acc")
        self.emit(f"{lst} = [{a}, {b}, {a} * 1.5]")
        self.new_tensor(f"{a} * 0", shape, deps, name=acc)
        j, u, v = self.fresh("j"), self.fresh("u"), self.fresh("v")
        roll = r.randrange(6)
        if roll == 5:
            it = self.fresh("it")
            self.emit(f"{it} = " + r.choice([f"enumerate({lst})", f"zip(range(k + 5), reversed({lst}))",
                                             f"enumerate(reversed({lst}), 1)"]))
            self.emit(f"OUT.append(next({it})[0])")
            self.emit(self.breaker())
            self.emit(f"for {j}, {v} in {it}:")
            with self.nested(True):
                self.emit(f"{acc} = {acc} + {v} * {j}")
        else:
            head, body = [
                (f"for {j}, {v} in enumerate({lst}):", f"{acc} = {acc} + {v} * {j}"),
                (f"for {j}, {v} in enumerate(reversed({lst}), start=1):", f"{acc} = {acc} + {v} * {j}"),
                (f"for {u}, {v} in zip({lst}, reversed({lst})):", f"{acc} = {acc} + {u} - {v} * 0.5"),
                (f"for {j}, ({u}, {v}) in enumerate(zip({lst}, {lst}[1:])):", f"{acc} = {acc} + ({u} - {v}) * {j}"),
                (f"for {j}, {v} in zip(range(k), {lst}):", f"{acc} = {acc} + {v} * {j}"),
            ][roll]
            self.emit(head)
            with self.nested(True):
                if r.random() < 0.6:
                    self.emit(self.breaker())
                self.emit(body)
                if j in head and r.random() < 0.3:
                    self.emit(f"OUT.append({j})")
                if r.random() < 0.3:
                    self.block(size=1)
        self.families.add("iter_builtin")

    # ------------------------------------------------------------ functions

    def s_call(self):
        a = self.pick()
        va = self.lookup(a)
        name = self.fresh("h")
        # the callee may write into its parameter only where that changes nothing the caller knows
        param = replace(va, base=None) if self.can_write(a) else replace(va, deps=None, base=None)
        result: dict = {}

        def body():
            self.bind("p", param)
            self.scopes.append(Scope(conditional=True))
            self.block()
            pool = [n for n in self.visible() if n != "p"] or ["p"]
            out = self.rng.choice(pool)
            result["var"] = self.lookup(out)
            self.emit(f"return {out} * 1.0")

        self.defs.append(self._callee(name, body))
        var = result["var"]
        self.new_tensor(f"{name}({a}, k)", var.shape, self.deps_of(var) if var.deps is not None else None)
        self.families.add("nested_call")

    def _callee(self, name, body) -> list[str]:
        """Write ``def name(p)`` with ``body()`` and return its lines; the caller's state is restored."""
        saved = (self.lines, self.indent, self.scopes, self.nograd, self.budget)
        self.lines, self.indent, self.nograd = [], 1, False
        self.scopes = [Scope()]
        self.budget = self.rng.randint(1, 4)
        self.fn_depth += 1
        try:
            body()
        finally:
            self.fn_depth -= 1
            lines = [f"def {name}(p, k):", *self.lines]
            self.lines, self.indent, self.scopes, self.nograd, self.budget = saved
        return lines

    def s_generator(self):
        r = self.rng
        a = self.pick()
        va = self.lookup(a)
        name = self.fresh("gen")
        lines = [f"def {name}(t, n):", "    for j in range(n):"]
        between = r.choice(["", "OUT.append(j)", "print('yield', j, file=BUF)", "OBJ.count += 1",
                            "torch._dynamo.graph_break()", "t = t + 1"])
        if between:
            lines.append(f"        {between}")
        lines.append(r.choice(["        yield t * (j + 1)", "        yield t.sin() + j"]))
        if r.random() < 0.3:
            lines.append("    OUT.append('done')")
        self.defs.append(lines)
        deps = self.deps_of(va)
        use = r.randrange(5)
        if use == 0:
            acc = self.new_tensor(f"{a} * 0", va.shape, deps)
            v = self.fresh("v")
            self.emit(f"for {v} in {name}({a}, k):")
            with self.nested(False):
                self.emit(f"{acc} = {acc} + {v}")
        elif use == 1:
            self.new_tensor(f"sum({name}({a}, 2))", va.shape, deps)
        elif use == 2:
            it = self.fresh("it")
            self.emit(f"{it} = {name}({a}, 3)")
            self.new_tensor(f"next({it})", va.shape, deps)
            if r.random() < 0.5:
                self.new_tensor(f"next({it})", va.shape, deps)
        elif use == 3:
            flag = self.fresh("flag")
            fn = r.choice(["any", "all"])
            self.emit(f"{flag} = {fn}(bool((v > 0).all()) for v in {name}({a}, 3))")
            self.emit(f"OUT.append({flag})")
        else:
            lst = self.fresh("lst")
            self.emit(f"{lst} = list({name}({a}, 2))")
            self.new_tensor(f"{lst}[-1]", va.shape, deps)
        if "graph_break" in between:
            self.families.add("graph_break")
        self.families.add("generator")

    def s_closure(self):
        a = self.pick()
        va = self.lookup(a)
        name = self.fresh("cl")
        scale = self.fresh("scale")
        self.emit(f"{scale} = k * 0.5")
        self.emit(f"def {name}(u):")
        self.emit(f"    return u * {scale} + {a}.shape[0]")
        self.new_tensor(f"{name}({a})", va.shape, self.deps_of(va))
        self.families.add("closure")

    # ------------------------------------------------------------ the result

    def return_stmt(self) -> str:
        r = self.rng
        names = list(self.visible())
        chosen = r.sample(names, min(len(names), r.randint(1, 3)))
        retained = [n for n in names if self.lookup(n).retained and n not in chosen]
        if retained and r.random() < 0.7:  # its .grad is compared after the checker's backward
            chosen.append(r.choice(retained))
        if any(n in ("x", "y", "w") for n in chosen) or any(self.lookup(n).base in ("x", "y", "w")
                                                           for n in chosen):
            self.families.add("return_input")
        form = r.random()
        if form < 0.6:
            return f"return ({', '.join(chosen)},)"
        if form < 0.8:
            return "return {" + ", ".join(f"{n!r}: {n}" for n in chosen) + ", 'k': k}"
        return f"return {chosen[0]}"
