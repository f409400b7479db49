"""Sharding rules simulated on one process (no MPI): for an op call, the chooser picks a
strategy, every mesh coordinate runs the bound kernel on its blocks (cut from full numpy
arrays in the chosen input layouts, Partial mesh dims holding random terms), and the output
blocks must have the output layout's local shapes and reassemble (Shard: placed, Partial:
reduced, Replicate: equal) into numpy's result.  Also: every choice a rule lists, hypothesis
over random shapes / meshes / placements, classic strategy choices (Megatron, Partial
algebra), and the rules' error messages.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtensor.cost.model import CostModel
from mtensor.ops import RULES, OpCall, Operand, choose
from mtensor.ops.plans.indexing import normalize_index as normalize_key
from mtensor.placement import Partial, Replicate, Shard
from mtensor.testing.rules import assert_same, run_layouts

R, S0, S1, S2, S3 = Replicate(), Shard(0), Shard(1), Shard(2), Shard(3)
PS, PA, PM, PMIN = Partial("sum"), Partial("avg"), Partial("max"), Partial("min")
MODEL = CostModel()
REDUCTIONS = ("sum", "mean", "prod", "max", "min", "argmax", "argmin", "any", "all")
RNG = np.random.default_rng(0)


def A(*shape, dtype=float, seed=None):
    """Small integers (sums and products stay exact) as ``dtype``; ``seed`` for hypothesis."""
    rng = RNG if seed is None else np.random.default_rng(seed)
    return rng.integers(-4, 5, shape).astype(dtype)


def reference(name, values, params):
    a = values[0]
    if name in REDUCTIONS:
        axis, keepdims, dtype = params
        extra = {"dtype": dtype} if dtype else {}
        return getattr(np, name)(a, axis=axis, keepdims=keepdims, **extra)
    special = {"astype": lambda: a.astype(params[0]), "getitem": lambda: a[params[0]],
               "tensordot": lambda: np.tensordot(*values, axes=params),
               "einsum": lambda: np.einsum(params[0], *values),
               "concatenate": lambda: np.concatenate(values, axis=params[0]),
               "stack": lambda: np.stack(values, axis=params[0])}
    if name in special:
        return special[name]()
    if name in ("transpose", "reshape", "expand_dims", "squeeze", "broadcast_to"):
        return getattr(np, name)(a, *params)
    return getattr(np, name)(*values, **dict(params))  # ufuncs, where, clip, matmul, dot


def _dtype(v):
    return np.dtype(type(v)) if isinstance(v, (bool, int, float, complex)) else np.asarray(v).dtype


def simulate(name, args, params=(), mesh_shape=(2,), choice=None):
    """Run op ``name`` at every coordinate of ``mesh_shape`` and compare with numpy.

    ``args``: (value, placements) pairs, placements None for a constant; getitem takes the raw
    key in ``params``.  ``choice`` forces one of the rule's 1-D-mesh Choices instead of the
    chooser's pick.  Returns (in_layouts, out_layout, predicted cost)."""
    mesh_shape, values = tuple(mesh_shape), [v for v, _ in args]
    operands = tuple(Operand(np.shape(v), _dtype(v), p and tuple(p)) for v, p in args)
    rule_params = (normalize_key(params[0], np.shape(values[0])),) if name == "getitem" else params
    call = OpCall(name, operands, rule_params, mesh_shape)
    strategy = RULES[name](call)
    if choice is None:      # windows exchange halos: tests/mpi/test_halo.py runs those
        plain = [c for c in strategy.choices if c.window is None]
        in_layouts, out_layout, cost = choose(call, plain, MODEL)
    else:
        in_layouts, out_layout, cost = tuple((p,) for p in choice.inputs), (choice.output,), None
    rng = np.random.default_rng(1)
    outputs = run_layouts(strategy, [(v, p is None) for v, p in args], in_layouts, out_layout,
                          mesh_shape, rng, name)
    expected = reference(name, values, params)
    for got, exp in zip(outputs, expected if strategy.nout > 1 else (expected,)):
        exp = np.asarray(exp)
        assert (got.shape, got.dtype) == (exp.shape, exp.dtype)
        assert_same(got, exp, f"{name} in {in_layouts} -> {out_layout}")
    return in_layouts, out_layout, cost


