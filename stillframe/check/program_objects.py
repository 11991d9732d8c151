"""Statements of generated programs about Python's object model and runtime (see :mod:`.programs`).

User objects (a class with ``__slots__``, a method with a side effect, a property, computed attribute names,
``hasattr``), exception chaining (``raise ... from``, ``__cause__``, ``__context__``), random numbers and the
RNG state, the generator protocol (``send``, ``throw``, ``close``, an infinite generator left by ``break``),
context managers (a user ``__enter__``/``__exit__``, ``contextlib.ExitStack``), a module global written through
``global``, local lists and dicts of tensors, Python values read out of tensors, and ``autograd.Function``.
The classes they use are defined in every program's header (:data:`.program_writer.HEADER`).
"""

from __future__ import annotations

from .program_writer import WriterBase


class ObjectStatements(WriterBase):
    """One ``s_*`` method per family; each returns ``False`` when nothing visible fits it."""

    def s_object(self):
        r = self.rng
        a = self.pick()
        va = self.lookup(a)
        roll = r.randrange(5)
        if roll == 0:
            o = self.fresh("o")
            self.emit(f"{o} = Slotted({a})")
            if r.random() < 0.6:
                self.emit(f"{o}.b = {o}.a * 2")
            self.emit(f"OUT.append((hasattr({o}, 'b'), hasattr({o}, '__dict__')))")
            if r.random() < 0.4:
                e = self.fresh("e")
                self.emit("try:")
                self.emit(f"    {o}.c = 1")
                self.emit(f"except AttributeError as {e}:")
                self.emit(f"    OUT.append(str({e}))")
            self.new_tensor(f"{o}.a + 1", va.shape, self.deps_of(va))
        elif roll == 1:
            self.new_tensor(f"CNT.add({a})", va.shape, self.deps_of(va))
            self.emit(r.choice(["OUT.append(CNT.total)", "OUT.append(len(CNT.items))", "STATE['cnt'] = CNT.n"]))
        elif roll == 2:
            self.emit(f"setattr(OBJ, 'attr' + str(k), {a})")
            self.emit(f"OUT.append([hasattr(OBJ, 'attr' + str(j)) for j in range(4)])")
            self.new_tensor("getattr(OBJ, 'attr' + str(k)) * 2", va.shape, None)
        elif roll == 3:
            self.emit(r.choice(["OUT.append(getattr(OBJ, 'missing', None) is None)",
                                "OUT.append(type(OBJ).__name__)",
                                "OUT.append(sorted(vars(OBJ)))",
                                "if hasattr(OBJ, 'last'):\n    del OBJ.last"]).replace("\n", "\n" + "    " * self.indent))
        else:
            self.emit(f"OUT.append((isinstance({a}, torch.Tensor), callable(CNT.add), type({a}).__name__))")
        self.families.add("object")

    def s_chain(self):
        r = self.rng
        inner, outer = self.fresh("e"), self.fresh("e")
        how = r.choice(["from {inner}", "", "from None"])
        self.emit("try:")
        self.emit("    try:")
        self.emit(r.choice(["        raise KeyError('inner ' + str(k))", "        STATE['no such key']"]))
        self.emit(f"    except KeyError as {inner}:")
        self.emit(f"        raise ValueError('outer') {how.format(inner=inner)}".rstrip())
        self.emit(f"except ValueError as {outer}:")
        self.emit(f"    OUT.append((repr({outer}.__cause__), repr({outer}.__context__), "
                  f"{outer}.__suppress_context__))")
        if len(self.scopes) == 1 and self.fn_depth == 0 and r.random() < 0.3:
            self.emit("if k == 2:")
            self.emit("    raise RuntimeError('chained') from KeyError('cause')")
        self.families.add("exception_chain")

    def s_rng(self):
        r = self.rng
        a = self.pick()
        va = self.lookup(a)
        roll = r.randrange(4)
        if roll == 0:
            self.new_tensor(f"{a} + torch.rand_like({a})", va.shape, self.deps_of(va))
        elif roll == 1:
            self.emit("torch.manual_seed(k)")
            self.new_tensor(f"torch.randn_like({a})", va.shape, frozenset())
        elif roll == 2:
            st, r1, r2 = self.fresh("st"), self.fresh("r"), self.fresh("r")
            self.emit(f"{st} = torch.get_rng_state()")
            self.emit(f"{r1} = torch.rand_like({a})")
            self.emit(f"torch.set_rng_state({st})")
            self.emit(f"{r2} = torch.rand_like({a})")
            self.emit(f"OUT.append(bool(({r1} == {r2}).all()))")
        else:
            g = self.fresh("gen")
            self.emit(f"{g} = torch.Generator().manual_seed(k)")
            self.new_tensor(f"torch.rand({a}.shape, generator={g})", va.shape, frozenset())
        self.families.add("rng")

    def s_gen_protocol(self):
        r = self.rng
        a = self.pick()
        va = self.lookup(a)
        deps = self.deps_of(va)
        name = self.fresh("gp")
        roll = r.randrange(4)
        if roll == 0:
            self.defs.append([f"def {name}(t):", "    got = yield t * 1", "    while True:",
                              "        OUT.append(got)", "        got = yield t * got"])
            it = self.fresh("it")
            self.emit(f"{it} = {name}({a})")
            self.new_tensor(f"next({it})", va.shape, deps)
            self.new_tensor(f"{it}.send(2.0)", va.shape, deps)
            if r.random() < 0.5:
                self.emit(f"{it}.close()")
        elif roll == 1:
            self.defs.append([f"def {name}(t):", "    j = 0", "    while True:", "        j += 1",
                              *(["        OUT.append(j)"] if r.random() < 0.5 else []), "        yield t * j"])
            acc = self.new_tensor(f"{a} * 0", va.shape, deps)
            m, v = self.fresh("m"), self.fresh("v")
            self.emit(f"for {m}, {v} in enumerate({name}({a})):")
            self.emit(f"    {acc} = {acc} + {v}")
            self.emit(f"    if {m} >= k:")
            self.emit("        break")
        else:
            self.defs.append([f"def {name}(t):", "    try:", "        yield t + 1", "        yield t + 2",
                              "    finally:", f"        OUT.append('{name} finally')"])
            it = self.fresh("it")
            self.emit(f"{it} = {name}({a})")
            self.new_tensor(f"next({it})", va.shape, deps)
            if roll == 2:
                self.emit(f"{it}.close()")
            else:
                e = self.fresh("e")
                self.emit("try:")
                self.emit(f"    {it}.throw(ValueError('thrown'))")
                self.emit(f"except ValueError as {e}:")
                self.emit(f"    OUT.append(str({e}))")
        self.families.add("generator_protocol")

    def s_context(self):
        r = self.rng
        tag = self.fresh("r")
        roll = r.randrange(3)
        if roll == 0:
            self.emit(f"with Recorder({tag!r}):")
        elif roll == 1:
            rec = self.fresh("rec")
            self.emit(f"with Recorder({tag!r}) as {rec}:")
            self.emit(f"    OUT.append({rec}.tag)")
        else:
            stack = self.fresh("stack")
            self.emit(f"with contextlib.ExitStack() as {stack}:")
            self.emit(f"    {stack}.enter_context(Recorder({tag!r}))")
            self.emit(f"    {stack}.callback(OUT.append, 'callback {tag}')")
        with self.nested(False):
            self.block()
        self.families.add("context_manager")

    def s_global(self):
        a = self.pick()
        va = self.lookup(a)
        self.emit(self.rng.choice(["OUT.append(bump(k))", "bump(1)", "STATE['total'] = bump(len(OUT))"]))
        if self.rng.random() < 0.5:
            self.new_tensor(f"{a} * TOTAL", va.shape, self.deps_of(va))
        self.families.add("global")

    def s_container(self):
        r = self.rng
        a = self.pick()
        va = self.lookup(a)
        same = [n for n, v in self.visible().items() if v.shape == va.shape and v.deps is not None]
        b = r.choice(same) if same else a
        vb = self.lookup(b)
        deps = self.deps_of(va, vb)
        roll = r.randrange(3)
        if roll == 0:
            lst = self.fresh("lst")
            self.emit(f"{lst} = [{a}, {b}]")
            self.emit(f"{lst}.append({a} * 2)")
            self.new_tensor(r.choice([f"torch.stack({lst}).sum(0)", f"sum({lst})",
                                      f"sum([v * i for i, v in enumerate({lst})])"]), va.shape, deps)
        elif roll == 1:
            d = self.fresh("d")
            self.emit(f"{d} = {{'p': {a}, 'q': {b}}}")
            self.emit(f"{d}['r'] = {d}['p'] + 1")
            if r.random() < 0.5:
                self.emit(f"{d}.pop('q')")
            self.new_tensor(f"sum({d}.values())", va.shape, deps)
            self.emit(f"OUT.append(sorted({d}))")
        else:
            tup = self.fresh("tup")
            self.emit(f"{tup} = ({a} * 1, {b} + 1)")
            self.new_tensor(f"{tup}[1] - {tup}[0]", va.shape, deps)
        self.families.add("container")

    def s_data_dependent(self):
        r = self.rng
        a = self.pick(lambda n, v: len(v.shape) >= 1)
        if a is None:
            return False
        va = self.lookup(a)
        roll = r.randrange(3)
        if roll == 0:
            idx = self.fresh("idx")
            self.emit(f"{idx} = int({a}.reshape(-1).argmax())")
            self.new_tensor(f"{a}.reshape(-1)[{idx}]", (), self.deps_of(va))
        elif roll == 1:
            self.emit(f"OUT.append({a}.tolist())")
        else:
            count = self.fresh("count")
            self.emit(f"{count} = int(({a} > 0).sum())")
            self.emit(f"for _ in range(min({count}, 3)):")
            with self.nested(True):
                self.block(size=1)
        self.families.add("data_dependent")

    def s_function(self):
        a = self.pick()
        va = self.lookup(a)
        self.new_tensor(f"Twice.apply({a})", va.shape, self.deps_of(va))
        self.families.add("autograd_function")
