"""More divergences found by running PyTorch's own Dynamo tests through stillframe (issue 16)."""

import functools
import sys
import typing

import pytest
import torch

import stillframe
from stillframe.check.parity import assert_parity


def storage_class_checks(x):
    s = torch.BoolStorage.from_buffer(bytearray([0, 1, 2, 3]), "big")
    return x + 1, isinstance(s, torch.BoolStorage), isinstance(s, torch.FloatStorage), isinstance(s, torch.TypedStorage)


def test_isinstance_of_a_storage_made_in_the_function():
    # was False: the class relation (TypedStorage is no subclass of BoolStorage) answered instead of the
    # metaclass, which compares the storage's dtype and device
    assert_parity(storage_class_checks, lambda: (torch.ones(2),), calls=2)


def storage_argument_checks(s, x):
    return x + 1, isinstance(s, torch.BoolStorage), isinstance(s, (torch.LongStorage, torch.FloatStorage))


@pytest.mark.parametrize("make_storage", [
    lambda: torch.BoolStorage(3),
    lambda: torch.TypedStorage(3, dtype=torch.bool),
    lambda: torch.TypedStorage(3, dtype=torch.float32),
    lambda: torch.TypedStorage(3, dtype=torch.int64),
    lambda: torch.ones(2).untyped_storage(),
])
def test_isinstance_of_a_storage_argument(make_storage):
    assert_parity(storage_argument_checks, lambda: (make_storage(), torch.ones(2)), calls=2, fullgraph=True)


def test_a_storage_of_another_dtype_is_checked_again():
    # the plan for a bool TypedStorage must not answer for a float one (its dtype is guarded)
    compiled = stillframe.compile(storage_argument_checks, backend="eager", fullgraph=True)
    for dtype in (torch.bool, torch.float32, torch.bool, torch.int64):
        s = torch.TypedStorage(3, dtype=dtype)
        assert compiled(s, torch.ones(2))[1:] == storage_argument_checks(s, torch.ones(2))[1:]


GLOBAL_TABLE = {"a": 1, "b": 2}


def dict_view_uses(x):
    e = {"a": x, "c": 3}
    k, v, it = e.keys(), e.values(), e.items()
    e["z"] = x * 2  # a view sees later writes
    total = x
    for _ in range(2):  # and is iterated again from the start
        for key in k:
            total = total + len(key)
    g = {"a": 1, "c": 3}
    return (total + len(k), list(v), sorted(k - GLOBAL_TABLE.keys()), sorted(k & {"a", "q"}),
            sorted(GLOBAL_TABLE.keys() | k), sorted(GLOBAL_TABLE.keys() ^ ["a", "x"]), ("c", 3) in g.items(),
            "z" in k, [a for a, _ in it], bool(k), bool({}.keys()), 3 in g.values(), tuple(reversed(k)),
            list(zip(GLOBAL_TABLE.keys(), GLOBAL_TABLE.values())))


def test_dict_views_are_live_sets_of_their_dict():
    # keys()/values()/items() were one-shot iterators: a second loop saw nothing, a later write was missed,
    # len() and `|` raised an internal error
    assert_parity(dict_view_uses, lambda: (torch.ones(2),), calls=2, fullgraph=True)


def returns_views(x):
    e = {"k": x + 1}
    return x + 1, e.keys(), GLOBAL_TABLE.items(), e.values()


def test_a_returned_dict_view_is_a_real_view_of_the_real_dict():
    compiled = stillframe.compile(returns_views, backend="eager", fullgraph=True)
    for fn in (returns_views, compiled):
        _, keys, items, values = fn(torch.ones(2))
        assert (type(keys), type(items), type(values)) == (type({}.keys()), type({}.items()), type({}.values()))
        assert list(keys) == ["k"] and list(items) == list(GLOBAL_TABLE.items())
        GLOBAL_TABLE["new"] = 3
        try:
            assert ("new", 3) in items  # a view of the global dict itself, not of a copy
        finally:
            del GLOBAL_TABLE["new"]


