"""Input spaces (a signature with a pool of values per parameter), their points (inputs), and
mutations of inputs and of single values."""

from __future__ import annotations

import contextlib
import inspect
import random

from .pools import COMMON_VALUES, PoolMaker, hashable
from .specs import OFF_TYPE_KEYS, OMIT, UNKNOWN, Member, New, render, sort_key, writable

MUTATION_CHARS = " a1,.-_A#/:\n"
MAX_MUTATED_INT = 10**6


class Param:
    """A parameter of an input space: its pool of values and, when writable, its default."""

    __slots__ = ("name", "kind", "required", "default", "pool", "shapes")

    POSITIONAL_ONLY = inspect.Parameter.POSITIONAL_ONLY
    POSITIONAL_OR_KEYWORD = inspect.Parameter.POSITIONAL_OR_KEYWORD
    VAR_POSITIONAL = inspect.Parameter.VAR_POSITIONAL
    KEYWORD_ONLY = inspect.Parameter.KEYWORD_ONLY
    VAR_KEYWORD = inspect.Parameter.VAR_KEYWORD

    def __init__(self, name, kind, required, default, pool, typed=False):
        self.name, self.kind, self.required, self.default, self.pool = (
            name,
            kind,
            required,
            default,
            pool,
        )
        # For an annotated parameter, the kinds of values its annotation allows (the values of
        # other types its pool ends with are tried as they are, never mutated into).
        self.shapes = {shape(v) for v in pool if render(v) not in OFF_TYPE_KEYS} if typed else None


class Input:
    """One point of an input space: a construction index (methods) and a value (spec or OMIT)
    per parameter; for *args the value is a tuple of specs."""

    __slots__ = ("ctor", "values", "seq")

    def __init__(self, ctor, values):
        self.ctor = ctor
        self.values = tuple(values)
        self.seq = None

    def replace(self, index, value):
        values = list(self.values)
        values[index] = value
        return Input(self.ctor, values)


