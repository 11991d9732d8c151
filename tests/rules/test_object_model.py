"""Python's object model where a stale plan or a shortcut gave a silent wrong answer (issue 16): attributes that
appear after the first call, instance attributes that shadow the class, rich comparisons through ``__eq__``,
metaclass ``__instancecheck__``, a module's own ``__call__``, ``isinstance``'s argument errors.

Each test changes the live objects between calls (``make_args`` receives the call index), so a plan traced on
the first call must notice the change on a later one, exactly as eager does.
"""

import collections
import functools

import torch

import stillframe
from stillframe.check.parity import assert_parity
from stillframe.rules.disable import disable


@disable
def graph_break():
    """Runs for real: what follows resumes after a graph break."""


class Config:
    pass


CONFIG = Config()


def scaled_by_optional_setting(x):
    return x * getattr(CONFIG, "scale", 1) + hasattr(CONFIG, "shift")


def config_args(i):
    for name in ("scale", "shift"):
        CONFIG.__dict__.pop(name, None)
    if i >= 1:
        CONFIG.scale = 5
    if i >= 2:
        CONFIG.shift = 1
    return (torch.ones(2),)


def test_an_attribute_added_after_the_first_call_is_seen():
    assert_parity(scaled_by_optional_setting, config_args, calls=4)


TAGGED = torch.ones(2)


def tagged_tensor(x):
    return x + (TAGGED.tag if hasattr(TAGGED, "tag") else 0)


def tag_args(i):
    TAGGED.__dict__.pop("tag", None)
    if i % 2:
        TAGGED.tag = 3
    return (torch.ones(2),)


def test_hasattr_and_attributes_of_a_tensor_follow_its_own_dict():
    assert_parity(tagged_tensor, tag_args, calls=4)


class Scaler(torch.nn.Module):
    def forward(self, x):
        return x * 2

    def helper(self, x):
        return x + 1


SCALER = Scaler()


def module_call_and_method(x):
    return SCALER(x), SCALER.helper(x)


def patch_args(i):
    SCALER.__dict__.pop("forward", None)
    SCALER.__dict__.pop("helper", None)
    if i == 1:
        SCALER.forward = lambda x: x * 7
    if i == 2:
        SCALER.helper = lambda x: x - 100
    return (torch.randn(3),)


def test_a_forward_or_method_replaced_on_the_instance_is_called():
    assert_parity(module_call_and_method, patch_args, calls=4)


class LoudModule(torch.nn.Module):
    def forward(self, x):
        return x * 3

    def __call__(self, x):
        return x * 15


LOUD = LoudModule()


def call_overridden(x):
    return LOUD(x)


def test_a_module_subclass_own_call_runs_instead_of_forward():
    assert_parity(call_overridden, lambda: (torch.randn(3),), calls=2)


class Value:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, Value) and self.v == other.v

    __hash__ = None


class Opaque:
    def __eq__(self, other):
        return NotImplemented


LIVE_A, LIVE_B = Value(1), Value(1)


def rich_comparisons(x):
    made = Value(2)
    o = Opaque()
    return (x + 1, Value(1) != Value(1), Value(1) != Value(2), made == Value(2), LIVE_A == LIVE_B,
            LIVE_A != LIVE_B, o == o, o != Opaque())


def test_not_equal_falls_back_to_eq_as_object_ne_does():
    assert_parity(rich_comparisons, lambda: (torch.randn(2),), calls=2)


class AnythingGoes(type):
    def __instancecheck__(cls, instance):
        return isinstance(instance, int)


class Numberish(metaclass=AnythingGoes):
    pass


def instance_checks(x):
    return (x, isinstance(3, Numberish), isinstance("a", Numberish), isinstance(3, (str, Numberish)),
            isinstance(x, (int, (str, torch.Tensor))), isinstance(torch.nn.Parameter(x), torch.nn.Parameter))


def test_a_metaclass_instancecheck_decides_isinstance():
    assert_parity(instance_checks, lambda: (torch.randn(2),), calls=2, grad=False)


def isinstance_with_keyword(x):
    return isinstance(x, torch.Tensor, invalid=True)


def isinstance_with_one_argument(x):
    return isinstance(x)


def test_isinstance_argument_errors_are_pythons():
    assert_parity(isinstance_with_keyword, lambda: (torch.randn(2),))
    assert_parity(isinstance_with_one_argument, lambda: (torch.randn(2),))


def dict_update_from_pairs(x):
    d = {"a": 1}
    d.update([("b", 2), ["c", 3]])
    d.update((("d", 4),), e=5)
    d.update(["fg"])
    return x + len(d), d


def dict_update_with_a_bad_element(x):
    d = {}
    d.update([("a", 1, 2)])
    return x, d


def test_dict_update_takes_an_iterable_of_pairs():
    assert_parity(dict_update_from_pairs, lambda: (torch.ones(2),), calls=2)
    assert_parity(dict_update_with_a_bad_element, lambda: (torch.ones(2),))


def partials_across_a_break(x):
    add = functools.partial(torch.add, alpha=2)
    largest = functools.partial(max, 3)
    graph_break()
    return add(x, x), largest(1)


