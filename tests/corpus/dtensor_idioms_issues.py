"""DTensor issues that report a wrong answer, each repro translated to numpy + mtensor (the
registry and the translation rules are in dtensor_idioms.py; README.md cites each issue).
The reference is what the reporter expected: the same program on one process."""
import numpy as np
from dtensor_idioms import mesh_2d, per_rank, randn, rank_of, registry

import mtensor as mt
from mtensor import Partial, Replicate, Shard

IDIOMS, idiom = registry()
ISSUE = "github.com/pytorch/pytorch/issues/"
PULL = "github.com/pytorch/pytorch/pull/"


@idiom("issue_162692_mean_uneven", ISSUE + "162692 (Incorrect results of DTensor.mean with "
       "uneven sharding; a 1x4 input gives NaN)",
       lambda: (np.arange(12.0).reshape(-1, 4), np.arange(4.0).reshape(1, 4)),
       lambda world, a, b: (a.mean(), b.mean(), a.mean(axis=0)))
def issue_162692(mesh, tensor, one_row):
    dt = mt.distribute_tensor(tensor, device_mesh=mesh, placements=[Shard(0)])
    small = mt.distribute_tensor(one_row, device_mesh=mesh, placements=[Shard(0)])
    return dt.mean().full_tensor(), small.mean().full_tensor(), dt.mean(axis=0).full_tensor()


@idiom("issue_163193_partial_plus_scalar", ISSUE + "163193 (Incorrect results when adding "
       "partial DTensor with a scalar: sss + tensor10, sss + value10)",
       lambda: (np.arange(10.0).reshape(10, 1),),
       lambda world, t: (t.sum() + np.array(10), t.sum() + 10))
def issue_163193(mesh, tensor):
    dt = mt.distribute_tensor(tensor, device_mesh=mesh, placements=[Shard(0)])
    sss = dt.sum()
    res = [sss + np.array(10), sss + 10]
    return [r.full_tensor() if isinstance(r, mt.DTensor) else r for r in res]


@idiom("issue_147180_partial_scaled_twice", ISSUE + "147180 (Partial(sum) reductions wrongly "
       "cached: -5*dt == 2*dt when dt is Partial)", lambda: (),
       lambda world: (-5 * sum(per_rank((16, 16), world)) / 64,
                      2 * sum(per_rank((16, 16), world)) / 64, False))
def issue_147180(mesh):
    randn_local_tensor = randn(16, 16, seed=rank_of(mesh)) / 64
    dt = mt.DTensor.from_local(randn_local_tensor, mesh, placements=[Partial()])
    a, b = -5 * dt, 2 * dt
    return a.full_tensor(), b.full_tensor(), bool((a == b).all())


@idiom("issue_153603_scalar_after_reduction", ISSUE + "153603 (Scalar multiplication after "
       "reduction doesn't update result without calling .full_tensor() before)", lambda: (),
       lambda world: [np.float64(1.0 * i) for i in range(1, 4)])
def issue_153603(mesh):
    out = []
    for i in range(1, 4):
        x = np.array([1.0])
        dx = mt.DTensor.from_local(x, mesh, [Shard(0)])
        dy = dx.mean()
        out.append((dy * i).full_tensor())
    return out


def _clip_ref(world, g):
    total_norm = np.linalg.norm(g)
    clip_coef = 1.0 / (total_norm + 1e-6)
    return total_norm + 1e-6, g * min(clip_coef, 1.0)


@idiom("issue_149768_clip_grad_norm_eps", ISSUE + "149768 ([FSDP2][DTensor] numeric bug for "
       "DTensor + python float in gradient clipping: clip_coef = max_norm / (total_norm + "
       "1e-6))", lambda: (randn(13, 4) * 1e-7,), _clip_ref)
def issue_149768(mesh, g):
    grad = mt.distribute_tensor(g, mesh, [Shard(0)])
    total_norm = np.linalg.norm(grad)
    clip_coef = 1.0 / (total_norm + 1e-6)
    clip_coef_clamped = np.clip(clip_coef, None, 1.0)
    return (total_norm + 1e-6).full_tensor(), (grad * clip_coef_clamped).full_tensor()


@idiom("issue_145218_norm_plus_python_number", ISSUE + "145218 (different results when adding "
       "torch.Tensor or python number to a DTensor norm)", lambda: (randn(1000, 88),),
       lambda world, t: (np.linalg.norm(t) + 2, np.linalg.norm(t) + np.array(2)))
def issue_145218(mesh, tensor1):
    tensor2 = mt.distribute_tensor(tensor1, mesh, [Shard(0)])
    norm2 = np.linalg.norm(tensor2)
    norm3 = np.linalg.norm(tensor2)
    norm2 += 2
    norm3 += np.array(2)
    return norm2.full_tensor(), norm3.full_tensor()