def view_across_a_break(x):
    e = {"a": x}
    k = e.keys()
    print("graph break")
    e["b"] = 2
    return x + len(k), sorted(k)


def test_a_dict_view_across_a_graph_break():
    assert_parity(view_across_a_break, lambda: (torch.ones(2),), calls=2)


def export_aware(x):
    return x + 1 if torch.onnx.is_in_onnx_export() else x - 1


def test_a_process_wide_query_is_folded_and_guarded():
    # is_in_onnx_export broke the graph (no rule); folding it without a guard would keep an old answer
    from torch.onnx._internal.torchscript_exporter._globals import GLOBALS

    compiled = stillframe.compile(export_aware, backend="eager", fullgraph=True)
    x = torch.ones(2)
    assert torch.equal(compiled(x), export_aware(x))
    GLOBALS.in_onnx_export = True
    try:
        assert torch.equal(compiled(x), x + 1) and torch.equal(export_aware(x), x + 1)
    finally:
        GLOBALS.in_onnx_export = False
    assert torch.equal(compiled(x), x - 1)


def autocast_dtype_query(x):
    return x.to(torch.get_autocast_dtype("cpu")), x.to(torch.get_autocast_gpu_dtype())


def process_group_query(x):
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return x * 2
    return x + 3


@pytest.mark.parametrize("fn", [autocast_dtype_query, process_group_query], ids=lambda f: f.__name__)
def test_queries_of_process_wide_state_are_captured(fn):
    assert_parity(fn, lambda: (torch.ones(2),), calls=2, fullgraph=True)


def test_a_changed_cuda_autocast_dtype_is_seen():
    compiled = stillframe.compile(autocast_dtype_query, backend="eager", fullgraph=True)
    before = torch.get_autocast_dtype("cuda")
    x = torch.ones(2)
    assert compiled(x)[1].dtype == before
    torch.set_autocast_dtype("cuda", torch.bfloat16 if before != torch.bfloat16 else torch.float16)
    try:
        assert compiled(x)[1].dtype == torch.get_autocast_dtype("cuda") != before
    finally:
        torch.set_autocast_dtype("cuda", before)


def cuda_autocast_flag(x):
    return x + 1 if torch.is_autocast_enabled() else x - 1  # no argument: the CUDA autocast state


def test_the_cuda_autocast_flag_is_guarded():
    # it was folded as a pure query with no guard: a plan made with it off kept answering False
    compiled = stillframe.compile(cuda_autocast_flag, backend="eager", fullgraph=True)
    x = torch.ones(2)
    assert torch.equal(compiled(x), cuda_autocast_flag(x))
    torch.set_autocast_enabled("cuda", True)
    try:
        assert torch.equal(compiled(x), x + 1) and torch.equal(cuda_autocast_flag(x), x + 1)
    finally:
        torch.set_autocast_enabled("cuda", False)
    assert torch.equal(compiled(x), x - 1)


class Pair(typing.NamedTuple):
    first: torch.Tensor
    second: torch.Tensor

    def add(self):
        return self.first + self.second

    @staticmethod
    def one():
        return 1

    @classmethod
    def name(cls):
        return cls.__name__


class Triple(Pair):
    def add(self):
        return super().add() * 2


def named_tuple_methods(a, b):
    p = Pair(a, b)
    return p.add(), p.one(), p.name(), Pair.one(), p._fields, Triple(a, b).add(), len(sys.intern("ab" + "c"))


def test_methods_written_in_a_named_tuple_class_are_traced():
    # p.add() was an unsupported call (only tuple's own methods were known)
    assert_parity(named_tuple_methods, lambda: (torch.ones(2), torch.randn(2)), calls=2, fullgraph=True)


def make_text_of_a_closure():
    def another_fn():
        pass

    def fn(x):
        return x + 1, "another_fn" in str(another_fn), str(another_fn), repr(another_fn)

    return fn


