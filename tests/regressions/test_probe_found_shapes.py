"""Regressions found by parity probes of dynamic shapes, dict keys and torch's Python-level functions
(/work/probes/dyn, /work/probes/nn). Each is compared with eager on both backends."""

from __future__ import annotations

import collections
import math

import pytest
import torch

from stillframe.check.parity import assert_parity

BACKENDS = ["eager", "aot_eager"]
DYNAMIC = {"dynamic": True}


def _index_last(x, i):
    return x[i]


def _index_column(x, i):
    return x[:, i]


def _index_pair(x, i):
    return x[i, 0]


def _index_write(x, i):
    x = x.clone()
    x[i] = torch.ones(x.shape[1])
    return x


def _index_from(x, i):
    return x[i:]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_index_last, _index_column, _index_pair, _index_write, _index_from],
                         ids=lambda f: f.__name__)
def test_index_by_a_0_dim_integer_tensor_with_dynamic_shapes(fn, backend):
    # with symbolic shapes, torch's fake-tensor converter gives a 0-dim integer input a value (item_memo): the
    # trace put x[i] in the graph, where AOTAutograd's retrace (a new fake epoch, scalar outputs allowed for
    # while_loop) made i.item() an unbacked u0 it could not guard on: BackendCompilerFailed. Now the value is
    # hidden from ops for such backends, and the op breaks the graph, as with static shapes
    def make(n):
        return torch.randn(6 + n, 4), torch.tensor(3)

    assert_parity(fn, make, backend=backend, calls=3, compile_kwargs=DYNAMIC)
    assert_parity(fn, make, backend=backend, calls=3)  # automatic dynamic, from the second call


def test_index_by_a_0_dim_integer_tensor_on_inductor():
    assert_parity(_index_last, lambda n: (torch.arange(8.0 + n), torch.tensor(3)), backend="inductor", calls=2,
                  compile_kwargs=DYNAMIC)


def _size_from_a_0_dim_input(x, i):
    return x * x[i:].shape[0], int(i) + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_0_dim_input_value_is_not_taken_unguarded(backend):
    # torch 2.14 gives the fake of a 0-dim input its value (item_memo) when converted without a source: the trace
    # took x[i:]'s length and int(i) from the first call's i, with no guard on it, and later calls with another i
    # returned the first call's numbers (eager backend). The value is dropped now (compat.fake_static)
    assert_parity(_size_from_a_0_dim_input, lambda n: (torch.randn(6, 4), torch.tensor(3 - n)), backend=backend,
                  calls=3)


def _branch_on_a_slice_from_a_0_dim_input(x, i):
    if x[i:].shape[0] > 2:
        return x + 1
    return x - 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_branch_on_a_size_from_a_0_dim_input_value_with_dynamic_shapes(backend):
    # with symbolic shapes, the fake of a 0-dim input had a symbol for its value (item_memo) that no guard could
    # name: the branch on x[i:].shape[0] was taken from the first call's i with no guard (eager backend)
    sizes = [(6, 1), (7, 6), (8, 2), (7, 7)]
    assert_parity(_branch_on_a_slice_from_a_0_dim_input,
                  lambda n: (torch.randn(sizes[n][0], 4), torch.tensor(sizes[n][1])), backend=backend, calls=4,
                  compile_kwargs=DYNAMIC)


def _add_out(x, o):
    torch.add(x, 1, out=o)
    return o


def _add_out_returned(x, o):
    r = torch.cat([x, x], out=o)
    return r * 2, o.sum()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_add_out, _add_out_returned], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dynamic", [False, True])
def test_out_write_that_resizes_a_graph_input(fn, dynamic, backend):
    # eager resizes out= to the result's shape; AOTAutograd copied the new value back into the input with copy_,
    # which cannot resize it: BackendCompilerFailed "expand: the requested shape has too few dimensions". Such a
    # write now runs for real (an out of the right shape stays in the graph)
    assert_parity(fn, lambda n: (torch.randn(3 + n, 2), torch.empty(0)), backend=backend, calls=2,
                  compile_kwargs={"dynamic": dynamic})
    assert_parity(fn, lambda: (torch.randn(3, 2), torch.empty(6 if fn is _add_out_returned else 3, 2)),
                  backend=backend, calls=2, compile_kwargs={"dynamic": dynamic})


def _size_key_then_tuple(x):
    d = {x.shape: "size"}
    d[(3, 2)] = "tuple"  # the same key: torch.Size((3, 2)) == (3, 2), with equal hashes
    return len(d), type(next(iter(d))).__name__, d[x.shape], {(3, 2): 1}.get(x.shape)


def _equal_numbers_of_other_types(x):
    n = x.shape[1] - 1  # 1
    d = {n: "int"}
    d[True] = "bool"  # CPython keeps the first key object, with the new value
    e = dict([(n, "a"), (True, "b"), (1.0, "c")])
    f = {3.0: "v"}
    return (len(d), repr(d), repr(e), f.get(x.shape[0]), x.shape[0] in f, f[3], {n: 0, True: 1} == {1: 1},
            x * len({n: 0, True: 1}))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_size_key_then_tuple, _equal_numbers_of_other_types], ids=lambda f: f.__name__)
def test_dict_keys_match_by_hash_and_equality(fn, backend):
    # DictEntry.get / set matched a key only by a stored key of the same type (so {x.shape: 1} then d[(3, 2)] = 2
    # had two entries, {3.0: "v"}.get(3) was None); they now match as CPython does (hash and ==), keeping the
    # first key object
    assert_parity(fn, lambda: torch.randn(3, 2), backend=backend, calls=2)