def _norm_partial_ref(world):
    total = sum(np.array([1.0 + r, 3.0 - r]) for r in range(world))
    return np.linalg.norm(total), np.abs(total)


@idiom("pull_159856_norm_of_partial", PULL + "159856 (fix incorrect norm calculation for "
       "Partial DTensors: rank 0 [1., 3.], rank 1 [2., 1.])", lambda: (), _norm_partial_ref)
def pull_159856(mesh):
    r = rank_of(mesh)
    local_partial = np.array([1.0 + r, 3.0 - r])
    dt = mt.DTensor.from_local(local_partial, mesh, [Partial()])
    return np.linalg.norm(dt).full_tensor(), np.abs(dt).full_tensor()


@idiom("pull_165962_max_of_partial", PULL + "165962 (DTensor ops with Partial placements: max, "
       "min computed before the partial reduction)", lambda: (),
       lambda world: (sum(per_rank((5, 3), world)).max(), sum(per_rank((5, 3), world)).min(axis=0)))
def pull_165962(mesh):
    dt = mt.DTensor.from_local(randn(5, 3, seed=rank_of(mesh)), mesh, [Partial()])
    return dt.max().full_tensor(), dt.min(axis=0).full_tensor()


@idiom("pull_174536_abs_of_partial", PULL + "174536 (false positive P(sum) validation for "
       "non-linear ops like abs)", lambda: (),
       lambda world: (np.abs(sum(per_rank((6,), world))), np.exp(sum(per_rank((6,), world)))))
def pull_174536(mesh):
    dt = mt.DTensor.from_local(randn(6, seed=rank_of(mesh)), mesh, [Partial()])
    return np.abs(dt).full_tensor(), np.exp(dt).full_tensor()


@idiom("pull_157340_mul_partial_replicate", PULL + "157340 (partial propagation in pointwise "
       "ops: a * (r0 + r1) = a * r0 + a * r1, and a + (r0 + r1))", lambda: (randn(4, 3, seed=9),),
       lambda world, a: (a * sum(per_rank((4, 3), world)), a + sum(per_rank((4, 3), world))))
def pull_157340(mesh, a):
    lhs = mt.DTensor.from_local(randn(4, 3, seed=rank_of(mesh)), mesh, [Partial()])
    rhs = mt.distribute_tensor(a, mesh, [Replicate()])
    return (rhs * lhs).full_tensor(), (lhs + rhs).full_tensor()


@idiom("issue_179502_view_of_shard1", ISSUE + "179502 (sharded view incorrectly passes when "
       "redistribution is needed: dt[12, 8] S(1), view(-1, 6))", lambda: (randn(12, 8),),
       lambda world, t: t.reshape(-1, 6))
def issue_179502(mesh, tensor):
    dtensor = mt.distribute_tensor(tensor, mesh, [Shard(1)])
    return dtensor.reshape(-1, 6).full_tensor()


@idiom("issue_143372_uneven_view_flat", ISSUE + "143372 (Error in DTensor uneven shard view "
       "op: from_local Replicate -> Shard(0) -> view(-1))", lambda: (randn(6, 16),),
       lambda world, x: x.reshape(-1))
def issue_143372(mesh, x):
    d_x = mt.DTensor.from_local(x, device_mesh=mesh, placements=[Replicate()])
    d_x = d_x.redistribute(device_mesh=mesh, placements=[Shard(0)])
    return d_x.reshape(-1).full_tensor()


@idiom("issue_103306_uneven_roundtrip", ISSUE + "103306 (DTensor uneven sharding corner cases: "
       "from_local(x).redistribute(Shard(0)).redistribute(Replicate()).to_local() of a 5x10 "
       "x)", lambda: (randn(5, 10),), lambda world, x: (x.shape, x))
def issue_103306(mesh, x):
    y = mt.DTensor.from_local(x, mesh, [Replicate()]).redistribute(
        device_mesh=mesh, placements=[Shard(0)]).redistribute(
        device_mesh=mesh, placements=[Replicate()]).to_local()
    return y.shape, y


@idiom("issue_110762_from_local_uneven_size", ISSUE + "110762 (DTensor.from_local() creates "
       "DTensor with wrong .shape for un-even sharding: 10 rows)", lambda: (randn(10, 2),),
       lambda world, x: ((10, 2), x))
def issue_110762(mesh, x):
    local = np.array_split(x, mesh.size())[rank_of(mesh)]
    dt = mt.DTensor.from_local(local, mesh, [Shard(0)])
    return tuple(dt.shape), dt.full_tensor()


