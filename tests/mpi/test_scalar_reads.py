"""Reads of single elements and slices, against numpy, on every layout of the ``mesh``
fixture's meshes (Replicate, Shard on each dim, Partial(sum)) of odd-sized 0-D to 3-D arrays.

* One integer per dim (Python, numpy integer types, negative too) is numpy's scalar read: a
  copy.  After the source is written (``+=``, through a transpose view, item assignment) the
  value read is unchanged; writing the value read leaves the source alone; the swap idiom
  ``s[i], s[j] = s[j], s[i]`` works; ``x[..., i]`` stays a view, as numpy's.
* Signed zeros, infinities and NaN at every position come back bit for bit, by integer index,
  ``item``, slices, ``take``, index arrays and ``diagonal`` (split dims are picked into partial
  terms: the other ranks' terms must leave the value as it is)."""
import itertools

import numpy as np
import pytest
from mpi_helpers import assert_all_ranks, host, layouts, thin

import mtensor as mt

SHAPES = [(7,), (5, 3), (3, 2, 5)]
SPECIAL = np.array([-0.0, 0.0, -np.inf, np.inf, np.nan, 1.5, -2.0])


def _keys(shape):
    """(position, key) for every position: ints per dim in forms that change with the
    position (Python ints, negative ints, numpy integer types); on 1-D both ``x[i]`` and
    ``x[(i,)]``."""
    forms = [lambda i, n: i, lambda i, n: i - n, lambda i, n: np.int8(i),
             lambda i, n: np.uint8(i), lambda i, n: np.int64(i - n), lambda i, n: np.intp(i)]
    keys = []
    for k, pos in enumerate(np.ndindex(shape)):
        key = tuple(forms[(k + d) % len(forms)](i, n)
                    for d, (i, n) in enumerate(zip(pos, shape)))
        keys.append((pos, key[0] if len(key) == 1 and k % 2 else key))
    return keys


def _value(x):
    """A read's value as a numpy 0-d array (a collective)."""
    return np.asarray(host(x))


