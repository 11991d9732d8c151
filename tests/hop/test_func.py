"""``torch.func`` transforms captured (issue 13): vmap (nested, in_dims, in_dims=None, out_dims), grad,
grad_and_value, jacrev, jacfwd and per-sample gradients are one graph, with eager's values and gradients
(including gradients through the transform); what cannot be captured runs for real."""

import pytest
import torch
from torch.func import vmap

from stillframe.check.parity import assert_parity
from stillframe.rules.func_transforms import apply_to_graph

from .func_programs import PROGRAMS, functional


def entries(report):
    return [e for es in report.compiled.all_cache_entries().values() for e in es]


def transforms(report):
    return [n for e in entries(report) if e.graph_module is not None for n in e.graph_module.graph.nodes
            if n.target is apply_to_graph]


def requiring_grad(make):
    return lambda: tuple(a.detach().requires_grad_(a.is_floating_point()) if isinstance(a, torch.Tensor) else a
                         for a in make())


CAPTURED = list(PROGRAMS)


@pytest.mark.parametrize("fn", CAPTURED, ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_transform_is_one_graph_with_eager_values_and_gradients(fn, backend):
    report = assert_parity(fn, requiring_grad(PROGRAMS[fn]), calls=2, backend=backend)
    assert [e.graph_break for e in entries(report)] == [None], report.format()
    assert bool(transforms(report)) == (fn is not functional)  # functional_call is inlined


def test_torch_compile_also_captures_one_graph():
    """The graph counts next to torch.compile's for the same programs (it captures each in one graph)."""
    for fn in CAPTURED:
        graphs = []

        def backend(gm, example_inputs):
            graphs.append(gm)
            return gm.forward

        torch._dynamo.reset()
        torch.compile(fn, backend=backend)(*PROGRAMS[fn]())
        report = assert_parity(fn, PROGRAMS[fn])
        assert len(graphs) == len(entries(report)) == 1, fn.__name__


def test_nested_vmap_nests_subgraphs():
    from .func_programs import vmap_nested

    report = assert_parity(vmap_nested, PROGRAMS[vmap_nested])
    (outer,) = transforms(report)
    inner_gm = getattr(entries(report)[0].graph_module, outer.args[2].target)
    assert [n for n in inner_gm.graph.nodes if n.target is apply_to_graph]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))

    def forward(self, x):
        return self.body(x).tanh()


class Inner(torch.nn.Module):
    """One inner step of MAML: a functional call with updated weights, then the module as it is."""

    def __init__(self):
        super().__init__()
        self.net = Net().eval()

    def forward(self, x):
        params = dict(self.net.named_parameters())
        loss = self.net(x).pow(2).sum()
        updated = {k: v - 0.1 * v.sin() for k, v in params.items() if k.endswith("weight")}
        updated["body.1.running_mean"] = torch.ones(4)
        adapted = torch.func.functional_call(self.net, updated, (x,))
        return adapted.sum() + loss + self.net(x).mean()


def test_functional_call_reads_the_given_tensors_and_restores_the_module():
    report = assert_parity(Inner(), lambda: (torch.randn(5, 3, requires_grad=True),), calls=2)
    compiled = report.compiled.__dict__["_compiled_forward"]
    assert [e.graph_break for es in compiled.all_cache_entries().values() for e in es] == [None]


LINEAR = torch.nn.Linear(3, 2)


def missing_key(x, weight):
    return torch.func.functional_call(LINEAR, {"nope": weight}, (x,))


def strict(x, weight):
    return torch.func.functional_call(LINEAR, {"weight": weight}, (x,), strict=True)


WEIGHT = LINEAR.weight


class ReadsAlias(torch.nn.Module):
    """Reads the weight through the module (replaced) and through a reference held elsewhere (not replaced)."""

    def __init__(self):
        super().__init__()
        self.seq = torch.nn.Sequential(LINEAR)

    def forward(self, x):
        return self.seq[0](x) + WEIGHT.sum() + self.seq._modules["0"].weight.sum()


ALIASED = ReadsAlias()


def reads_by_other_paths(x, weight):
    before = WEIGHT.sum() + ALIASED.seq[0].weight.sum()  # read first, by the names functional_call does not use
    return torch.func.functional_call(ALIASED, {"seq.0.weight": weight}, (x,)) + before


def reads_by_other_paths_first_inside(x, weight):
    return torch.func.functional_call(ALIASED, {"seq.0.weight": weight}, (x,))


class ReadsRegistry(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = LINEAR

    def forward(self, x):
        return self.lin(x) * self.lin._parameters["weight"].sum()  # a path the trace has no name for


REGISTRY = ReadsRegistry()


def reads_the_registry(x, weight):
    return torch.func.functional_call(REGISTRY, {"lin.weight": weight}, (x,))


def reads_the_registry_after(x, weight):
    return WEIGHT.sum() + torch.func.functional_call(REGISTRY, {"lin.weight": weight}, (x,))


@pytest.mark.parametrize("fn", [reads_by_other_paths, reads_by_other_paths_first_inside, reads_the_registry,
                                reads_the_registry_after], ids=lambda f: f.__name__)
def test_functional_call_replaces_members_read_through_the_module_only(fn):
    """Whatever paths reach the weight, the values are eager's (captured, or run for real)."""
    assert_parity(fn, lambda: (torch.randn(4, 3), torch.randn(2, 3, requires_grad=True)), calls=2)


@pytest.mark.parametrize("fn", [missing_key, strict], ids=lambda f: f.__name__)
def test_functional_call_it_cannot_model_runs_for_real(fn):
    report = assert_parity(fn, lambda: (torch.randn(4, 3), torch.randn(2, 3)))
    assert [e.graph_break.kind for e in entries(report) if e.graph_break] == ["higher_order"]


made_outside = vmap(lambda a: a.sin() * 2)


def transform_made_outside(x):
    return made_outside(x) + 1


LOG = []


def logs(a):
    LOG.append(1)
    return a * 2


def effect_in_vmap(x):
    return vmap(logs)(x)


def random_in_vmap(x):
    return vmap(lambda a: a + torch.rand(()))(x)


def bad_in_dims(x):
    return vmap(lambda a: a * 2, in_dims=3)(x)


@pytest.mark.parametrize("fn", [transform_made_outside, effect_in_vmap, random_in_vmap, bad_in_dims],
                         ids=lambda f: f.__name__)
def test_what_cannot_be_captured_has_eager_values_or_errors(fn):
    LOG.clear()
    report = assert_parity(fn, lambda: (torch.randn(4, 3),), calls=2)
    assert "higher_order" in [e.graph_break.kind for e in entries(report) if e.graph_break]