def calls_its_argument(x, fn):
    return fn(x)


def test_str_of_a_function_names_that_function():
    # str(fn) was an unsupported builtin; two closures of one code have different text (their addresses), so
    # the text is guarded by the function's identity, not only by its code
    compiled = stillframe.compile(calls_its_argument, backend="eager", fullgraph=True)
    for fn in (make_text_of_a_closure(), make_text_of_a_closure()):
        assert compiled(torch.ones(2), fn)[1:] == fn(torch.ones(2))[1:]


def legacy_type_conversions(a, b):
    half = a.type(torch.HalfTensor)
    return half, b.type(half.type()), a.type(dtype=torch.DoubleTensor), a.type(torch.LongTensor).type()


def test_tensor_type_with_a_legacy_tensor_class():
    # a.type(torch.HalfTensor) refused the class as an argument (it is Tensor.type's, like its name)
    assert_parity(legacy_type_conversions, lambda: (torch.randn(3), torch.randn(2)), calls=2, fullgraph=True)


class Shape:
    pass


class Square(Shape):
    pass


def subclasses_called(x):
    subs = Shape.__subclasses__()
    return x + len(subs), subs, [c.__subclasses__() for c in subs]


def test_subclasses_of_a_class_are_listed_and_guarded():
    # Shape.__subclasses__() was an unsupported call; a class made later must be seen by the next call
    compiled = stillframe.compile(subclasses_called, backend="eager", fullgraph=True)
    assert_parity(subclasses_called, lambda: (torch.ones(2),), calls=2, fullgraph=True)
    compiled(torch.ones(2))

    class Circle(Shape):
        pass

    result = compiled(torch.ones(2))
    assert result[1] == [Square, Circle] and torch.equal(result[0], torch.ones(2) + 2)
    assert subclasses_called(torch.ones(2))[1:] == result[1:]


class AliasingModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_parameter("a", torch.nn.Parameter(torch.ones(4) * 2))
        self.lin = torch.nn.Linear(4, 4)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)  # nn.Module's registries first
        except AttributeError:
            if name == "a_copy":
                return self.a
            if name == "anything":
                return 7
            raise

    def forward(self, x):
        return self.lin(x) * self.a * self.a_copy + self.anything


def test_a_module_with_its_own_getattr():
    # "Foo defines __getattr__" was unsupported; and looking for a compiled wrapper's original function ran the
    # class's __getattr__ for real, which answers every name (the module was then called as `7`)
    assert_parity(AliasingModule(), lambda: (torch.randn(4),), calls=2, fullgraph=True)


SUPPORTED_FUNCTIONS = frozenset([torch.add, torch.sub, "name", 3])


def membership_in_a_frozenset(x, func):
    if func in SUPPORTED_FUNCTIONS:
        x = func(x, 1.0)
    return torch.mul(x, 2.0), "name" in SUPPORTED_FUNCTIONS, len(SUPPORTED_FUNCTIONS)


@pytest.mark.parametrize("func", [torch.add, torch.mul], ids=["member", "not-member"])
def test_membership_in_a_global_frozenset_of_functions(func):
    # the frozenset was needed as a constant but only its type was known (not_constant)
    assert_parity(membership_in_a_frozenset, lambda: (torch.randn(2), func), calls=2, fullgraph=True)


def test_a_changed_global_frozenset_is_seen():
    global SUPPORTED_FUNCTIONS
    compiled = stillframe.compile(membership_in_a_frozenset, backend="eager", fullgraph=True)
    saved = SUPPORTED_FUNCTIONS
    x = torch.ones(2)
    assert torch.equal(compiled(x, torch.mul)[0], x * 2)
    SUPPORTED_FUNCTIONS = frozenset([torch.mul])
    try:
        assert torch.equal(compiled(x, torch.mul)[0], x * 2) and compiled(x, torch.mul)[1:] == (False, 1)
    finally:
        SUPPORTED_FUNCTIONS = saved


