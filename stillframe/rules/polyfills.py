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
documentation gives one for most) and raises the builtin's errors. They use
builtins only: their module's globals are never read by a trace.
"""


def map_(function, iterable, *iterables):
    its = [iter(iterable)] + [iter(i) for i in iterables]
    while True:
        args = []
        for it in its:
            try:
                args.append(next(it))
            except StopIteration:
                return
        yield function(*args)


def filter_(function, iterable):
    for item in iterable:
        if (item if function is None else function(item)):
            yield item


def filterfalse(predicate, iterable):
    for item in iterable:
        if not (item if predicate is None else predicate(item)):
            yield item


def zip_(*iterables, strict=False):
    its = [iter(i) for i in iterables]
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


def enumerate_(iterable, start=0):
    n = start
    for item in iterable:
        yield n, item
        n += 1


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
    for iterable in iterables:
        for item in iterable:
            yield item


def islice(iterable, *args):
    s = slice(*args)
    start, stop, step = s.start or 0, s.stop, 1 if s.step is None else s.step
    if start < 0 or (stop is not None and stop < 0) or step <= 0:
        raise ValueError("Indices for islice() must be None or an integer: 0 <= x <= sys.maxsize.")
    it = iter(iterable)
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
    saved = []
    for item in iterable:
        yield item
        saved.append(item)
    while saved:
        for item in saved:
            yield item


def accumulate(iterable, func=None, *, initial=None):
    it = iter(iterable)
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


def product(*iterables, repeat=1):
    pools = [tuple(pool) for pool in iterables] * repeat
    result = [()]
    for pool in pools:
        result = [x + (y,) for x in result for y in pool]
    for prod in result:
        yield prod


def combinations(iterable, r):
    pool = tuple(iterable)
    n = len(pool)
    if r < 0:
        raise ValueError("r must be non-negative")
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


def permutations(iterable, r=None):
    pool = tuple(iterable)
    n = len(pool)
    r = n if r is None else r
    if r < 0:
        raise ValueError("r must be non-negative")
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


def zip_longest(*iterables, fillvalue=None):
    its = [iter(i) for i in iterables]
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


def pairwise(iterable):
    it = iter(iterable)
    try:
        a = next(it)
    except StopIteration:
        return
    for b in it:
        yield a, b
        a = b


def starmap(function, iterable):
    for args in iterable:
        yield function(*args)


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


def drive(iterator):
    # A for loop over an object of a class with its own __next__: one call per item, until StopIteration.
    step = type(iterator).__next__
    while True:
        try:
            item = step(iterator)
        except StopIteration:
            return
        yield item


def takewhile(predicate, iterable):
    for item in iterable:
        if not predicate(item):
            return
        yield item


def dropwhile(predicate, iterable):
    it = iter(iterable)
    for item in it:
        if not predicate(item):
            yield item
            break
    for item in it:
        yield item


def compress(data, selectors):
    for d, s in zip(data, selectors):
        if s:
            yield d


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
