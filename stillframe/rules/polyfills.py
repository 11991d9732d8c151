"""Lazy iterators written in Python, for the interpreter to trace in place of C builtins.

``map``, ``filter``, ``zip``, ``enumerate``, the ``itertools`` iterators and
``functools.reduce`` are C code: they call user functions and pull from user
iterators one item at a time, interleaved with the loop that consumes them. A
rule that evaluated them whole when they were made would run those calls ahead
of eager (a ``map`` function that appends to a list, a ``zip`` over a generator
that prints). :mod:`stillframe.rules.iteration` instead traces the generator
functions below, which pull exactly as the C code does, so every effect happens
in eager's order; the generator they make reports the builtin's type
(``GeneratorVariable.made_by``).

Each one follows the iterator's documented equivalent (the ``itertools``
documentation gives one for most) and raises the builtin's errors. What the C
constructor does when it is called is done when the function is called:
``iter()`` of each iterable (``filter(None, 5)`` raises at once), ``tuple()`` of
``product``'s pools; the items come from a generator it returns. Its scalar
arguments (``count``'s start, ``islice``'s indices, ``repeat``'s times) are
checked before, by calling the real constructor
(:func:`stillframe.rules.arity.check_construction`). They use builtins only:
their module's globals are never read by a trace, and the builtins they read are
the real ones (:mod:`stillframe.own_builtins`), as the C code's are, whatever
the user has rebound.
"""

from ..own_builtins import BUILTINS as __builtins__  # noqa: F401 (see own_builtins)


def map_(function, iterable, *iterables):
    its = [iter(iterable)] + [iter(i) for i in iterables]

    def items():
        while True:
            args = []
            for it in its:
                try:
                    args.append(next(it))
                except StopIteration:
                    return
            yield function(*args)

    return items()


def filter_(function, iterable):
    it = iter(iterable)

    def items():
        for item in it:
            if (item if function is None else function(item)):
                yield item

    return items()


def filterfalse(predicate, iterable):
    it = iter(iterable)

    def items():
        for item in it:
            if not (item if predicate is None else predicate(item)):
                yield item

    return items()


def zip_(*iterables, strict=False):
    its = [iter(i) for i in iterables]

    def items():
        if not its:
            return
        while True:
            items = []
            for i, it in enumerate(its):
                try:
                    items.append(next(it))
                except StopIteration:
                    if strict and i:
                        plural = " " if i == 1 else "s 1-"
                        raise ValueError(f"zip() argument {i + 1} is shorter than argument{plural}{i}") from None
                    if strict:
                        for j, other in enumerate(its[1:], 2):
                            try:
                                next(other)
                            except StopIteration:
                                continue
                            plural = " " if j == 2 else "s 1-"
                            raise ValueError(f"zip() argument {j} is longer than argument{plural}{j - 1}") from None
                    return
            yield tuple(items)

    return items()


def enumerate_(iterable, start=0):
    it = iter(iterable)

    def items():
        n = start
        for item in it:
            yield n, item
            n += 1

    return items()


def reversed_list(items):
    # CPython's listreviter_next: the item at the index while the index is inside the list as it is now
    index = len(items) - 1
    while 0 <= index < len(items):
        yield items[index]
        index -= 1


def chain(*iterables):
    for iterable in iterables:
        for item in iterable:
            yield item


def chain_from_iterable(iterables):
    source = iter(iterables)

    def items():
        for iterable in source:
            for item in iterable:
                yield item

    return items()


def islice(iterable, *args):
    # (the arguments were checked as CPython checks them before the call: stillframe.rules.arity)
    s = slice(*args)
    start, stop, step = s.start or 0, s.stop, 1 if s.step is None else s.step
    it = iter(iterable)

    def items():
        index = 0
        nexti = start
        while stop is None or nexti < stop:
            try:
                item = next(it)
            except StopIteration:
                return
            if index == nexti:
                yield item
                nexti += step
            index += 1
        # CPython consumes up to ``start`` even when ``stop`` is at or before it.
        while index < start:
            try:
                next(it)
            except StopIteration:
                return
            index += 1

    return items()


def count(start=0, step=1):
    n = start
    while True:
        yield n
        n += step


def repeat(obj, times=None):
    if times is None:
        while True:
            yield obj
    for _ in range(times):
        yield obj


def cycle(iterable):
    it = iter(iterable)

    def items():
        saved = []
        for item in it:
            yield item
            saved.append(item)
        while saved:
            for item in saved:
                yield item

    return items()


def accumulate(iterable, func=None, *, initial=None):
    it = iter(iterable)

    def items():
        total = initial
        if initial is None:
            try:
                total = next(it)
            except StopIteration:
                return
        yield total
        for item in it:
            total = total + item if func is None else func(total, item)
            yield total

    return items()