def _float_text(x, s):
    return str(s), math.copysign(1.0, s), str(s * 2), str(-s)


def _float_text_after_compare(x, s):
    if s == 0.0:
        return str(-s)
    return str(s)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_float_text, _float_text_after_compare], ids=lambda f: f.__name__)
def test_dynamic_float_keeps_the_sign_of_zero(fn, backend):
    # after two values a float argument is symbolic; where Python needed its value the ShapeEnv's sympy value was
    # used, which has no -0.0 (str(s) was '0.0', copysign 1.0). Now the hint (the live float) is taken, and a
    # zero guards the sign of its inputs, so a plan traced for -0.0 does not serve 0.0 (nor the other way). No
    # tensor op reads s: a static float's guard (s == -0.0, guards/guard.py::_equals) still passes for 0.0
    values = [1.5, 2.5, -0.0, 0.0, -0.0, 0.0]
    assert_parity(fn, lambda i: (torch.ones(2), values[i]), backend=backend, calls=len(values))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", ["module", "functional"])
def test_embedding_bag_max_norm_renormalises_the_weight(form, backend):
    # max_norm makes embedding_bag renormalise the looked-up rows of its weight in place, which no rule said
    # (as F.embedding's does): InternalError "embedding_bag mutated a tensor stillframe did not know it writes",
    # and the forward ran eagerly with a warning. The weight is now among what it writes
    def make():
        torch.manual_seed(0)
        return torch.nn.EmbeddingBag(10, 4, mode="mean", max_norm=0.5), torch.tensor([[1, 2, 4], [5, 4, 3]])

    def functional(m, idx):
        out = torch.nn.functional.embedding_bag(idx, m.weight, None, 0.5)
        return out, m.weight.detach().clone()

    def module(m, idx):
        return m(idx), m.weight.detach().clone()

    assert_parity(module if form == "module" else functional, make, backend=backend, calls=2)


def _packed(n=0):
    torch.manual_seed(n)
    x = torch.randn(3, 2, 2)
    return (torch.nn.utils.rnn.pack_padded_sequence(x, torch.tensor([2, 3]), enforce_sorted=False),)


def _pad_packed(p):
    out, lengths = torch.nn.utils.rnn.pad_packed_sequence(p)
    return out * 2, lengths


def _gru_packed(seq):
    torch.manual_seed(0)
    rnn = torch.nn.GRU(4, 3, batch_first=True)
    out, h = rnn(torch.nn.utils.rnn.pack_padded_sequence(seq, torch.tensor([3, 2]), batch_first=True))
    return torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)[0], h


def _square_mask(t):
    return t + torch.nn.Transformer.generate_square_subsequent_mask(t.shape[0])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, make", [(_pad_packed, _packed), (_gru_packed, lambda: (torch.randn(2, 3, 4),)),
                                      (_square_mask, lambda: (torch.zeros(3, 3),))],
                         ids=["pad_packed", "gru_packed", "square_mask"])
def test_torch_python_functions_a_graph_cannot_call_are_traced_into(fn, make, backend):
    # every Python function of torch became an FX node: pad_packed_sequence's fake call got the PackedSequence
    # as a plain tuple ('tuple' object has no attribute 'batch_sizes'), and the node of the staticmethod
    # nn.Transformer.generate_square_subsequent_mask named a module attribute that does not exist (the graph
    # raised). Functions of torch.nn.utils.rnn, and those a graph cannot name (defined in a class), are traced into
    assert_parity(fn, make, backend=backend, calls=2)


def _equal_keys_everywhere(x):
    d = {1: "a", True: "b", 1.0: "c"}
    e = {"a": 1, "a": 2}  # noqa: F601 (a repeated key, as eager merges it)
    g = {1: "x", 2: "y"}
    popped = g.pop(True)
    h = {1: "x"}
    del h[1.0]
    o = collections.OrderedDict([(1, "a"), (2, "b")])
    o.move_to_end(True)
    return x + len(d), d, e, popped, g, h, list(o.items())


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_equal_keys_in_literals_and_removals(backend):
    # a constant-key literal kept repeated keys ({1: "a", True: "b"} had two entries), and pop / del / move_to_end
    # matched keys by type (g.pop(True) returned 1's value but left the entry)
    assert_parity(_equal_keys_everywhere, lambda i=0: (torch.ones(1) + i,), backend=backend, calls=2)


def _sign_of_a_zero(x, s):
    return x * s, str(s), math.copysign(1.0, s)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_static_float_guard_tells_the_sign_of_zero(backend):
    # a float specialized as -0.0 was guarded with `s == -0.0`, which 0.0 passes: the plan traced for -0.0 served
    # 0.0 (str(s) == "-0.0"). A zero is guarded with its sign now
    zeros = [-0.0, 0.0, -0.0]
    assert_parity(_sign_of_a_zero, lambda i: (torch.ones(2), zeros[i]), backend=backend, calls=3)


def _unused_index(x, i):
    x[i]
    return x * 2


def _unused_index_select(x, i):
    torch.index_select(x, 0, i)
    return x + 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_unused_index, _unused_index_select], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dynamic", [False, True])
def test_an_unused_index_op_still_raises_for_an_index_out_of_range(fn, dynamic, backend):
    # AOTAutograd dropped the unused op as dead, and eager's IndexError with it: the call returned. Such an op is
    # kept as an output of the graph now (runtime/compiler._keep_raising_ops)
    indexes = [[1], [7], [-9], [2]]
    assert_parity(fn, lambda n: (torch.randn(4 + n, 3), torch.tensor(indexes[n])), backend=backend, calls=4,
                  compile_kwargs={"dynamic": dynamic})