def test_partials_with_keywords_only_or_arguments_only_cross_a_break():
    report = assert_parity(partials_across_a_break, lambda: (torch.ones(2),), calls=2)
    assert report.warnings == []


class Lookup:
    """Attributes it does not have come from ``table`` through ``__getattr__``."""

    def __init__(self):
        self.table = {"w": 3}

    def __getattr__(self, name):
        if name in self.table:
            return self.table[name]
        raise AttributeError(name)


LOOKUP = Lookup()


def through_getattr(x):
    made = Lookup()
    made.table["v"] = 2
    return x * LOOKUP.w + made.v + hasattr(LOOKUP, "missing") + getattr(made, "nope", 10), LOOKUP.table is not None


def lookup_args(i):
    LOOKUP.table["w"] = 3 + i  # read through __getattr__: a changed value must be seen
    LOOKUP.__dict__.pop("missing", None)
    if i == 2:
        LOOKUP.missing = 1  # an instance attribute now answers first
    return (torch.ones(2),)


def test_a_class_getattr_answers_what_ordinary_lookup_does_not_find():
    report = assert_parity(through_getattr, lookup_args, calls=4, fullgraph=True)
    assert report.warnings == []


def partial_attributes(x):
    p = functools.partial(torch.add, alpha=2)
    q = functools.partial(max, 3)
    return (p(x, x), hasattr(p, "func"), hasattr(p, "nope"), hasattr(p, "__call__"), p.func is torch.add,
            p.keywords, q.args, q.func(1, 2))


def partial_missing_attribute(x):
    return functools.partial(max, 3).nope


def test_a_partial_made_in_the_trace_has_its_attributes():
    report = assert_parity(partial_attributes, lambda: (torch.ones(2),), calls=2, fullgraph=True)
    assert report.warnings == []
    assert_parity(partial_missing_attribute, lambda: (torch.ones(2),), calls=2)


def sizes_and_builtin_types(x):
    shape = torch.Size([2, 1])
    return (x.reshape(shape), shape, torch.Size(), torch.Size((1, True)), x.shape == torch.Size([2]),
            type(3)(4.5), type("a")(7), type(x.shape) is torch.Size)


def size_of_strings(x):
    return torch.Size([1, "a"])


def test_torch_size_and_builtin_types_reached_as_values_are_called():
    report = assert_parity(sizes_and_builtin_types, lambda: (torch.ones(2),), calls=2, fullgraph=True)
    assert report.warnings == []
    assert_parity(size_of_strings, lambda: (torch.ones(2),), calls=2)


def ordered_dict_and_sort_with_key(x):
    d = collections.OrderedDict(a=1, b=2, c=3)
    d.move_to_end("a")
    d.move_to_end("c", last=False)
    first = d.popitem(last=False)
    plain = {"p": x, "q": 2}
    pairs = [(2, x), (1, x * 2), (2, x * 3)]
    pairs.sort(key=lambda t: t[0])
    words = ["bb", "a", "ccc"]
    words.sort(key=len, reverse=True)
    return list(d.items()), first, plain.popitem(), pairs, words


def move_missing(x):
    collections.OrderedDict(a=1).move_to_end("z")


def test_ordered_dict_reordering_and_sort_with_a_key():
    report = assert_parity(ordered_dict_and_sort_with_key, lambda: (torch.ones(2),), calls=2, fullgraph=True)
    assert report.warnings == []
    assert_parity(move_missing, lambda: (torch.ones(2),), calls=2)


class Defaulting(dict):
    def __missing__(self, key):
        return len(key)


def defaultdict_counter_and_missing(x):
    groups = collections.defaultdict(list)
    for i, name in enumerate(["a", "b", "a"]):
        groups[name].append(x * i)
    plain = collections.defaultdict(None, {"k": 1})
    counts = collections.Counter("abca")
    counts.update(["b"])
    return (dict(groups), groups.default_factory is list, "c" in groups, groups.get("z"), plain["k"],
            counts["a"], counts["zz"], counts.most_common(), sorted(counts.elements()), Defaulting(a=1)["abc"],
            type(groups).__name__, type(counts).__name__)


def defaultdict_without_factory(x):
    return collections.defaultdict(None)["k"]


def defaultdict_of_a_non_callable(x):
    return collections.defaultdict(3)


def dict_of_bad_pairs(x):
    return dict([(1, 2), (3,)])


def test_defaultdict_counter_and_a_python_missing():
    report = assert_parity(defaultdict_counter_and_missing, lambda: (torch.ones(2),), calls=2, fullgraph=True)
    assert report.warnings == []
    for fn in (defaultdict_without_factory, defaultdict_of_a_non_callable, dict_of_bad_pairs):
        assert_parity(fn, lambda: (torch.ones(2),), calls=2)


def returned_defaultdict(x):
    d = collections.defaultdict(list)
    d["a"].append(1)
    return x + 1, d


def test_a_defaultdict_made_in_the_trace_is_returned_as_one():
    compiled = stillframe.compile(returned_defaultdict, backend="eager")
    for _ in range(2):
        got, expected = compiled(torch.ones(2))[1], returned_defaultdict(torch.ones(2))[1]
        assert type(got) is type(expected) and got == expected and got.default_factory is list
        assert got["new"] == [] and "new" in got