def case(name, args, params=(), mesh=(2,)):
    pl = ",".join("C" if p is None else "".join(map(repr, p)) for _, p in args)
    ident = f"{name}{list(mesh)}[{pl}]{params}"[:90]
    return pytest.param(name, args, params, mesh, id=ident)


POS = np.abs(A(6, 5)) + 1
CASES = [
    # pointwise: broadcasting with differently sharded operands, constants, Partial algebra
    case("add", [(A(4, 6), [S0]), (A(6), [S0])]),
    case("add", [(A(7, 1, 5), [S0, S2]), (A(3, 5), [S1, R])], mesh=(2, 3)),
    case("add", [(A(5, 3, dtype="i4"), [S0]), (A(5, 3, dtype="i4"), [S1])], mesh=(3,)),
    case("add", [(A(4, 3), [PS, S1]), (A(4, 3), [PS, S1])], mesh=(2, 2)),
    case("add", [(A(4, 3), [S0]), (A(4, 3), [R])], (("dtype", np.dtype("f4")),), mesh=(4,)),
    case("add", [(A(4, 3), [PM]), (A(3), [R])], mesh=(3,)),
    case("add", [(A(3), [S0]), (A(3), [PS])], mesh=(1,)),
    case("subtract", [(A(4, 4), [PM]), (A(4), [R])]),
    case("multiply", [(A(6, 4), [PS]), (2.5, None)], mesh=(3,)),
    case("multiply", [(A(5, 4), [S1]), (A(4), None)], mesh=(4,)),
    case("multiply", [(A(4, 3), [PA]), (A(4, 3), [R])]),
    case("multiply", [(A(4, 3), [R, PS]), (A(4, 3), [PS, R])], mesh=(2, 2)),
    case("divide", [(A(5), [PS]), (POS[0], [R])], mesh=(4,)),
    case("exp", [(A(5, 3), [PS])]), case("exp", [(A(5, 3), [S0, S1])], mesh=(2, 2)),
    case("maximum", [(A(6), [PM]), (A(6), [PM])], mesh=(4,)),
    case("maximum", [(A(3, 4), [S1]), (0.0, None)], mesh=(3,)),
    case("negative", [(A(5), [PM])], mesh=(4,)), case("greater", [(A(5, 4), [S0]), (A(4), [R])]),
    case("less_equal", [(A(5, 4), [S1, S0]), (A(5, 4), [R, S0])], mesh=(2, 2)),
    case("divmod", [(A(6, 5), [S0]), (POS, [S1])]),
    case("divmod", [(A(6, 5), [S0, R]), (POS[0], [R, S0])], mesh=(2, 3)),
    case("where", [(A(5, 4) > 0, [S0]), (A(5, 4), [S1]), (0.0, None)]),
    case("where", [(A(5, 1) > 0, [S0, R]), (A(5, 4), [S0, S1]), (A(4), [R, R])], mesh=(2, 2)),
    case("clip", [(A(7, 3), [S0]), (-1.5, None), (2.0, None)], mesh=(4,)),
    case("clip", [(A(7, 3), [S1]), (A(3), [S0]), (A(3) + 4, None)], mesh=(3,)),
    case("astype", [(A(6, 4), [PM])], (np.dtype("i4"),)),
    case("astype", [(A(6, 4, dtype="i2"), [PS])], (np.dtype("f8"),), mesh=(3,)),
    case("astype", [(A(5, 3), [S1, S0])], (np.dtype("f4"),), mesh=(2, 2)),
    # contractions
    case("matmul", [(A(8, 6), [S0]), (A(6, 4), [S1])]),
    case("matmul", [(A(8, 6), [S1]), (A(6, 4), [S0])], mesh=(4,)),
    case("matmul", [(A(7, 6), [S0, S1]), (A(6, 5), [R, S0])], mesh=(2, 3)),
    case("matmul", [(A(3, 5, 6), [S0]), (A(6, 4), [S1])], mesh=(3,)),
    case("matmul", [(A(2, 1, 5, 6), [S0, S3]), (A(3, 6, 4), [S0, S1])], mesh=(2, 2)),
    case("matmul", [(A(6), [S0]), (A(6, 4), [S0])], mesh=(3,)),
    case("matmul", [(A(5, 6), [S0]), (A(6), [R])], mesh=(4,)),
    case("matmul", [(A(6), [S0]), (A(6), [S0])]),
    case("matmul", [(A(4, 6), [PS]), (A(6, 3), [R])]),
    case("dot", [(A(5, 6), [S1]), (A(6, 3), [S0])]),
    case("dot", [(A(4, 6), [S0, S1]), (A(2, 6, 3), [S1, R])], mesh=(2, 2)),
    case("dot", [(A(7), [S0]), (A(7), [R])], mesh=(4,)),
    case("tensordot", [(A(3, 4, 5), [S1]), (A(4, 3, 2), [S0])], ((0, 1), (1, 0)), (3,)),
    case("tensordot", [(A(3, 4, 5), [S2, S0]), (A(5, 2), [S0, R])], ((2,), (0,)), (2, 3)),
    case("einsum", [(A(4, 6), [S1]), (A(6, 5), [S0])], ("ij,jk->ik",)),
    case("einsum", [(A(4, 6), [S0, S1]), (A(6, 5), [R, S1])], ("ij,jk->ik",), (2, 2)),
    case("einsum", [(A(3, 4, 5), [S0]), (A(3, 5, 2), [S2])], ("bij,bjk->bik",), (3,)),
    case("einsum", [(A(2, 3, 4, 5), [S1]), (A(5, 6), [S1])], ("...ij,jk",), (3,)),
    case("einsum", [(A(5, 5), [S0])], ("ii->i",), (4,)),
    case("einsum", [(A(4, 4), [PS])], ("ii->i",)),
    case("einsum", [(A(7, 3), [S0])], ("ij->j",), (4,)),
    # views
    case("transpose", [(A(4, 6, 3), [S0, S2])], (None,), (2, 3)),
    case("transpose", [(A(4, 6, 3), [S1])], ((1, 0, 2),), (3,)),
    case("transpose", [(A(5, 3), [PS])], ((-1, 0),)),
    *[case("reshape", [(A(*src), [S0])], (dst,), (4,)) for src, dst in [
        ((8, 3), (24,)), ((8, 3), (-1,)), ((7, 3), (21,)), ((24,), (8, 3)), ((12,), (3, 4)),
        ((5, 1, 3), (5, 3))]],
    case("reshape", [(A(4, 6), [S1])], ((4, 2, 3),)),
    case("reshape", [(A(4, 6), [S0, S1])], ((2, 2, 6),), (2, 3)),
    case("reshape", [(A(6, 4), [S0, R])], ((6, 2, 2),), (2, 2)),
    case("reshape", [(A(16), [S0, S0])], ((4, 4),), (2, 2)),
    case("reshape", [(A(2, 3), [PS])], ((3, 2),), (3,)),
    case("expand_dims", [(A(5, 3), [S1])], (0,), (3,)),
    case("expand_dims", [(A(5, 3), [S0, S1])], ((0, 2),), (2, 2)),
    case("squeeze", [(A(5, 1, 3), [S0])], (None,), (4,)),
    case("squeeze", [(A(1, 4), [S0])], ((0,),), (4,)),
    case("broadcast_to", [(A(3, 1), [S0])], ((2, 3, 4),), (3,)),
    case("broadcast_to", [(A(4), [S0, R])], ((3, 4),), (2, 2)),
    case("broadcast_to", [(A(4), [PS])], ((2, 4),)),
    # joins
    case("concatenate", [(A(3, 4), [S1]), (A(5, 4), [S0])], (0,)),
    case("concatenate", [(A(5, 2), [S0]), (A(5, 3), [S0])], (1,), (4,)),
    case("concatenate", [(A(2, 3), [PS]), (A(2, 3), [PS])], (0,), (3,)),
    case("stack", [(A(3, 4), [S0, R]), (A(3, 4), [S1, S0])], (0,), (2, 2)),
    case("stack", [(A(7, 4), [S0]), (A(7, 4), [S0])], (-1,), (4,)),
    # getitem on sharded dims
    *[case("getitem", [(A(7, 5), [S0])], (key,), (4,)) for key in [
        slice(1, 6, 2), slice(None, None, -1), slice(6, 0, -3), 3, -1, (Ellipsis, 2),
        (None, slice(2, 5)), (slice(None), 4), (1, None, slice(None, None, -2)),
        slice(-9, None, -1)]],
    case("getitem", [(A(3), [S0])], (slice(None, None, -1),), (4,)),
    case("getitem", [(A(6, 4), [PS])], (slice(1, 4),)),
    case("getitem", [(A(6, 4, dtype="i8"), [S0])], ((slice(4, None, -2), 1),), (3,)),
    case("getitem", [(A(4, 6), [S0, S0])], ((slice(1, 3),),), (2, 2)),
    *[case("getitem", [(A(*shp), lay)], (key,), mesh) for shp, lay, key, mesh in [
        ((5, 4, 3), [S1, S0], (None, 1, Ellipsis, slice(0, 2)), (2, 3)),
        ((4, 6), [S0, S1], (Ellipsis, slice(None, None, 2)), (2, 2)),
        ((4, 6), [S0, S1], slice(1, 3), (2, 2))]],
]
for name in REDUCTIONS:
    x = A(7, 3) > 0 if name in ("any", "all") else A(7, 3)
    for axis in (None, 0, -1) + (() if name.startswith("arg") else ((0, 1),)):
        CASES += [case(name, [(x, [S0])], (axis, keep, None), mesh=(4,)) for keep in (False, True)]
    CASES += [case(name, [(x[:5], [S0, S1])], (0, False, None), mesh=(2, 2)),
              case(name, [(x, [S1])], (1, True, None), mesh=(3,))]
