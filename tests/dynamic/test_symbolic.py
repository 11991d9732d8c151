"""Dynamic shapes (issue 12): symbolic sizes from torch's ShapeEnv, each mode of ``dynamic=``, guards from the
entry snapshot. Every behavioural test is a parity test against eager across a sequence of shapes."""

import pytest
import torch

import stillframe
from stillframe.check.parity import assert_parity

SHAPES = [(3, 4), (5, 4), (6, 4), (7, 4), (9, 4), (11, 4), (13, 4), (17, 4)]


def sizes_in_python(x):
    n = x.shape[0]
    m = x.size(1)
    y = x.new_zeros(n * 2, m)
    z = torch.arange(n, dtype=x.dtype)
    if n > 2:
        return x.sum(0) + y.sum(0) + z.sum(), n * m + 1
    return x * 2, n


def args_of_shape(shapes, requires_grad=True):
    def make(i):
        return (torch.randn(shapes[i % len(shapes)], requires_grad=requires_grad),)
    return make


def test_dynamic_true_traces_once_for_eight_sizes():
    report = assert_parity(sizes_in_python, args_of_shape(SHAPES), calls=len(SHAPES),
                           compile_kwargs={"dynamic": True})
    entries = report.compiled.cache_entries()
    assert len(entries) == 1
    code = entries[0].graph_module.code
    assert "def forward(self, L_x_size_0, L_x_size_1, L_x)" in code  # the sizes are inputs, as torch.compile's
    assert stillframe.counters["traces"] == 1


def test_dynamic_true_guards_render_over_sources():
    cf = stillframe.compile(sizes_in_python, backend="eager", dynamic=True)
    cf(torch.randn(3, 4))
    source = cf.cache_entries()[0].guard_source
    assert "size()[0]" in source
    texts = [stillframe.guards.guard.describe(g) for g in cf.cache_entries()[0].guards if g.kind == "SHAPE"]
    assert "3 <= L['x'].size()[0]" in texts  # n > 2 was decided: the ShapeEnv guarded it
    assert cf(torch.randn(2, 4))[1] == 2  # the branch guard fails: a new trace takes the other branch
    assert len(cf.cache_entries()) == 2


def test_zero_and_one_sizes_get_their_own_entries():
    def f(x):
        return x + 1
    report = assert_parity(f, args_of_shape([(3, 4), (1, 4), (0, 4), (5, 4), (1, 4)]), calls=5,
                           compile_kwargs={"dynamic": True})
    assert len(report.compiled.cache_entries()) == 3


def test_automatic_dynamic_recompiles_once():
    def f(x):
        return x + 1
    report = assert_parity(f, args_of_shape([(2, 4), (3, 4), (4, 4), (5, 4)]), calls=4)
    entries = report.compiled.cache_entries()
    assert len(entries) == 2  # static first, then dynamic in dim 0: what torch.compile does
    assert stillframe.counters["graphs"] == 2


def test_dynamic_false_specializes_every_size():
    def f(x):
        return x + 1
    report = assert_parity(f, args_of_shape([(2, 4), (3, 4), (4, 4)]), calls=3, compile_kwargs={"dynamic": False})
    assert len(report.compiled.cache_entries()) == 3


def test_non_contiguous_input_after_a_contiguous_one():
    def f(x):
        return x.reshape(-1) * x.shape[1]

    def make(i):
        return (torch.randn(4, 6)[:, ::2] if i == 1 else torch.randn(3, 5),)
    report = assert_parity(f, make, calls=2, compile_kwargs={"dynamic": True})
    assert len(report.compiled.cache_entries()) == 2  # the stride guard failed for the strided view


def inplace_transpose(x):
    x.t_()
    return x * x.shape[0]


def test_t_on_a_dynamic_input_keeps_guards_passable():
    """The seed bug (PR #100128): guards must read the input's entry snapshot, not the fake t_() changed."""
    report = assert_parity(inplace_transpose, args_of_shape([(3, 4), (5, 6), (7, 2)], requires_grad=False),
                           calls=3, compile_kwargs={"dynamic": True})
    assert len(report.compiled.cache_entries()) == 1
    assert stillframe.counters["cache_hits"] == 2


def unsqueeze_in_place(x):
    x.unsqueeze_(0)
    return x.sum(-1) + x.shape[-1]