def _same_bits(got, want) -> bool:
    """Equal bit for bit (any NaN matches any NaN), real and imaginary parts apart."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if want.dtype.kind == "c":
        return _same_bits(got.real, want.real) and _same_bits(got.imag, want.imag)
    if want.dtype.kind != "f":
        return np.array_equal(got, want)
    nan = np.isnan(want)
    bits = np.dtype(f"u{want.dtype.itemsize}")
    return bool(np.array_equal(np.isnan(got), nan)
                and np.array_equal(got[~nan].view(bits), want[~nan].view(bits)))


@pytest.mark.mpi
def test_a_full_integer_read_is_a_copy(mesh):
    bad = []
    for shape in SHAPES:
        full = np.arange(np.prod(shape), dtype=np.float64).reshape(shape) - 4
        keys = _keys(shape)
        for placements in layouts(mesh.ndim, len(shape)):
            where = (shape, placements)
            x = mt.distribute_tensor(full, mesh, placements)
            reads = [(pos, x[key]) for pos, key in keys]
            corner = (0,) * (len(shape) - 1)
            view = x[corner + (Ellipsis, -1)]       # no dim left, but numpy's view
            want = full.copy()
            x += 10
            want += 10
            t = x.transpose()
            t *= 3                                  # a write through a transpose view
            want *= 3
            x[keys[-1][1]] = -5.0                   # item assignment
            want[keys[-1][0]] = -5.0
            bad += [(where, "read", pos, _value(r)) for pos, r in reads if _value(r) != full[pos]]
            if _value(view) != want[corner + (-1,)]:
                bad.append((where, "x[..., i] is no view", _value(view)))
            first = reads[0][1]
            first[()] = 99.0                        # writing the read leaves the source alone
            first += 1
            if not np.array_equal(host(x), want) or _value(first) != 100.0:
                bad.append((where, "source changed by writing its read"))
            a, b = keys[1][1], keys[-2][1]
            x[a], x[b] = x[b], x[a]
            want[keys[1][0]], want[keys[-2][0]] = want[keys[-2][0]], want[keys[1][0]]
            if not np.array_equal(host(x), want):
                bad.append((where, "swap", host(x), want))
    assert_all_ranks(not bad, f"{bad[:4]}")


@pytest.mark.mpi
def test_0d_arrays_items_and_iteration(mesh):
    bad = []
    for placements in layouts(mesh.ndim, 0):
        z = mt.distribute_tensor(np.array(-0.0), mesh, placements)
        copy, view = z[()], z[...]
        z += 3.0
        if not (_same_bits(_value(copy), np.array(-0.0)) and _value(view) == 3.0):
            bad.append((placements, "0-d", _value(copy), _value(view)))
    for placements in layouts(mesh.ndim, 1):
        full = np.array([3.0, -0.0, 1.0, -np.inf, 2.0])
        x = mt.distribute_tensor(full, mesh, placements)
        by_array = x[np.array(3)]
        items = [x.item(i) for i in range(5)] + [x.item((4,)), x.flat[1].item()]
        listed = list(x)
        x -= 7.0
        if not _same_bits(_value(by_array), np.array(-np.inf)):
            bad.append((placements, "0-d index array", _value(by_array)))
        if not _same_bits(np.array(items), full[[0, 1, 2, 3, 4, 4, 1]]):
            bad.append((placements, "item", items))
        if not _same_bits(np.array([_value(v) for v in listed]), full):
            bad.append((placements, "iteration", [_value(v) for v in listed]))
    assert_all_ranks(not bad, f"{bad[:4]}")


def _specials(shape, shift, dtype):
    """``SPECIAL`` laid over ``shape`` from ``shift``: over the shifts every position holds
    each value; complex values pair two of them (signed zero parts included)."""
    flat = np.arange(int(np.prod(shape))) + shift
    real = SPECIAL[flat % len(SPECIAL)]
    out = np.empty(shape, dtype)
    out.real = real.reshape(shape)
    if out.dtype.kind == "c":
        out.imag = SPECIAL[(flat * 3 + 1) % len(SPECIAL)].reshape(shape)
    return out


def _slice_keys(shape):
    """Slices that cross every block boundary of a split dim, forwards and backwards."""
    cuts = [slice(None), slice(1, None), slice(None, None, -1), slice(-2, 0, -2)]
    return [tuple(cuts[(k + d) % len(cuts)] for d in range(len(shape))) for k in range(4)]


def _picks(full):
    """(name, function of x) of the selections that pick along split dims."""
    n = full.shape[0]
    rows = np.array([n - 1, 0, n // 2, 1])
    picks = [("take", lambda x: np.take(x, rows, axis=0)),
             ("index array", lambda x: x[rows]),
             ("take flat", lambda x: np.take(x, [0, full.size - 1, 2]))]
    if full.ndim == 2:
        picks.append(("diagonal", lambda x: np.diagonal(x)))
    return picks


@pytest.mark.mpi
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_special_values_come_back_bit_for_bit(mesh, dtype):
    bad = []
    shapes = SHAPES if dtype == np.float64 else SHAPES[:2]
    for shape, shift in itertools.product(shapes, range(len(SPECIAL))):
        full = _specials(shape, shift, dtype)
        with np.errstate(invalid="ignore"):
            negated = -full
        # integer reads: each value at each position for float64 up to 2-D, else a third
        # of the positions per shift (the slices read every position)
        step = 1 if len(shape) < 3 and dtype == np.float64 else 3
        for placements in thin(layouts(mesh.ndim, len(shape)), mesh):
            where = (shape, shift, placements)
            x = mt.distribute_tensor(full, mesh, placements)
            for pos, key in _keys(shape)[shift % step::step]:
                read = x[key]
                if not _same_bits(_value(read), full[pos]):
                    bad.append((where, key, _value(read), full[pos]))
                if not _same_bits(_value(-read), negated[pos]):
                    bad.append((where, "-x[key]", key, _value(-read)))
            for key in _slice_keys(shape):
                if not _same_bits(host(x[key]), full[key]):
                    bad.append((where, key, host(x[key]), full[key]))
            for name, pick in _picks(full):
                if not _same_bits(host(pick(x)), pick(full)):
                    bad.append((where, name, host(pick(x)), pick(full)))
    assert_all_ranks(not bad, f"{len(bad)} wrong: {bad[:3]}")


@pytest.mark.mpi
def test_integer_reads_and_zero_written_into_partial_terms(mesh):
    """Integers pick exactly (their identity is 0); ``-0.0`` written into a Partial(sum)
    tensor stays ``-0.0`` (the other coordinates' terms are the sum's identity)."""
    bad = []
    info = np.iinfo(np.int64)
    ints = np.array([info.min, -1, 0, info.max, 7])
    for placements in layouts(mesh.ndim, 1):
        x = mt.distribute_tensor(ints, mesh, placements)
        got = [_value(x[i]) for i in range(5)]
        if not np.array_equal(got, ints) or not np.array_equal(host(x[::-2]), ints[::-2]):
            bad.append((placements, "int64", got))
        y = mt.distribute_tensor(np.ones(5), mesh, placements)
        y[3] = -0.0
        y[1:3] = np.array([-0.0, -np.inf])
        want = np.array([1.0, -0.0, -np.inf, -0.0, 1.0])
        if not _same_bits(host(y), want):
            bad.append((placements, "write -0.0", host(y)))
    assert_all_ranks(not bad, f"{bad[:4]}")