CASES += [case(name, [(A(3, 4), [S0])], (axis, False, None), mesh=(4,))  # empty shards
          for name in ("max", "min", "mean", "sum") for axis in (None, 0, 1)]
CASES += [case("sum", [(A(5, 4), [PS])], (0, False, None)),
          case("mean", [(A(5, 4), [PS, S0])], (1, True, None), mesh=(2, 3)),
          case("max", [(A(5, 4), [PM])], (None, False, None), mesh=(3,)),
          case("sum", [(A(5, 4, dtype="i1"), [S0])], ((0, 1), False, np.dtype("i2")), (4,)),
          case("mean", [(A(7, 3, dtype="f4"), [S0])], (0, False, None), (4,))]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name, args, params, mesh", CASES)
def test_chosen_strategy_reproduces_numpy(name, args, params, mesh):
    simulate(name, args, params, mesh)


ONE_D = [p for p in CASES if len(p.values[3]) == 1 and p.values[3] != (1,)]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name, args, params, mesh", ONE_D)
def test_every_listed_choice_is_valid(name, args, params, mesh):
    """The chooser may pick any listed choice under some cost model, so each must be right."""
    operands = [(np.shape(v), _dtype(v), p and tuple(p)) for v, p in args]
    key = (normalize_key(params[0], operands[0][0]),) if name == "getitem" else params
    call = OpCall(name, tuple(Operand(*o) for o in operands), key, mesh)
    for choice in RULES[name](call).choices:
        if choice.window is None and not any(isinstance(w, Partial) and (p is None or dt.kind == "b")
                   for (_, dt, p), w in zip(operands, choice.inputs)):
            simulate(name, args, params, mesh, choice=choice)