class InputSpace:
    def __init__(self, signature: inspect.Signature, pools: PoolMaker, annotations, globalns, node):
        self.params: list[Param] = []
        taken = set(signature.parameters)
        for p in signature.parameters.values():
            if p.kind is p.VAR_KEYWORD:
                pool = pools.for_var_keyword(node, p.name, taken)
                self.params.append(Param(p.name, p.kind, False, {}, pool))
                continue
            if p.kind is p.VAR_POSITIONAL:
                self.params.append(Param(p.name, p.kind, False, (), pools.for_var_positional()))
                continue
            required = p.default is inspect.Parameter.empty
            default = p.default if not required and writable(p.default) else UNKNOWN
            annotation = annotations.get(p.name, p.annotation)
            pool, typed = pools.for_parameter(p, annotation, globalns, node)
            if not pool:
                pool, typed = [None], False
            self.params.append(Param(p.name, p.kind, required, default, pool, typed))

    def base(self, ctor=None) -> Input:
        """Every required parameter at the first value of its pool, the others omitted."""
        return Input(
            ctor,
            [
                p.pool[0]
                if p.required
                else (() if p.kind is p.VAR_POSITIONAL else {} if p.kind is p.VAR_KEYWORD else OMIT)
                for p in self.params
            ],
        )

    def from_call(self, call, ctor=None) -> Input | None:
        """An input from (args, kwargs) found in a doctest or at a call site; arguments that
        could not be recovered take their base value. None when the call does not fit."""
        args, kwargs = call[0], call[1]
        base = self.base(ctor)
        values = list(base.values)
        positional = [
            i
            for i, p in enumerate(self.params)
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        var_index = next((i for i, p in enumerate(self.params) if p.kind is p.VAR_POSITIONAL), None)
        if len(args) > len(positional) and var_index is None:
            return None
        for i, a in zip(positional, args):
            if a is not UNKNOWN:
                values[i] = a
        if len(args) > len(positional):
            extras = args[len(positional) :]
            if any(a is UNKNOWN for a in extras):
                return None
            values[var_index] = tuple(extras)
        by_name = {
            p.name: i
            for i, p in enumerate(self.params)
            if p.kind not in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL, p.VAR_KEYWORD)
        }
        var_keyword = next((i for i, p in enumerate(self.params) if p.kind is p.VAR_KEYWORD), None)
        extra = {}
        for name, v in kwargs.items():
            if name not in by_name:
                # A keyword the signature does not name goes to its **kwargs.
                if var_keyword is None or v is UNKNOWN:
                    return None
                extra[name] = v
            elif v is not UNKNOWN:
                values[by_name[name]] = v
        if extra:
            values[var_keyword] = extra
        return Input(ctor, values)

    def to_call(self, inp: Input):
        """(args, kwargs) specs for an input: required positional parameters positionally,
        optional ones by keyword (positionally when *args must be reached); None when an
        omitted default would have to be written and cannot be."""
        positional = [
            (i, p)
            for i, p in enumerate(self.params)
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        extras = ()
        for i, p in enumerate(self.params):
            if p.kind is p.VAR_POSITIONAL:
                extras = inp.values[i]
        last = -1
        for j, (i, p) in enumerate(positional):
            if p.required or (p.kind is p.POSITIONAL_ONLY and inp.values[i] is not OMIT):
                last = j
        if extras:
            last = len(positional) - 1
        args, kwargs = [], {}
        for j, (i, p) in enumerate(positional):
            v = inp.values[i]
            if j <= last:
                if v is OMIT:
                    if p.default is UNKNOWN:
                        return None
                    v = p.default
                args.append(v)
            elif v is not OMIT:
                kwargs[p.name] = v
        args.extend(extras)
        for i, p in enumerate(self.params):
            if p.kind is p.KEYWORD_ONLY and inp.values[i] is not OMIT:
                kwargs[p.name] = inp.values[i]
        for i, p in enumerate(self.params):
            if p.kind is p.VAR_KEYWORD and isinstance(inp.values[i], dict):
                for name, v in inp.values[i].items():
                    kwargs.setdefault(name, v)
        return tuple(args), kwargs

    def variations(self, base: Input, ctor_count: int = 1):
        """Inputs that differ from `base` in one dimension, round-robin over the dimensions
        (construction, then each parameter) so that no single large pool eats the budget."""
        dims = []
        if ctor_count > 1:
            dims.append(("ctor", list(range(ctor_count))))
        for i, p in enumerate(self.params):
            dims.append((i, p.pool))
        longest = max((len(pool) for _, pool in dims), default=0)
        for k in range(longest):
            for dim, pool in dims:
                if k >= len(pool):
                    continue
                if dim == "ctor":
                    if k != base.ctor:
                        yield Input(k, base.values)
                    continue
                p = self.params[dim]
                value = pool[k]
                if (
                    p.kind is not p.VAR_POSITIONAL
                    and not p.required
                    and p.default is not UNKNOWN
                    and sort_key(value) == sort_key(p.default)
                ):
                    continue  # the same as omitting it
                yield base.replace(dim, value)

    def homogeneous(self, base: Input, per_type: int = 3):
        """Inputs where every unannotated required parameter takes one of the first
        `per_type` values of the same type (all ints, all strings...): a plausible call when
        the first pool values of several parameters do not go together."""
        for t in (int, str, float, list, dict, bool):
            for k in range(per_type):
                values = list(base.values)
                changed = False
                for i, p in enumerate(self.params):
                    if p.shapes is not None or not p.required:
                        continue
                    of_type = [v for v in p.pool if type(v) is t]
                    if k < len(of_type):
                        values[i] = of_type[k]
                        changed = True
                if changed:
                    yield Input(base.ctor, values)

    def random_input(self, rng: random.Random, ctor_count: int) -> Input:
        values = []
        for p in self.params:
            if not p.required and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and rng.random() < 0.3:
                values.append(OMIT)
            else:
                values.append(rng.choice(p.pool))
        return Input(rng.randrange(ctor_count) if ctor_count > 1 else None, values)

    def mutate(self, inp: Input, rng: random.Random, ctor_count: int) -> Input:
        """`inp` with one dimension changed (its construction, or one parameter's value: another
        pool value, a value of another source, omitted, or a mutation of the current value)."""
        params = self.params
        dim = rng.randrange(len(params) + (1 if ctor_count > 1 else 0))
        if dim == len(params):
            return Input(rng.randrange(ctor_count), inp.values)
        p = params[dim]
        current = inp.values[dim]
        r = rng.random()
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            value = _mutate_keywords(current if isinstance(current, dict) else {}, rng, p.pool)
        elif p.kind is inspect.Parameter.VAR_POSITIONAL:
            value = (
                tuple(mutate_value(list(current), rng, params[0].pool if params else []))
                if r < 0.6
                else rng.choice(p.pool)
            )
        elif current is OMIT or r < 0.3:
            value = rng.choice(p.pool)
        elif r < 0.4:
            # A value of another source: any parameter's pool or the common values (within
            # the annotation's types for an annotated parameter).
            other = [v for q in params for v in q.pool] + COMMON_VALUES
            if p.shapes is not None:
                other = [v for v in other if shape(v) in p.shapes] or p.pool
            value = rng.choice(other)
        elif not p.required and r < 0.45:
            value = OMIT
        else:
            value = mutate_value(current, rng, p.pool)
        return inp.replace(dim, value)


def mutate_value(v, rng: random.Random, pool: list, depth: int = 0):
    """A neighbour of a spec: a changed number, a shorter/longer/changed string or container,
    swapped or sorted elements, a mutated constructor argument, or a pool value."""
    t = type(v)
    if t is bool:
        return not v
    if t is int:
        # Magnitudes stay moderate: sizes like 'x' * n must not exhaust memory.
        doubled = v * 2 if abs(v) <= MAX_MUTATED_INT // 2 else v // 2
        return rng.choice(
            [v + 1, v - 1, -v, doubled, v // 2, 0, rng.randint(-10, 10), rng.randint(-1000, 1000)]
        )
    if t is float:
        return rng.choice(
            [
                v + 1.0,
                v - 1.0,
                -v,
                v * 2.0 if abs(v) < 1e300 else v / 2,
                v / 2.0,
                0.0,
                round(rng.uniform(-10, 10), 3),
            ]
        )
    if t is str:
        return _mutate_str(v, rng, pool)
    if t is bytes:
        c = rng.choice(MUTATION_CHARS).encode()
        return rng.choice([b"", v[:-1], v[1:], v + c, c + v, v.upper(), v[::-1]])
    if t in (list, tuple):
        items = _mutate_items(list(v), rng, pool, depth)
        return items if t is list else tuple(items)
    if t is dict:
        return _mutate_dict(v, rng, pool, depth)
    if t is set:
        items = sorted(v, key=sort_key)
        if items and rng.random() < 0.4:
            items.pop(rng.randrange(len(items)))
        else:
            candidate = atom_from(pool, rng)
            if hashable(candidate):
                items.append(candidate)
        return set(items)
    if t is New and (v.args or v.kwargs) and depth < 3:
        args, kwargs = list(v.args), list(v.kwargs)
        i = rng.randrange(len(args) + len(kwargs))
        if i < len(args):
            args[i] = mutate_value(args[i], rng, [], depth + 1)
        else:
            name, value = kwargs[i - len(args)]
            kwargs[i - len(args)] = (name, mutate_value(value, rng, [], depth + 1))
        return New(v.path, args, kwargs, v.root)
    return rng.choice(pool) if pool else v


def _mutate_keywords(v: dict, rng: random.Random, pool: list) -> dict:
    """Extra keyword arguments changed: another of the pool, one of the pool added, one
    removed, or one value mutated (keys stay the names they were)."""
    r = rng.random()
    if r < 0.3 or not v:
        return dict(rng.choice(pool))
    if r < 0.55:
        return {**v, **rng.choice(pool)}
    name = rng.choice(sorted(v))
    if r < 0.7:
        return {k: x for k, x in v.items() if k != name}
    return {**v, name: mutate_value(v[name], rng, [])}


def _mutate_str(v: str, rng: random.Random, pool: list) -> str:
    """A shorter, longer or changed string (or one with a string of the pool appended)."""
    c = rng.choice(MUTATION_CHARS)
    pos = rng.randint(0, len(v))
    options = [
        "",
        v[:-1],
        v[1:],
        v + c,
        c + v,
        v[:pos] + c + v[pos:],
        v.upper(),
        v.lower(),
        v.swapcase(),
        v.strip(),
        f" {v} ",
        v[::-1],
    ]
    if v:
        options.append(v[:pos] + v[pos + 1 :])
    # A digit changed to another: a number inside a text ('-P0D' -> '-P1D', a date's day).
    digits = [i for i, ch in enumerate(v) if ch in "0123456789"]
    if digits:
        i = rng.choice(digits)
        options.append(v[:i] + rng.choice("0123456789".replace(v[i], "")) + v[i + 1 :])
    if len(v) < 100:
        options.append(v * 2)
    strs = [p for p in pool if type(p) is str]
    if strs:
        # Another string of the pool after it or before it (a prefix the code looks for).
        options.append(v + rng.choice(strs))
        options.append(rng.choice(strs) + v)
    return rng.choice(options)


def _mutate_items(items: list, rng: random.Random, pool: list, depth: int) -> list:
    """The elements of a list or tuple, changed: one added, removed, swapped, mutated or
    repeated, all reversed, sorted or removed (at most 50 kept)."""
    op = rng.randrange(8)
    if op == 0 or not items:
        items.append(
            mutate_value(rng.choice(items), rng, pool, depth + 1)
            if items and depth < 3
            else atom_from(pool, rng)
        )
    elif op == 1:
        items.pop(rng.randrange(len(items)))
    elif op == 2 and len(items) > 1:
        i, j = rng.sample(range(len(items)), 2)
        items[i], items[j] = items[j], items[i]
    elif op == 3:
        items.reverse()
    elif op == 4:
        with contextlib.suppress(TypeError):
            items.sort()
    elif op == 5 and depth < 3:
        i = rng.randrange(len(items))
        items[i] = mutate_value(items[i], rng, pool, depth + 1)
    elif op == 6:
        items.insert(rng.randrange(len(items) + 1), rng.choice(items))
    else:
        items = []
    return items[:50]


def _mutate_dict(v: dict, rng: random.Random, pool: list, depth: int) -> dict:
    """A dict with an entry removed, a value mutated or a new entry (at most 30 kept)."""
    items = list(v.items())
    op = rng.randrange(4)
    if items and op == 0:
        items.pop(rng.randrange(len(items)))
    elif items and op == 1 and depth < 3:
        i = rng.randrange(len(items))
        items[i] = (items[i][0], mutate_value(items[i][1], rng, pool, depth + 1))
    elif items:
        # A new entry shaped like an existing one.
        key, value = rng.choice(items)
        items.append(
            (
                mutate_value(key, rng, pool, 3),
                mutate_value(value, rng, pool, depth + 1) if depth < 3 else value,
            )
        )
    else:
        items.append((rng.choice(["a", "b", "key", "x", ""]), atom_from(pool, rng)))
    return dict(items[:30])


def atom_from(pool, rng):
    """A scalar for a container: from the pool, else from the elements of its containers."""
    scalars = (int, float, str, bool, bytes, New, Member)
    atoms = [p for p in pool if type(p) in scalars]
    if not atoms:
        for p in pool:
            if type(p) in (list, tuple, set):
                atoms += (
                    [x for x in sorted(p, key=sort_key) if type(x) in scalars]
                    if type(p) is set
                    else [x for x in p if type(x) in scalars]
                )
            elif type(p) is dict:
                atoms += [x for x in p.values() if type(x) in scalars]
    return rng.choice(atoms or [0, 1, "a"])


def shape(v) -> str:
    """What kind of value a spec is, to keep replacements within an annotation's types."""
    if type(v) is New:
        return "new:" + ("" if v.root == "reference" else v.root + ":") + v.path
    if type(v) is Member:
        return "member:" + v.path.rpartition(".")[0]
    return type(v).__name__