def _user_uneven_ref(world):
    chunks = [(np.arange(2 * (2 + r), dtype=np.float32) + np.float32(0.1 * r)).reshape(2, -1)
              for r in range(world)]
    return np.concatenate(chunks, axis=1)


@idiom("issue_144109_user_defined_uneven", ISSUE + "144109 (Uneven sharding leads to unexpected "
       "full_tensor: blocks of 2 + rank columns; run_check=True, as the maintainers advise)",
       lambda: (), _user_uneven_ref, refuses=((ValueError, "from_local"),))
def issue_144109(mesh):
    rank = rank_of(mesh)
    local_chunk = np.arange(2 * (2 + rank), dtype=np.float32) + np.float32(0.1 * rank)
    local_chunk = local_chunk.reshape((2, -1))
    dtensor = mt.DTensor.from_local(local_chunk, mesh, [Shard(1)], run_check=True)
    return dtensor.full_tensor()


@idiom("issue_168940_max_dim_indices", ISSUE + "168940 (aten.max.dim returns wrong indices on "
       "Shard(1): torch.max(dist_x, dim=1))", lambda: (randn(4, 4),),
       lambda world, x: (x.max(axis=1), x.argmax(axis=1)))
def issue_168940(mesh, x):
    dist_x = mt.distribute_tensor(x, mesh, [Shard(1)])
    return dist_x.max(axis=1).full_tensor(), dist_x.argmax(axis=1).full_tensor()


@idiom("pull_173936_argmax_sharded", PULL + "173936 (argmax/argmin of [10, 5, 3, 8] sharded "
       "[10, 5] | [3, 8]: P(max) of local indices gives 1, not 0)",
       lambda: (np.array([10.0, 5.0, 3.0, 8.0]),),
       lambda world, x: (x.argmax(), x.argmin(), x.argmax(axis=0)))
def pull_173936(mesh, x):
    dt = mt.distribute_tensor(x, mesh, [Shard(0)])
    return np.argmax(dt), np.argmin(dt), dt.argmax(axis=0)


@idiom("issue_165923_all_of_shards", ISSUE + "165923 (torch.all() uses sum reduction "
       "incorrectly: all is AND)", lambda: (np.array([True] * 6 + [False]),),
       lambda world, b: (b.all(), b[:6].all(), b.any(), (~b).sum()))
def issue_165923(mesh, b):
    dt = mt.distribute_tensor(b, mesh, [Shard(0)])
    return (np.all(dt).full_tensor(), np.all(dt[:6]).full_tensor(), np.any(dt).full_tensor(),
            np.sum(~dt).full_tensor())


@idiom("issue_166598_matmul_contraction_order", ISSUE + "166598 (matmul rule and contraction "
       "dim sharded on both mesh dims: A [S(1), S(1)] @ B [S(0), S(0)])",
       lambda: (np.arange(16.0).reshape(4, 4),), lambda world, a: a @ a)
def issue_166598(mesh, a):
    mesh2 = mesh_2d(mesh)
    A = mt.distribute_tensor(a, mesh2, [Shard(1), Shard(1)])
    B = mt.distribute_tensor(a, mesh2, [Shard(0), Shard(0)])
    return (A @ B).full_tensor()


@idiom("pull_99014_equal_op", PULL + "99014 (DTensor equal op: True only if every local copy "
       "is equal)", lambda: (randn(7, 3), randn(7, 3)),
       lambda world, x, y: (np.array_equal(x, y), np.array_equal(x, x.copy()),
                            bool(np.all(x == y))))
def pull_99014(mesh, x, y):
    y = y.copy()
    y[: max(0, 7 - 1)] = x[: max(0, 7 - 1)]
    X = mt.distribute_tensor(x, mesh, [Shard(0)])
    Y = mt.distribute_tensor(y, mesh, [Shard(0)])
    return (bool(np.array_equal(X, Y)), bool(np.array_equal(X, mt.distribute_tensor(
        x, mesh, [Shard(0)]))), bool(np.all(X == Y)))


@idiom("issue_161368_uneven_local_shapes", ISSUE + "161368 (Incorrect offsets for uneven "
       "sharding: randn(2) from_local Replicate, redistribute Shard(0), on up to 8 ranks: "
       "each rank's block and its offset)", lambda: (),
       lambda world: (np.array_split(randn(2), world),
                      [int(o) for o in np.cumsum([0] + [len(b) for b in
                                                        np.array_split(randn(2), world)][:-1])]))
def issue_161368(mesh):
    tensor = randn(2)
    dtensor = mt.DTensor.from_local(tensor, mesh, [Replicate()]).redistribute(
        placements=[Shard(0)])
    blocks = mesh.get_group().allgather(dtensor.to_local())
    offsets = [sum(len(b) for b in blocks[:i]) for i in range(len(blocks))]
    return blocks, offsets