def test_reversed_slices_of_a_replicated_array():
    for key in (slice(None, None, -1), slice(5, None, -2), (0, slice(-2, None, -3))):
        simulate("getitem", [(A(7, 5), [R])], (key,), (2,))


def test_reversed_slice_starting_before_index_0():
    simulate("getitem", [(A(7, 5), [R])], (slice(-9, None, -1),), (2,))


def test_wrapping_cast_of_max_terms():
    simulate("astype", [(np.zeros(8, np.int8), [PM])], (np.dtype(np.uint8),), (2,))


def test_unsigned_negative_of_max_terms():
    simulate("negative", [(np.ones(8, np.uint8), [PM])], (), (2,))


# --- hypothesis: random shapes, meshes and placements -----------------------------------------

shapes = st.lists(st.integers(0, 7), min_size=1, max_size=3).map(tuple)
meshes = st.lists(st.integers(1, 4), min_size=1, max_size=2).map(tuple)


def layout(data, ndim, mesh):
    return [data.draw(st.sampled_from([R] + [Shard(d) for d in range(ndim)])) for _ in mesh]


@settings(max_examples=60, deadline=None)
@given(st.data(), shapes, meshes, st.sampled_from(["add", "multiply", "maximum", "greater"]))
def test_property_binary_ufunc(data, shape, mesh, name):
    k = data.draw(st.integers(0, len(shape)))
    other = tuple(data.draw(st.sampled_from([s, 1])) for s in shape[len(shape) - k:])
    args = [(A(*shape, seed=0), layout(data, len(shape), mesh)),
            (A(*other, seed=1), layout(data, k, mesh))]
    simulate(name, args[::data.draw(st.sampled_from([1, -1]))], (), mesh)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@settings(max_examples=60, deadline=None)
