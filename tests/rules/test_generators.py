"""Generators run exactly as far as eager's, in eager's order (issue 11: never drained ahead of the consumer)."""

import pytest
import torch

from stillframe.check.parity import assert_parity


def naturals(log):
    i = 0
    while True:
        log.append(f"yield {i}")
        yield i
        i += 1


def loop_over_an_infinite_generator_with_a_break(x, log):
    for i in naturals(log):
        log.append(f"body {i}")
        x = x + i
        if i >= 3:
            break
    return x


def test_a_loop_over_an_infinite_generator_stops_where_eager_stops():
    # It used to drain the generator before the loop: a hang.
    report = assert_parity(loop_over_an_infinite_generator_with_a_break, lambda: (torch.zeros(2), []), calls=2)
    assert report.warnings == []


def loop_with_a_graph_break_over_a_generator(x, log):
    for i in naturals(log):
        print("step", i)  # a graph break while the generator is suspended
        x = x * 2 + i
        if i == 2:
            break
    return x


def test_a_graph_break_inside_a_loop_over_a_generator_keeps_eagers_order(capsys):
    assert_parity(loop_with_a_graph_break_over_a_generator, lambda: (torch.ones(2), []), calls=2)


def noisy(values, log):
    for v in values:
        log.append(v)
        yield v


def any_and_all_short_circuit(x, log):
    found = any(v > 1 for v in noisy([0, 2, 5, 7], log))
    every = all(v < 3 for v in noisy([1, 2, 3, 4], log))
    return x + found + every


def test_any_and_all_stop_the_generator_where_eager_stops():
    report = assert_parity(any_and_all_short_circuit, lambda: (torch.zeros(2), []), calls=2)
    assert report.warnings == []


def accumulator():
    total = 0
    while True:
        value = yield total
        total += value


def send_into_a_generator(x):
    acc = accumulator()
    next(acc)
    acc.send(2)
    return x * acc.send(3)


def test_send_into_a_generator_matches_eager():
    assert_parity(send_into_a_generator, lambda: (torch.ones(2),), calls=2)


def effects_inside_a_generator_body(log):
    for i in range(3):
        print("producing", i)  # a graph break inside the generator's own body
        log.append(i)
        yield i


def break_inside_the_generator_body(x, log):
    for i in effects_inside_a_generator_body(log):
        log.append(f"consumed {i}")
        x = x + i
    return x


def test_a_graph_break_inside_a_generator_body_keeps_eagers_order(capsys):
    assert_parity(break_inside_the_generator_body, lambda: (torch.zeros(2), []), calls=2)


def delegating():
    yield from [1, 2]


def sum_of_a_delegating_generator(x):
    return x * sum(delegating())


def test_a_generator_with_an_untraced_construct_runs_for_real_without_a_fallback():
    # `yield from` has no handler: the generator is made and consumed for real, the rest is captured.
    report = assert_parity(sum_of_a_delegating_generator, lambda: (torch.randn(3),), calls=2)
    assert report.warnings == []


def guarded(log, kind):
    if kind == "finally":
        try:
            yield 1
            yield 2
        finally:
            log.append("finally")
    else:
        try:
            yield 1
            yield 2
        except IndexError:  # does not catch GeneratorExit: closing runs nothing
            log.append("never")


def kept_to_the_end(x, log):
    kept = guarded(log, "finally")
    first = next(kept)
    log.append("before return")
    return x + first  # eager closes `kept` as the frame's locals go: its finally runs (it never ran traced)


def dropped_mid_way(x, log):
    it = guarded(log, "finally")
    first = next(it)
    del it  # eager closes it here: its finally runs before the next line
    log.append("after del")
    return x + first


def dropped_without_cleanup(x, log):
    it = guarded(log, "except")
    first = next(it)
    del it
    return x + first


def test_a_generator_left_suspended_inside_try_runs_its_finally():
    report = assert_parity(kept_to_the_end, lambda: (torch.zeros(2), []), calls=2)
    assert report.warnings == []
    # an except clause that cannot catch GeneratorExit runs nothing on close: still one graph
    report = assert_parity(dropped_without_cleanup, lambda: (torch.zeros(2), []), calls=2, fullgraph=True)
    assert report.warnings == []


def test_a_generator_deleted_mid_way_runs_its_finally_at_the_del():
    assert_parity(dropped_mid_way, lambda: (torch.zeros(2), []), calls=2)


def _gathering_generator(x, idx, log):
    log.append("start")
    yield torch.gather(x, 0, idx)
    log.append("middle")
    yield x[idx] * 2
    log.append("end")


def _drive(fn, idx):
    """Make the generator, then iterate it: what each step returned or raised, and the log after each."""
    log = []
    steps = []
    gen = fn(torch.arange(4.0), torch.tensor(idx), log)
    steps.append(("made", list(log)))
    try:
        for value in gen:
            steps.append((value.tolist(), list(log)))
    except Exception as e:  # compared with eager's below
        steps.append((type(e).__name__, str(e), list(log)))
    return steps


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_compiled_generator_function_runs_its_body_only_as_it_is_iterated(backend):
    """Calling a compiled generator function makes the generator and runs none of its body, as in eager (it ran
    the body to the first yield at the call, and that call raised AttributeError from a real step); iterating it
    gives eager's values, side effects and errors. torch.compile does not compile such a frame either."""
    import stillframe

    compiled = stillframe.compile(_gathering_generator, backend=backend)
    for idx in ([0, 1], [0, 9], [1, 2]):
        assert _drive(compiled, idx) == _drive(_gathering_generator, idx), idx
    assert compiled.traces == 0
