"""Sharding rules simulated on one process (no MPI): every coordinate of a mesh holds its
block of each full numpy input, cut by the layout the rule asks for (Partial mesh dims hold
random terms that reduce to the value), runs the kernel on its blocks, and the output blocks
must have the layout's local shapes and reassemble (Shard: placed, Partial: reduced,
Replicate: equal) into numpy's result.  ``check_rule`` is the public door for a rule taught
with ``mt.register_sharding``; the unit tests of the built-in rules use the same pieces.
"""
from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np

from ..ops.registry import OpCall, Operand
from ..ops.user_rules import Route, resolve
from ..placement import Partial, Replicate, local_shape, local_slices, mesh_coords
from ..spec import fmt_placements

R = Replicate()
COMBINE = {"sum": lambda s: np.add.reduce(s, axis=0, dtype=s.dtype),
           "avg": lambda s: (np.add.reduce(s, axis=0) / len(s)).astype(s.dtype),
           "max": lambda s: np.maximum.reduce(s, axis=0),
           "min": lambda s: np.minimum.reduce(s, axis=0)}


def groups(mesh_shape, layout):
    """Mesh coordinates grouped by their coordinates on the non-Partial mesh dims."""
    out = {}
    for c in mesh_coords(mesh_shape):
        key = tuple(x for x, p in zip(c, layout) if not isinstance(p, Partial))
        out.setdefault(key, []).append(c)
    return list(out.values())


def partial_op(layout):
    """The one reduce op of a layout's Partial mesh dims (None without any)."""
    ops = {p.reduce_op for p in layout if isinstance(p, Partial)}
    assert len(ops) <= 1, f"mixed Partial ops {layout} are not simulated"
    return ops.pop() if ops else None


def blocks_of(value, layout, mesh_shape, rng):
    """Each coordinate's block of ``value`` in ``layout``.  On Partial mesh dims the other ranks
    hold random terms and the group's first rank makes up the difference; ranks that differ
    only on Replicate mesh dims hold the same terms."""
    full = np.asarray(value)
    blocks = {c: full[local_slices(full.shape, mesh_shape, layout, c)]
              for c in mesh_coords(mesh_shape)}
    op, rep = partial_op(layout), [p == R for p in layout]
    for group in groups(mesh_shape, layout) if op else ():
        if any(x and r for x, r in zip(group[0], rep)):
            continue  # made from its replica at Replicate coordinate 0, below
        x, rest = blocks[group[0]], group[1:]
        noise = {c: rng.integers(0 if op in ("max", "min") else -3, 4, x.shape) for c in rest}
        if op in ("max", "min"):
            blocks.update({c: shift(x, n if op == "min" else -n) for c, n in noise.items()})
        else:
            blocks.update({c: n.astype(x.dtype) for c, n in noise.items()})
            blocks[group[0]] = x * (len(group) if op == "avg" else 1) - sum(blocks[c] for c in rest)
    return {c: blocks[tuple(0 if r else x for x, r in zip(c, rep))] for c in blocks}


def shift(x, n):
    """``x + n`` without wrapping round an integer dtype's range (max/min terms stay valid)."""
    if x.dtype.kind not in "iu":
        return x + n
    info = np.iinfo(x.dtype)
    return np.clip(x.astype(np.int64) + n, info.min, info.max).astype(x.dtype)


def const_blocks(value, layout, mesh_shape):
    """A constant as dispatch passes it: whole, or sliced where the layout shards it."""
    if all(p == R for p in layout):
        return dict.fromkeys(mesh_coords(mesh_shape), value)
    return {c: np.asarray(value)[local_slices(np.shape(value), mesh_shape, layout, c)]
            for c in mesh_coords(mesh_shape)}


def assemble(blocks, shape, layout, mesh_shape):
    """The full array from every coordinate's output block (Partial reduced, R checked equal)."""
    op, out, covered = partial_op(layout), None, np.zeros(shape, bool)
    for group in groups(mesh_shape, layout):
        stacked = np.stack([np.asarray(blocks[c]) for c in group])
        value = stacked[0] if op is None else COMBINE[op](stacked)
        where = local_slices(shape, mesh_shape, layout, group[0])
        out = np.zeros(shape, value.dtype) if out is None else out
        if covered[where].any():
            assert_same(out[where], value, f"replicated blocks differ under {layout}")
        out[where], covered[where] = value, True
    assert covered.all(), f"output layout {layout} leaves elements unheld"
    return out


def tolerance(dtype) -> float:
    """1e-9 for double precision, 1e-5 below (float32 sums in another order)."""
    dtype = np.dtype(dtype)
    return 1e-9 if dtype.itemsize >= 8 * (1 + (dtype.kind == "c")) else 1e-5


def assert_same(got, want, msg=""):
    want = np.asarray(want)
    if want.dtype.kind in "fc":
        tol = tolerance(want.dtype)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=msg)
    else:
        np.testing.assert_array_equal(got, want, err_msg=msg)