@given(st.data(), shapes, meshes, st.booleans(),
       st.sampled_from(["sum", "mean", "prod", "max", "min", "argmax", "any"]))
def test_property_reduction(data, shape, mesh, keepdims, name):
    ints = st.integers(-len(shape), len(shape) - 1)
    axis = data.draw(st.one_of(st.none(), ints) if name == "argmax" else
                     st.one_of(st.none(), ints, st.sets(st.integers(0, len(shape) - 1)).map(tuple)))
    x = A(*shape, seed=0) > 0 if name == "any" else A(*shape, seed=0)
    args, params = [(x, layout(data, len(shape), mesh))], (axis, keepdims, None)
    reduced = range(len(shape)) if axis is None else np.atleast_1d(axis)
    if name in ("max", "min", "argmax") and any(shape[d] == 0 for d in reduced):
        with pytest.raises(ValueError, match="zero-size reduction"):
            simulate(name, args, params, mesh)
    else:
        simulate(name, args, params, mesh)


@settings(max_examples=60, deadline=None)
@given(st.data(), shapes, meshes)
def test_property_transpose(data, shape, mesh):
    axes = data.draw(st.one_of(st.none(), st.permutations(range(len(shape))).map(tuple)))
    simulate("transpose", [(A(*shape, seed=0), layout(data, len(shape), mesh))], (axes,), mesh)


@settings(max_examples=60, deadline=None)
@given(st.data(), st.lists(st.integers(0, 7), min_size=3, max_size=3), st.integers(1, 3), meshes)
def test_property_matmul(data, sizes, batch, mesh):
    m, k, n = sizes
    a = data.draw(st.sampled_from([(k,), (m, k), (batch, m, k), (1, m, k)]))
    b = data.draw(st.sampled_from([(k,), (k, n), (batch, k, n), (1, k, n)]))
    args = [(A(*x, seed=j), layout(data, len(x), mesh)) for j, x in enumerate((a, b))]
    simulate("matmul", args, (), mesh)