def product(*iterables, repeat=1):
    pools = [tuple(pool) for pool in iterables] * repeat

    def items():
        result = [()]
        for pool in pools:
            result = [x + (y,) for x in result for y in pool]
        for prod in result:
            yield prod

    return items()


def combinations(iterable, r):
    pool = tuple(iterable)
    n = len(pool)
    if r < 0:
        raise ValueError("r must be non-negative")

    def items():
        if r > n:
            return
        indices = list(range(r))
        yield tuple(pool[i] for i in indices)
        while True:
            for i in reversed(range(r)):
                if indices[i] != i + n - r:
                    break
            else:
                return
            indices[i] += 1
            for j in range(i + 1, r):
                indices[j] = indices[j - 1] + 1
            yield tuple(pool[i] for i in indices)

    return items()


def permutations(iterable, r=None):
    pool = tuple(iterable)
    n = len(pool)
    if r is not None and not isinstance(r, int):
        raise TypeError("Expected int as r")
    r = n if r is None else r
    if r < 0:
        raise ValueError("r must be non-negative")

    def items():
        if r > n:
            return
        indices = list(range(n))
        cycles = list(range(n, n - r, -1))
        yield tuple(pool[i] for i in indices[:r])
        while n:
            for i in reversed(range(r)):
                cycles[i] -= 1
                if cycles[i] == 0:
                    indices[i:] = indices[i + 1:] + indices[i:i + 1]
                    cycles[i] = n - i
                else:
                    j = cycles[i]
                    indices[i], indices[-j] = indices[-j], indices[i]
                    yield tuple(pool[i] for i in indices[:r])
                    break
            else:
                return

    return items()


def zip_longest(*iterables, fillvalue=None):
    its = [iter(i) for i in iterables]

    def items():
        active = len(its)
        if not active:
            return
        while True:
            values = []
            for i, it in enumerate(its):
                if it is None:  # exhausted earlier
                    values.append(fillvalue)
                    continue
                try:
                    value = next(it)
                except StopIteration:
                    active -= 1
                    if not active:
                        return
                    its[i] = None
                    value = fillvalue
                values.append(value)
            yield tuple(values)

    return items()


def pairwise(iterable):
    it = iter(iterable)

    def items():
        try:
            a = next(it)
        except StopIteration:
            return
        for b in it:
            yield a, b
            a = b

    return items()


def starmap(function, iterable):
    it = iter(iterable)

    def items():
        for args in it:
            yield function(*args)

    return items()


def groupby(iterable, key=None):
    # Each group is a generator over the shared iterator; moving to the next key first drains the group left
    # unfinished, as itertools' groups are invalidated by advancing the groupby.
    it = iter(iterable)
    state = [False, None, None]  # exhausted, current key, current value

    def group(target):
        yield state[2]
        for value in it:
            state[1], state[2] = (value if key is None else key(value)), value
            if state[1] != target:
                return
            yield value
        state[0] = True

    def items():
        try:
            state[2] = next(it)
        except StopIteration:
            return
        state[1] = state[2] if key is None else key(state[2])
        while not state[0]:
            target = state[1]
            current = group(target)
            yield target, current
            if state[1] == target:
                for _ in current:
                    pass

    return items()


def drive(iterator):
    # A for loop over an object of a class with its own __next__: one call per item, until StopIteration. The
    # method is looked up at each step, as CPython's slot does: a __next__ that deletes itself ends the loop with
    # TypeError at the next step (test_iter test_3720).
    cls = type(iterator)
    while True:
        step = getattr(cls, "__next__", None)
        if step is None:
            raise TypeError(f"'{cls.__name__}' object is not iterable")
        try:
            item = step(iterator)
        except StopIteration:
            return
        yield item


def takewhile(predicate, iterable):
    it = iter(iterable)

    def items():
        for item in it:
            if not predicate(item):
                return
            yield item

    return items()


def dropwhile(predicate, iterable):
    it = iter(iterable)

    def items():
        for item in it:
            if not predicate(item):
                yield item
                break
        for item in it:
            yield item

    return items()


def compress(data, selectors):
    data_it, selectors_it = iter(data), iter(selectors)

    def items():
        for d, s in zip(data_it, selectors_it):
            if s:
                yield d

    return items()


def reduce(function, iterable, *initial):
    it = iter(iterable)
    if initial:
        value = initial[0]
    else:
        try:
            value = next(it)
        except StopIteration:
            raise TypeError("reduce() of empty iterable with no initial value") from None
    for item in it:
        value = function(value, item)
    return value


def count_elements(mapping, iterable):
    """``collections._count_elements``: what ``Counter.update`` counts with."""
    for element in iterable:
        mapping[element] = mapping.get(element, 0) + 1