def run_layouts(strategy, args, in_layouts, out_layout, mesh_shape, rng, name="op"):
    """Every coordinate runs the strategy's kernel on its blocks; the assembled outputs.
    ``args``: (full value, is a constant) per operand."""
    blocks = [const_blocks(v, lay, mesh_shape) if const else blocks_of(v, lay, mesh_shape, rng)
              for (v, const), lay in zip(args, in_layouts)]
    outs = {}
    for c in mesh_coords(mesh_shape):
        mesh = SimpleNamespace(shape=mesh_shape, coordinate=c)
        result = strategy.bind(in_layouts, out_layout, mesh)(*(b[c] for b in blocks))
        outs[c] = result if strategy.nout > 1 else (result,)
        want = local_shape(strategy.out_shape, mesh_shape, out_layout, c)
        for r in outs[c]:
            assert np.shape(r) == want, f"{name} at {c}: {np.shape(r)}, {out_layout} says {want}"
    return [assemble({c: o[k] for c, o in outs.items()}, strategy.out_shape, out_layout,
                     mesh_shape) for k in range(strategy.nout)]


def _simulable(values, in_layouts, out_layout) -> bool:
    """Terms of bools cannot be made, nor layouts mixing two reduce ops simulated."""
    for v, layout in zip(values, in_layouts):
        ops = {p.reduce_op for p in layout if isinstance(p, Partial)}
        if len(ops) > 1 or (ops and v.dtype.kind == "b"):
            return False
    return len({p.reduce_op for p in out_layout if isinstance(p, Partial)}) <= 1


def _describe(combo) -> str:
    text = [f"{fmt_placements(c.inputs)} -> {c.output!r}" for c in combo]
    return f"choice {text[0]}" if len(text) == 1 else f"choices {'; '.join(text)} (per mesh dim)"


def _compare(where, got, want) -> None:
    if (got.shape, got.dtype) != (want.shape, want.dtype):
        raise AssertionError(f"{where}: the output has shape {got.shape} and dtype {got.dtype}, "
                             f"numpy's {want.shape} and {want.dtype}")
    if want.dtype.kind in "fc":
        tol = tolerance(want.dtype)
        same = np.isclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    else:
        same = got == want
    if not same.all():
        at = tuple(int(i) for i in np.argwhere(~same)[0])
        raise AssertionError(f"{where}: element {at} is {got[at]} where numpy gives "
                             f"{want[at]} ({int((~same).sum())} of {same.size} differ)")


def check_rule(op, rule, *args, mesh_shapes=((2,), (3,), (2, 2)), kernel=None, out_shape=None,
               seed=0, **kwargs) -> None:
    """Check a rule for ``mt.register_sharding`` without MPI: for each mesh shape and every
    combination of the rule's choices over its mesh dims, the example arrays among ``args``
    and ``kwargs`` are laid out as the choice asks on a simulated mesh, the kernel runs on
    every block, and the assembled output must equal ``op(*args, **kwargs)`` in numpy.
    ``kernel`` and ``out_shape`` as for ``register_sharding``.  Raises AssertionError naming
    the op, the choice, the mesh shape and the first differing element.  Layouts that mix
    two reduce ops, or ask for terms of bools, are not simulated."""
    route = Route(resolve(op), rule, kernel, out_shape)
    name, operands, params, _ = route.split(args, kwargs)
    values = [np.asarray(v) for v in operands]
    with np.errstate(all="ignore"):
        expected = np.asarray(route.op(*args, **kwargs))
    rng = np.random.default_rng(seed)
    for mesh_shape in map(tuple, mesh_shapes):
        placed = tuple(Operand(v.shape, v.dtype, (R,) * len(mesh_shape)) for v in values)
        strategy = route(OpCall(name, placed, params, mesh_shape))
        if strategy.out_shape != expected.shape:
            raise AssertionError(f"check_rule: {name}: the output shape is {strategy.out_shape}, "
                                 f"numpy's {expected.shape}")
        for combo in itertools.product(strategy.choices, repeat=len(mesh_shape)):
            in_layouts = tuple(tuple(c.inputs[j] for c in combo) for j in range(len(values)))
            out_layout = tuple(c.output for c in combo)
            if not _simulable(values, in_layouts, out_layout):
                continue
            where = f"check_rule: {name} {_describe(combo)} on mesh {mesh_shape}"
            try:
                with np.errstate(all="ignore"):
                    got, = run_layouts(strategy, [(v, False) for v in values], in_layouts,
                                       out_layout, mesh_shape, rng, name)
            except AssertionError as e:
                raise AssertionError(f"{where}: {e}") from None
            except Exception as e:
                raise AssertionError(f"{where}: the kernel raised {type(e).__name__}: {e}") from e
            _compare(where, got, expected)