# --- classic strategies: Megatron blocks and the algebra of Partial ---------------------------

def test_megatron_mlp_on_a_1d_mesh():
    assert simulate("matmul", [(A(8, 16), [R]), (A(16, 32), [S1])], (), (4,))[1:] == ((S1,), 0)
    assert simulate("matmul", [(A(8, 32), [S1]), (A(32, 16), [S0])], (), (4,))[1:] == ((PS,), 0)
    # weight gradient X.T @ dY with X and dY sharded on the batch dim
    xt = simulate("transpose", [(A(8, 16), [S0])], (None,), (4,))[1]
    assert xt == (S1,)
    assert simulate("matmul", [(A(16, 8), xt), (A(8, 32), [S0])], (), (4,))[1:] == ((PS,), 0)


def test_megatron_with_data_parallel_on_a_2d_mesh():
    out = simulate("matmul", [(A(8, 16), [S0, R]), (A(16, 32), [R, S1])], (), (2, 2))
    assert out[1:] == ((S0, S1), 0)
    out = simulate("matmul", [(A(8, 32), [S0, S1]), (A(32, 16), [R, S0])], (), (2, 2))
    assert out[1:] == ((S0, PS), 0)


def test_misaligned_annotation_costs_communication():
    assert simulate("matmul", [(A(8, 16), [S1]), (A(16, 32), [S1])], (), (4,))[2] > 0


@pytest.mark.parametrize("name, args, out", [
    ("add", [(A(6, 4), [PS]), (A(6, 4), [PS])], (PS,)),
    ("multiply", [(A(6, 4), [PS]), (3.0, None)], (PS,)),
    ("multiply", [(A(6, 4), [PS]), (A(4), [R])], (PS,)),
    ("maximum", [(A(6, 4), [PM]), (A(6, 4), [PM])], (PM,)),
    ("negative", [(A(6, 4), [PM])], (PMIN,)),
])
def test_partial_algebra_keeps_terms_for_free(name, args, out):
    assert simulate(name, args, (), (4,))[1:] == (out, 0)


def test_nonlinear_op_on_partial_reduces_first():
    _, out, cost = simulate("exp", [(A(6, 4), [PS])], (), (4,))
    assert not any(isinstance(p, Partial) for p in out) and cost > 0


# --- errors ------------------------------------------------------------------------------------

def rule(name, *shapes, params=(), mesh=(2,)):
    operands = tuple(Operand(s, np.dtype(float), (R,) * len(mesh)) for s in shapes)
    return RULES[name](OpCall(name, operands, params, mesh))


@pytest.mark.parametrize("name, shapes, params, words", [
    ("matmul", [(8, 6), (5, 4)], (), ["matmul", "(8, 6)", "(5, 4)", "6 != 5"]),
    ("matmul", [(3, 6), (4,)], (), ["matmul", "6 != 4"]),
    ("add", [(3, 4), (5,)], (), ["(3, 4)", "(5,)", "broadcast"]),
    ("sum", [(3, 4)], (2, False, None), ["axis 2", "out of range"]),
    ("argmax", [(3, 4)], (-3, False, None), ["axis -3"]),
    ("reshape", [(4, 6)], ((5, 5),), ["24", "(5, 5)"]),
    ("max", [(0, 3)], (0, False, None), ["zero-size"]),
    ("min", [(3, 0)], (None, False, None), ["zero-size"]),
])
def test_errors_name_what_went_wrong(name, shapes, params, words):
    with pytest.raises(ValueError) as info:
        rule(name, *shapes, params=params)
    assert all(w in str(info.value) for w in words), str(info.value)


def test_max_over_a_nonempty_axis_of_an_empty_array_is_fine():
    assert rule("max", (0, 3), params=(1, False, None)).out_shape == (0,)
