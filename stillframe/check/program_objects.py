"""Statements of generated programs about Python's object model and runtime (see :mod:`.programs`).

User objects (a class with ``__slots__``, a method with a side effect, a property, computed attribute names,
``hasattr``), exception chaining (``raise ... from``, ``__cause__``, ``__context__``), random numbers and the
RNG state, the generator protocol (``send``, ``throw``, ``close``, an infinite generator left by ``break``),
context managers (a user ``__enter__``/``__exit__``, ``contextlib.ExitStack``), a module global written through
``global``, local lists and dicts of tensors, Python values read out of tensors, and ``autograd.Function``;
locals named as the compiler's own names are, ``locals()``/``vars()``, a data descriptor and a property setter,
a break inside an ``except`` block then a bare ``raise``, and exceptions kept as values (notes, ``args``,
identity). The classes they use are defined in every program's header (:data:`.program_writer.HEADER`).
"""

from __future__ import annotations
from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)

from .program_writer import WriterBase


class ObjectStatements(WriterBase):
    """One ``s_*`` method per family; each returns ``False`` when nothing visible fits it."""

    def s_object(self):
        r = self.rng
        a = self.pick()
        va = self.lookup(a)
        roll = r.randrange(6)
        if roll == 5:
            self.new_tensor(f"CHILD.scale({a})", va.shape, self.deps_of(va))  # zero-argument super()
        elif roll == 0:
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
            for line in r.choice(["OUT.append(getattr(OBJ, 'missing', None) is None)",
                                  "OUT.append(type(OBJ).__name__)",
                                  "OUT.append(sorted(vars(OBJ)))",
                                  "if hasattr(OBJ, 'last'):\n    del OBJ.last"]).splitlines():
                self.emit(line)
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
            self.new_tensor(self.rng.choice([f"{a} * TOTAL", f"{a} * math.sqrt(k)"]), va.shape, self.deps_of(va))
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

    # ------------------------------------------------------------ names, frames and exceptions as objects

    def s_internal_name(self):
        """A local named as the compiler's own names are (guard and resume code: ``L``, ``G``, ``___stack0``,
        shape symbols ``s0``), holding an int or a tensor that later statements use, across a break."""
        r = self.rng
        free = [n for n in INTERNAL_NAMES if n not in self.taken]
        if not free:
            return False
        name = r.choice(free)
        self.taken.add(name)
        a = self.pick()
        va = self.lookup(a)
        if r.random() < 0.5:
            self.emit(f"{name} = " + r.choice(["k * 3 + len(OUT)", "len(STATE) + k", "OBJ.count - k", "k"]))
            if r.random() < 0.6:
                self.emit(self.breaker())
            use = r.randrange(3)
            if use == 0:
                self.emit(f"OUT.append(({name!r}, {name}))")
            elif use == 1:
                self.new_tensor(f"{a} * {name}", va.shape, self.deps_of(va))
            else:
                self.emit(f"{name} += 1")
                self.emit(f"STATE[{name!r}] = {name}")
        else:  # a tensor: bound as any other, so later statements read and write it
            self.new_tensor(r.choice(["{a} * 2", "{a} + 1", "{a}.sin()", "{a}.clone()"]).format(a=a), va.shape,
                            self.deps_of(va), name=name)
            if r.random() < 0.6:
                self.emit(self.breaker())
                self.new_tensor(f"{name} - {a}", va.shape, self.deps_of(va))
        self.families.add("internal_name")

    def s_locals(self):
        """``locals()`` / ``vars()`` read into ``OUT``: exactly eager's names (and values), after a break too."""
        r = self.rng
        roll = r.randrange(6)
        if roll == 0:
            self.emit("OUT.append(sorted(n for n in locals() if not n.startswith('_')))")
        elif roll == 1:
            self.emit("OUT.append(sorted(vars()))")
        elif roll == 2:
            self.emit("OUT.append({n: v for n, v in sorted(locals().items()) if isinstance(v, (int, torch.Tensor))})")
        elif roll == 3:
            names = list(self.visible()) + [f"t{j}" for j in range(1, self.counter + 1)]
            name = r.choice(names)
            self.emit(f"OUT.append(({name!r} in locals(), {name!r} in vars()))")
        else:
            snap = self.fresh("loc")
            # a copy: on 3.11/3.12 locals() is one dict per frame that each later locals() refreshes in place, which
            # stillframe does not model (test_locals_is_one_dict_per_frame_refreshed_by_each_call)
            self.emit(f"{snap} = dict(locals())")
            self.emit(f"OUT.append(len({snap}))")
            self.emit(self.breaker())
            if r.random() < 0.5:
                a = self.pick()
                self.new_tensor(f"{a} * 2", self.lookup(a).shape, self.deps_of(self.lookup(a)))
            if roll == 4:
                self.emit(f"OUT.append(sorted({snap}))")  # the snapshot as it was (or as a later locals() made it)
            else:
                self.emit(f"OUT.append(sorted(locals()) == sorted({snap}))")
            self.emit(f"del {snap}")
        self.families.add("locals")

    def s_descriptor(self):
        """A data descriptor (``Logged``, logging to ``OUT``) and a property with a setter (``Holder.w``), read,
        written and deleted; on a local ``Holder`` (tensors) and on the global ``HOLD`` (ints: they outlive the
        call)."""
        r = self.rng
        a = self.pick()
        va = self.lookup(a)
        roll = r.randrange(4)
        if roll == 2:
            self.emit(r.choice(["HOLD.gain = HOLD.gain + k", "HOLD.gain += k", "HOLD.w = k", "HOLD.level = len(OUT)",
                                "del HOLD.level"]))
            if r.random() < 0.5:
                self.emit(self.breaker())
            self.emit(r.choice(["OUT.append((HOLD.gain, HOLD.w))", "OUT.append(HOLD.level)",
                                "OUT.append((type(Holder.gain).__name__, Holder.gain.name))",
                                "OUT.append(sorted(vars(HOLD)))"]))
            self.families.add("descriptor")
            return
        hd = self.fresh("hd")
        self.emit(f"{hd} = Holder(k)")
        if roll == 0:
            self.emit(f"{hd}.level = {a}")
            if r.random() < 0.5:
                self.emit(self.breaker())
            self.new_tensor(f"{hd}.level * 2", va.shape, self.deps_of(va))
            self.emit(f"OUT.append(sorted(vars({hd})))")
        elif roll == 1:
            self.emit(f"{hd}.w = {a}")
            if r.random() < 0.5:
                self.emit(self.breaker())
            self.new_tensor(f"{hd}.w + 1", va.shape, self.deps_of(va))
            self.emit(f"OUT.append(({hd}._w is {hd}.w, {hd}.level))")
        else:
            self.emit(f"{hd}.__dict__['gain'] = {a}")  # a data descriptor wins over the instance dict
            self.new_tensor(f"{hd}.gain + 1", va.shape, self.deps_of(va))
            if r.random() < 0.5:
                self.emit(self.breaker())
            self.emit(f"del {hd}.gain")
            self.emit(f"OUT.append(({hd}.gain, sorted(vars({hd}))))")
            e = self.fresh("e")
            self.emit("try:")
            self.emit(f"    del {hd}.w")
            self.emit(f"except AttributeError as {e}:")
            self.emit(f"    OUT.append(str({e}))")
        self.families.add("descriptor")

    def s_except_break(self):
        """A break inside an ``except`` block, ``sys.exc_info()`` read after it, then a bare ``raise`` caught by an
        outer ``try`` (and, at the top of ``f``, sometimes let out of the call)."""
        r = self.rng
        t = self.pick()
        inner, outer = self.fresh("e"), self.fresh("e")
        kind = r.randrange(3)
        if kind == 2 and self.lookup(t).shape:
            raise_line, exc = f"OUT.append({t}[9])", "IndexError"
        elif kind == 1:
            raise_line, exc = "STATE['missing ' + str(k)]", "KeyError"
        else:
            raise_line, exc = "raise KeyError('inner ' + str(k))", "KeyError"
        self.emit("try:")
        with self.nested(True):
            self.emit("try:")
            with self.nested(True):
                self.emit(raise_line)
            self.emit(f"except {exc} as {inner}:")
            with self.nested(True):
                self.emit("OUT.append(sys.exc_info()[0].__name__)")
                self.emit(self.breaker())
                if r.random() < 0.3:
                    self.block(size=1)
                self.emit(r.choice(["OUT.append((sys.exc_info()[0].__name__, str(sys.exc_info()[1])))",
                                    f"OUT.append(sys.exc_info()[1] is {inner})"]))
                self.emit(r.choice(["raise", "raise", f"raise {inner}"]))
        self.emit(f"except {exc} as {outer}:")
        with self.nested(True):
            self.emit(f"OUT.append((type({outer}).__name__, str({outer}), {outer}.__context__ is None))")
            if r.random() < 0.4:
                self.emit(self.breaker())
            self.emit("OUT.append(sys.exc_info()[0].__name__)")
            if len(self.scopes) == 2 and self.fn_depth == 0 and r.random() < 0.15:
                self.emit("if k == 3:")
                self.emit("    raise")
        self.emit("OUT.append(sys.exc_info()[0] is None)")
        self.families.add("except_break")

    def s_exception_object(self):
        """Exceptions as values: stored in ``OUT`` (compared by identity, attributes and ``__notes__``), their
        ``args``, notes, traceback, a ``raise ... from`` caught outside, and the name unbound after the handler."""
        r = self.rng
        t = self.pick()
        e, e2 = self.fresh("e"), self.fresh("e")
        roll = r.randrange(4)
        if roll == 0:
            self.emit("try:")
            self.emit("    raise ValueError('bad ' + str(k), k)")
            self.emit(f"except ValueError as {e}:")
            with self.nested(True):
                self.emit(f"{e}.add_note('note ' + str(k))")
                if r.random() < 0.6:
                    self.emit(self.breaker())
                self.emit(f"{e}.add_note('after')")
                if r.random() < 0.4:
                    self.emit(f"{e}.extra = len(OUT)")
                self.emit(f"OUT.append({e})")
                self.emit(f"OUT.append(({e}.args, {e}.__notes__, {e}.__traceback__ is not None, str({e})))")
            self.emit(f"OUT.append({e!r} in locals())")  # the handler unbinds it
        elif roll == 1:
            err = self.fresh("err")
            self.emit(f"{err} = KeyError('stored ' + str(k))")
            self.emit(f"OUT.append({err})")
            self.emit("try:")
            self.emit(f"    raise {err}")
            self.emit(f"except KeyError as {e}:")
            with self.nested(True):
                if r.random() < 0.6:
                    self.emit(self.breaker())
                self.emit(f"OUT.append(({e} is {err}, {e}.args))")
            # identity across calls: the exceptions of earlier calls are other objects
            self.emit(f"OUT.append([o is {err} for o in OUT if isinstance(o, BaseException)])")
        else:
            first = f"OUT.append({t}[9])" if self.lookup(t).shape and roll == 2 else "raise IndexError(k)"
            how = r.choice(["from {e}", "", "from None"]).format(e=e)
            self.emit("try:")
            with self.nested(True):
                self.emit("try:")
                self.emit(f"    {first}")
                self.emit(f"except IndexError as {e}:")
                with self.nested(True):
                    if r.random() < 0.6:
                        self.emit(self.breaker())
                    self.emit(f"raise RuntimeError('wrapped ' + str(k)) {how}".rstrip())
            self.emit(f"except RuntimeError as {e2}:")
            with self.nested(True):
                self.emit(f"OUT.append((str({e2}), type({e2}.__cause__).__name__, str({e2}.__cause__), "
                          f"{e2}.__cause__ is {e2}.__context__, {e2}.__suppress_context__))")
                self.emit(f"OUT.append({e2}.__context__)")
                self.emit(f"OUT.append({e2})")
        self.families.add("exception_object")


#: locals named as stillframe's generated code and guards name things (a program may use any name)
INTERNAL_NAMES = ("s0", "s1", "s2", "L", "G", "___x", "___stack0", "___in", "___out", "___t0", "___c", "self", "cls")