def test_unsqueeze_on_a_dynamic_input_keeps_guards_passable():
    report = assert_parity(unsqueeze_in_place, args_of_shape([(3, 4), (5, 6), (7, 5)], requires_grad=False),
                           calls=3, compile_kwargs={"dynamic": True})
    assert len(report.compiled.cache_entries()) == 1


def test_symbolic_size_crosses_a_graph_break():
    def f(x):
        n = x.shape[0] * 2
        print("break")
        return x.new_ones(n) * n
    report = assert_parity(f, args_of_shape([(3, 2), (5, 2), (6, 2)]), calls=3, compile_kwargs={"dynamic": True})
    assert report.warnings == []


def test_view_and_reshape_with_symbolic_sizes():
    def f(x):
        b, t = x.shape[0], x.shape[1]
        y = x.view(b * t)
        return y.reshape(t, b).transpose(0, 1).contiguous().view(x.shape) + x, b - t
    report = assert_parity(f, args_of_shape([(3, 4), (5, 6), (7, 2)]), calls=3, compile_kwargs={"dynamic": True})
    assert len(report.compiled.cache_entries()) == 1


def test_symbolic_arithmetic_errors_are_eager_errors():
    def f(x):
        return x * (x.shape[0] // (x.shape[1] - 4))
    assert_parity(f, args_of_shape([(3, 4)]), compile_kwargs={"dynamic": True}, expect_fallback=False)


def test_small_module_dynamic_batch():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    shapes = [(b, 8) for b in (2, 3, 5, 7, 8, 12)]
    report = assert_parity(model, args_of_shape(shapes), calls=len(shapes), backend="aot_eager")
    assert len(report.compiled.cache_entries()) == 2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_backends_compile_one_graph_for_every_size(backend):
    def f(x):
        return (x * x.shape[0]).sum(1)
    report = assert_parity(f, args_of_shape([(3, 4), (5, 4), (6, 4)], requires_grad=False), calls=3,
                           backend=backend, compile_kwargs={"dynamic": True}, rtol=1e-5, atol=1e-5)
    assert len(report.compiled.cache_entries()) == 1


def test_a_backend_sees_symbolic_placeholders_and_the_fake_mode():
    """As torch.compile hands them: one SymInt input per symbol first, then the tensors; real example tensors,
    SymInt examples for the symbols, and a TracingContext holding the fake mode of the placeholders."""
    seen = []

    def backend(gm, example_inputs):
        context = torch._guards.TracingContext.try_get()
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        seen.append(([type(n.meta["val"]) for n in placeholders], [type(e) for e in example_inputs],
                     context is not None and context.fake_mode is placeholders[-1].meta["val"].fake_mode))
        return gm.forward

    cf = stillframe.compile(lambda x: x + x.shape[0], backend=backend, dynamic=True)
    cf(torch.randn(3, 2))
    fake = torch._subclasses.fake_tensor.FakeTensor
    assert seen == [([torch.SymInt, torch.SymInt, fake], [torch.SymInt, torch.SymInt, torch.Tensor], True)]
    assert cf(torch.randn(5, 4)).shape == (5, 4) and len(cf.cache_entries()) == 1

def add_one(x):
    return x + 1


@pytest.mark.parametrize("mark", [stillframe.mark_dynamic, stillframe.maybe_mark_dynamic,
                                  torch._dynamo.mark_dynamic, torch._dynamo.maybe_mark_dynamic])
def test_markings_make_the_first_trace_dynamic(mark):
    def make(i):
        x = torch.randn(3 + i, 4)
        mark(x, 0)
        return (x,)
    report = assert_parity(add_one, make, calls=4, compile_kwargs={"dynamic": False})
    assert len(report.compiled.cache_entries()) == 1
    assert stillframe.counters["traces"] == 1


@pytest.mark.parametrize("mark", [stillframe.mark_static, torch._dynamo.mark_static])
def test_mark_static_wins_over_dynamic_true(mark):
    def make(i):
        x = torch.randn(3 + i, 4)
        mark(x, 0)
        return (x,)
    report = assert_parity(add_one, make, calls=3, compile_kwargs={"dynamic": True})
    assert len(report.compiled.cache_entries()) == 3


def scale(x, n):
    return x * n + torch.ones(n).sum()


def test_an_int_argument_that_changes_becomes_symbolic():
    report = assert_parity(scale, lambda i: (torch.randn(3), [2, 3, 4, 5, 7][i]), calls=5)
    entries = report.compiled.cache_entries()
    assert len(entries) == 2  # specialized on 2, then symbolic
    placeholders = [n for n in entries[1].graph_module.graph.nodes if n.op == "placeholder"]
    assert any(isinstance(n.meta["val"], torch.SymInt) for n in placeholders)
    assert "type(s1) is" in entries[1].guard_source or "is ___c" in entries[1].guard_source


def test_an_int_used_as_a_python_constant_is_specialized_and_guarded():
    def f(x, n):
        return [x * i for i in range(n)][-1]  # range() needs the value: each n is its own plan
    report = assert_parity(f, lambda i: (torch.randn(3), [2, 3, 4][i]), calls=3, compile_kwargs={"dynamic": True})
    assert len(report.compiled.cache_entries()) == 3


def test_torch_check_on_a_symbolic_size():
    def f(x):
        torch._check(x.shape[0] >= 2)
        return x.view(x.shape[0] // 2, -1) if x.shape[0] % 2 == 0 else x
    report = assert_parity(f, args_of_shape([(4, 3), (6, 3), (8, 3)]), calls=3, compile_kwargs={"dynamic": True})
    assert report.warnings == []


def break_in_the_middle(x):
    y = x * 2
    print("a graph break")
    return y.sum(0) + y.shape[0]


def test_code_after_a_graph_break_stays_dynamic():
    def make(i):
        x = torch.randn(3 + i, 2)
        stillframe.mark_dynamic(x, 0)
        return (x,)
    report = assert_parity(break_in_the_middle, make, calls=4, compile_kwargs={"dynamic": False})
    assert report.warnings == []
    entries = report.compiled.all_cache_entries()
    assert len(entries) == 2  # the function and the code after the break
    assert all(len(v) == 1 for v in entries.values()), {k: len(v) for k, v in entries.items()}


@pytest.mark.parametrize("op", [lambda x: x.nonzero().float().sum() + x.shape[0],
                                lambda x: x[x > 0].sum() * x.shape[0],
                                lambda x: torch.unique(x.round()).sum(),
                                lambda x: torch.zeros(int(x.sum().item() > 0) + x.shape[0]) + 1],
                         ids=["nonzero", "mask", "unique", "item"])
def test_data_dependent_sizes_break_the_graph_with_a_reason(op):
    report = assert_parity(op, args_of_shape([(4, 3), (6, 3), (5, 3)], requires_grad=False), calls=3,
                           compile_kwargs={"dynamic": True})
    assert report.warnings == []
    breaks = [e.graph_break for v in report.compiled.all_cache_entries().values() for e in v if e.graph_break]
    assert breaks and all(b.kind == "data_dependent" for b in breaks)


@pytest.mark.parametrize("mark", [stillframe.mark_dynamic, torch._dynamo.mark_dynamic])
def test_mark_dynamic_range_is_guarded(mark):
    def make(i):
        x = torch.randn((3, 5, 8, 20)[i], 2)
        mark(x, 0, min=2, max=8)
        return (x,)
    report = assert_parity(add_one, make, calls=4)
    entries = report.compiled.cache_entries()
    texts = [stillframe.guards.guard.describe(g) for g in entries[0].guards if g.kind == "SHAPE"]
    assert any("L['x'].size()[0] <= 8" in t for t in texts), texts
    assert len(entries) == 2  # 20 is outside the range: a plan of its own


def test_explain_shows_shape_guards_as_expressions_over_sources():
    explainer = stillframe.explain(sizes_in_python, dynamic=True)
    text = str(explainer(torch.randn(5, 4)))
    assert "3 <= L['x'].size()[0]" in text
    assert "L['x'] is a Tensor(dtype=torch.float32, device=cpu, shape=(?, ?)" in text


def test_the_recompile_says_which_dimension_became_dynamic():
    explainer = stillframe.explain(add_one)
    explainer(torch.randn(3, 4))
    report = explainer(torch.randn(5, 4))
    assert len(report.recompiles) == 1
    assert "symbolic from now on: L['x'].size()[0]: 3 -> 5" in str(report)


def size_and_sum(x):
    return (x * 2).sum(0) + x.shape[0]


@pytest.mark.parametrize("dynamic, entries", [(None, 2), (True, 1), (False, 8)])
def test_each_dynamic_mode_over_eight_sizes_compiles_as_torch_compile(dynamic, entries):
    """dynamic=None: static, then one symbolic entry reused for the 7 other sizes; True: one entry; False: one
    per size. torch.compile's graph count, measured in the same test, is the same."""
    from torch._dynamo.utils import counters as torch_counters

    sizes = [(n, 4) for n in (3, 5, 6, 7, 9, 11, 13, 17)]
    torch._dynamo.reset()
    torch_counters.clear()
    theirs = torch.compile(size_and_sum, backend="eager", dynamic=dynamic)
    for shape in sizes:
        x = torch.randn(shape)
        assert torch.equal(theirs(x), size_and_sum(x))
    torch._dynamo.reset()
    report = assert_parity(size_and_sum, args_of_shape(sizes), calls=len(sizes), compile_kwargs={"dynamic": dynamic})
    assert len(report.compiled.cache_entries()) == entries == torch_counters["stats"]["unique_graphs"]


def test_zero_and_one_sizes_get_their_own_entries_under_automatic_dynamic():
    """As torch.compile specializes 0 and 1: after the size became dynamic (3 -> 5), a size of 1 and a size of
    0 each get an entry of their own, reused when they come back."""
    report = assert_parity(size_and_sum, args_of_shape([(n, 4) for n in (3, 5, 1, 0, 7, 1, 0)]), calls=7)
    assert len(report.compiled.cache_entries()) == 4


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_view_of_an_input_transposed_in_place_with_symbolic_sizes(backend):
    """fuzz 34:766 with dynamic sizes: AOTAutograd made the returned view of y from y's geometry before its t_
    (strides and values of the untransposed y); on AOTAutograd backends a symbolic trace breaks at the t_ and runs
    it for real, as torch.compile does; the eager backend captures it."""
    def f(x, y, w):
        t3 = (x - w).pow(2)
        y.t_()
        return y.narrow(0, 0, 1), t3

    def make(i):
        n = (3, 4, 5)[i]
        return torch.randn(n, n), torch.randn(n, n), torch.randn(n, requires_grad=True)

    assert_parity(f, make, calls=3, backend=backend, compile_kwargs={"dynamic": True})


def scaled_then_transposed_in_place(x, w, k):
    t3 = x * (0 - k)  # saves nothing for backward (a scalar's mul), as its own eager op
    t7 = w @ t3  # saves t3
    print("a graph break")
    t3.t_()
    t3.sum().backward()  # eager's backward runs only the mul's node: the mm's saved t3 is never checked
    return t7


def scaled_twice_by_a_symbolic_int(x, w, k):
    s = 0 - k  # read by the op made apart and by the rest of the graph
    t3 = x * s
    t7 = (w @ t3) * s + x.size(0)
    print("a graph break")
    t3.t_()
    t3.sum().backward()
    return t7


@pytest.mark.parametrize("fn", [scaled_then_transposed_in_place, scaled_twice_by_a_symbolic_int])
@pytest.mark.parametrize("changing", ["int", "size", "dynamic=True"])
def test_ops_that_save_nothing_run_apart_in_a_symbolic_graph(fn, changing):
    # issue 11 (fuzz 61:72, 63:151): on a backend making one autograd node of a graph, the differentiable outputs
    # made by ops that save nothing run as eager ops before the rest (runtime/graph_parts.saving_free_prefix); a
    # symbolic graph (a changed int argument, a changed size, dynamic=True) kept t3 in the AOTAutograd node that
    # saved it for the mm, and a backward through t3 after t3.t_() raised "modified by an inplace operation"
    def make(i):
        n = 3 + i if changing == "size" else 3
        return torch.randn(n, n, requires_grad=True), torch.randn(n, requires_grad=True), \
            (1, 2, 3)[i] if changing == "int" else 2
    report = assert_parity(fn, make, backend="aot_eager", calls=3,
                           compile_kwargs={"dynamic": True} if changing == "dynamic=True" else None)
    assert report.warnings == []
    graphs = [entry.graph_module for entries in report.compiled.all_cache_entries().values() for entry in entries]
    assert any(isinstance(n.meta.get("val"), torch.SymInt) for gm in graphs for n in gm.graph.nodes)