def two_inputs(a, b):
    return torch.sin(a) + torch.cos(b)


def checks_keyword_names(**kwargs):
    import inspect

    accepted = set(inspect.signature(two_inputs).parameters)
    unused = [k for k, v in kwargs.items() if v is not None and k not in accepted]
    if unused:
        raise ValueError(f"unused: {unused}")
    return two_inputs(**kwargs), sorted(accepted), list(inspect.signature(two_inputs).parameters)


def test_the_parameter_names_of_a_signature_are_iterated():
    # iterating inspect.signature(f).parameters (a mappingproxy) was unsupported
    assert_parity(lambda a, b: checks_keyword_names(a=a, b=b), lambda: (torch.randn(3), torch.randn(3)), calls=2,
                  fullgraph=True)
    assert_parity(lambda a, b: checks_keyword_names(a=a, c=b), lambda: (torch.randn(3), torch.randn(3)), calls=2)


def descriptor_get(g, x):
    return g.__get__(x), x + 1


@pytest.mark.parametrize("descriptor", [torch.Tensor.shape, torch.Tensor.requires_grad, torch.Tensor.T],
                         ids=["shape", "requires_grad", "T"])
def test_a_tensor_attribute_descriptor_called_directly(descriptor):
    # torch.Tensor.shape.__get__(x) was an unsupported descriptor
    assert_parity(descriptor_get, lambda: (descriptor, torch.randn(2, 3)), calls=2, fullgraph=True)


def test_another_descriptor_is_traced_again():
    compiled = stillframe.compile(descriptor_get, backend="eager", fullgraph=True)
    x = torch.randn(2, 3)
    assert compiled(torch.Tensor.shape, x)[0] == (2, 3)
    assert compiled(torch.Tensor.T, x)[0].shape == (3, 2)


@pytest.mark.parametrize("fn", [torch.sin, torch.Tensor.add, torch.relu], ids=["sin", "add", "relu"])
def test_compiling_a_torch_function_itself(fn):
    # stillframe.compile(torch.sin) raised TypeError (torch.compile accepts it and captures one op)
    make_args = (lambda: (torch.randn(3), torch.randn(3))) if fn is torch.Tensor.add else (lambda: (torch.randn(3),))
    assert_parity(fn, make_args, calls=2, compiled=stillframe.compile(fn, backend="eager", fullgraph=True))


class _Shift:
    """A callable object: ``shift(x) = x - k``."""

    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return x - self.k


def _scaled(x, k, *, bias=0.0):
    return x * k + bias


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("kind", ["partial", "callable_object"])
def test_compiling_a_partial_or_a_callable_object(kind, backend):
    # stillframe.compile(functools.partial(f, ...)) and stillframe.compile(obj) for an object with __call__
    # raised TypeError ("expects a Python function"); torch.compile accepts any callable
    fn = functools.partial(_scaled, k=3, bias=1.0) if kind == "partial" else _Shift(2)
    compiled = stillframe.compile(fn, backend=backend, fullgraph=True)
    assert_parity(fn, lambda: (torch.randn(3, requires_grad=True),), calls=2, compiled=compiled)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), torch.compile(fn, backend=backend)(x))
    assert compiled.cache_entries()[0].graph_module is not None


T = typing.TypeVar("T")


def annotated_with_a_type_variable(x):
    def total(y: torch.Tensor) -> torch.Tensor:
        return torch.sum(y)

    def apply(c: typing.Callable[[T], T], y: T) -> T:
        return c(y)

    return apply(total, x), typing.List[T]


def test_a_type_variable_in_an_annotation():
    # typing.Callable[[T], T] needed the TypeVar as a constant, and it was only type-guarded
    assert_parity(annotated_with_a_type_variable, lambda: (torch.randn(3),), calls=2, fullgraph=True)
