"""DTensor idioms as people publish them (PyTorch's DTensor README and docs, its tests under
test/distributed/tensor/, the tensor-parallel styles, DTensor issues that report a wrong answer),
translated to numpy + mtensor: ``torch.Tensor`` -> numpy array, torch ops -> numpy ops,
``torch.distributed.tensor`` -> ``mtensor``; the rest as the source wrote it.

Each idiom is ``fn(mesh, *inputs)`` run on a 1-D mesh of the world (some build a 2-D one),
returning numpy results, and ``reference(world, *inputs)``: what one process computes with
numpy for the same program on ``world`` ranks (per-rank data is rebuilt from the rank's seed).
Where the right answer is an error, the reference raises it.  ``refuses`` names an error that
mtensor documents for what the idiom asks (besides the "call full_tensor()" TypeError).
This file holds the registry and the idioms of the README, the docs and the test suite;
dtensor_idioms_issues.py the issues' repros; dtensor_idioms_grad.py gradients, local_map and
tensor parallelism.  tests/corpus/README.md cites each."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

import mtensor as mt
from mtensor import Partial, Replicate, Shard

README = "pytorch/pytorch torch/distributed/tensor/README.md "
DOCS = "docs.pytorch.org/docs/stable/distributed.tensor.html "
T = "pytorch/pytorch test/distributed/tensor/"


@dataclass(frozen=True)
class Idiom:
    name: str
    source: str
    fn: Callable                     # fn(mesh, *inputs) -> numpy results
    reference: Callable              # reference(world, *inputs) -> numpy results (or raises)
    inputs: Callable[[], tuple]
    refuses: tuple = ()              # (exception type, text in its message): a documented refusal


def registry():
    found = []

    def idiom(name, source, inputs, reference, refuses=()):
        def add(fn):
            found.append(Idiom(name, source, fn, reference, inputs, refuses))
            return fn
        return add
    return found, idiom


IDIOMS, idiom = registry()


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def rank_of(mesh) -> int:
    return mesh.get_coordinate()[0]


def per_rank(shape, world, seed=0):
    """The block each rank makes with its own seed (torch.manual_seed(rank) in the sources)."""
    return [randn(*shape, seed=seed + r) for r in range(world)]


def mesh_2d(mesh):
    """The README's (2, 2) mesh where the world splits in two, else (1, world)."""
    n = mesh.size()
    return mt.init_device_mesh((2, n // 2) if n % 2 == 0 else (1, n))


# -- torch/distributed/tensor/README.md, "Basic DTensor API Examples" ------------------------

def _big():
    return (randn(13, 12),)


@idiom("readme_rowwise_colwise_replica", README + "Basic DTensor API Examples (distribute_tensor)",
       _big, lambda world, big: (big, big, big))
def readme_rowwise_colwise_replica(mesh, big_tensor):
    rowwise_tensor = mt.distribute_tensor(big_tensor, device_mesh=mesh, placements=[Shard(0)])
    colwise_tensor = mt.distribute_tensor(big_tensor, device_mesh=mesh, placements=[Shard(1)])
    replica_tensor = mt.distribute_tensor(big_tensor, device_mesh=mesh, placements=[Replicate()])
    return (rowwise_tensor.full_tensor(), colwise_tensor.full_tensor(),
            replica_tensor.full_tensor())


@idiom("readme_2d_replicate_shard", README + "Basic DTensor API Examples (mesh (2, 2), "
       "spec=[Replicate(), Shard(0)])", _big, lambda world, big: (big, big[:, ::-1]))
def readme_2d_replicate_shard(mesh, big_tensor):
    device_mesh = mesh_2d(mesh)
    spec = [Replicate(), Shard(0)]
    partial_replica = mt.distribute_tensor(big_tensor, device_mesh=device_mesh, placements=spec)
    flipped = partial_replica[:, ::-1]
    return partial_replica.full_tensor(), flipped.full_tensor()


def _readme_from_local_ref(world):
    full = np.concatenate(per_rank((8, 8), world))
    return full, full, full


@idiom("readme_from_local_reshard", README + "Basic DTensor API Examples (from_local, "
       "redistribute to colwise and replica)", lambda: (), _readme_from_local_ref)
def readme_from_local_reshard(mesh):
    local_tensor = randn(8, 8, seed=rank_of(mesh))
    rowwise_tensor = mt.DTensor.from_local(local_tensor, mesh, [Shard(0)])
    colwise_tensor = rowwise_tensor.redistribute(mesh, [Shard(1)])
    replica_tensor = colwise_tensor.redistribute(mesh, [Replicate()])
    return rowwise_tensor.full_tensor(), colwise_tensor.full_tensor(), replica_tensor.to_local()


def _mixed_partial_ref(world):
    raise ValueError("mixed partial reduce types: sum_i max_j x_ij != max_j sum_i x_ij")


@idiom("readme_mixed_partial_types", README + "Placement Restrictions (Partial('sum') with "
       "Partial('max') raises ValueError; terms 5, 0, 0, 5 on the (2, 2) mesh read 5 or 10 "
       "by the order of the reductions)", lambda: (), _mixed_partial_ref)
def readme_mixed_partial_types(mesh):
    device_mesh = mesh_2d(mesh)
    placements = [Partial("sum"), Partial("max")]
    x = np.array([5.0 if rank_of(mesh) % 3 == 0 else 0.0])
    return mt.DTensor.from_local(x, device_mesh, placements).full_tensor()


def _module_inputs():
    return randn(7, 8), randn(8, 8, seed=1), randn(8, seed=2), randn(8, 8, seed=3), randn(8, seed=4)


def _module_ref(world, x, w1, b1, w2, b2):
    return np.maximum(x @ w1.T + b1 + x @ w2.T + b2, 0)


@idiom("readme_distribute_module_shard_params", README + "High level API examples (MyModule: "
       "relu(fc1(x) + fc2(x)), every Linear parameter Shard(0))", _module_inputs, _module_ref)
def readme_distribute_module(mesh, x, w1, b1, w2, b2):
    params = [mt.distribute_tensor(p, mesh, [Shard(0)]) for p in (w1, b1, w2, b2)]
    fc1_w, fc1_b, fc2_w, fc2_b = params
    inp = mt.distribute_tensor(x, mesh, [Replicate()])
    return np.maximum(inp @ fc1_w.T + fc1_b + (inp @ fc2_w.T + fc2_b), 0).full_tensor()


# -- the docs page: Partial's docstring, from_local / to_local --------------------------------

def _partial_ref(world):
    locals_ = per_rank((7, 3), world)
    total = sum(locals_)
    return total, total, total


@idiom("docs_partial_redistribute", DOCS + "Partial: 'redistribute the Partial DTensor to a "
       "Replicate or Shard(dim) placement ... (allreduce, reduce_scatter)'", lambda: (),
       _partial_ref)
def docs_partial_redistribute(mesh):
    local = randn(7, 3, seed=rank_of(mesh))
    partial = mt.DTensor.from_local(local, mesh, [Partial()])
    return (partial.redistribute(mesh, [Replicate()]).to_local(),
            partial.redistribute(mesh, [Shard(0)]).full_tensor(), partial.full_tensor())


@idiom("docs_from_local_shape_uneven", DOCS + "DTensor.from_local(local_tensor, device_mesh, "
       "placements, *, run_check, shape, stride): shape for uneven shards",
       lambda: (randn(13, 5),), lambda world, x: (x, (13, 5), x.sum(axis=0)))
def docs_from_local_shape_uneven(mesh, x):
    block = np.array_split(x, mesh.size())[rank_of(mesh)]
    dt = mt.DTensor.from_local(block, mesh, [Shard(0)], run_check=True, shape=(13, 5))
    return dt.full_tensor(), tuple(dt.shape), dt.sum(axis=0).full_tensor()


# -- test/distributed/tensor/test_dtensor.py, test_redistribute.py ----------------------------

def _test_from_local_ref(world):
    locals_ = per_rank((3, 3), world)
    return ((3 * world, 3), (3, 3), (3, 3), np.concatenate(locals_) * 3, locals_[0],
            sum(locals_))


@idiom("test_dtensor_from_local", T + "test_dtensor.py DTensorTest.test_from_local (Shard, "
       "Replicate and Partial specs of one local tensor)", lambda: (), _test_from_local_ref)
def test_dtensor_from_local(mesh):
    local_tensor = randn(3, 3, seed=rank_of(mesh))
    sharded_tensor = mt.DTensor.from_local(local_tensor, mesh, [Shard(0)])
    ddp_tensor = mt.DTensor.from_local(local_tensor, mesh, [Replicate()])
    partial_tensor = mt.DTensor.from_local(local_tensor, mesh, [Partial()])
    replica0 = mt.DTensor.from_local(randn(3, 3, seed=0), mesh, [Replicate()])
    return (tuple(sharded_tensor.shape), tuple(ddp_tensor.shape), tuple(partial_tensor.shape),
            (sharded_tensor * 3).full_tensor(), replica0.full_tensor(),
            partial_tensor.full_tensor())


@idiom("test_redistribute_shard_to_replicate_uneven", T + "test_redistribute.py "
       "RedistributeTest.test_shard_to_replicate_forward_backward (input_sizes with uneven "
       "dims)", lambda: (randn(7, 13),), lambda world, x: (x, x, x))
def test_redistribute_shard_to_replicate(mesh, x):
    out = []
    for shard_dim in (0, 1):
        sharded = mt.distribute_tensor(x, mesh, [Shard(shard_dim)])
        out.append(sharded.redistribute(mesh, [Replicate()]).to_local())
    out.append(mt.distribute_tensor(x, mesh, [Shard(0)]).full_tensor())
    return tuple(out)


@idiom("test_redistribute_replicate_to_shard", T + "test_redistribute.py "
       "RedistributeTest.test_replicate_to_shard_forward_backward (local chunk = "
       "tensor_split of the replica)", lambda: (randn(13, 7),),
       lambda world, x: tuple(np.array_split(x, world, axis=d) for d in (0, 1)))
def test_redistribute_replicate_to_shard(mesh, x):
    out = []
    for shard_dim in (0, 1):
        replica = mt.distribute_tensor(x, mesh, [Replicate()])
        sharded = replica.redistribute(mesh, [Shard(shard_dim)])
        blocks = mesh.get_group().allgather(sharded.to_local())
        out.append(blocks)
    return tuple(out)


def _rep_to_partial_ref(world, x):
    return x, x * world


@idiom("test_redistribute_replicate_to_partial", T + "test_redistribute.py "
       "RedistributeTest.test_replicate_to_partial (Replicate -> Partial -> Replicate; a "
       "from_local(Partial) of the replica sums world copies)", lambda: (randn(12, 3),),
       _rep_to_partial_ref, refuses=((ValueError, "contain Partial"),))
def test_redistribute_replicate_to_partial(mesh, x):
    replica_tensor = mt.distribute_tensor(x, mesh, [Replicate()])
    partial_tensor = replica_tensor.redistribute(mesh, [Partial()])
    back = partial_tensor.redistribute(mesh, [Replicate()])
    summed = mt.DTensor.from_local(x, mesh, [Partial()])
    return back.to_local(), summed.full_tensor()


@idiom("test_redistribute_shard_to_shard", T + "test_redistribute.py "
       "RedistributeTest.test_redistribute_shard_dim_change (Shard(0) -> Shard(1), all_to_all)",
       lambda: (randn(7, 13),), lambda world, x: (x, x.T))
def test_redistribute_shard_dim_change(mesh, x):
    dt = mt.distribute_tensor(x, mesh, [Shard(0)])
    moved = dt.redistribute(mesh, [Shard(1)])
    return moved.full_tensor(), moved.T.full_tensor()


@idiom("test_redistribute_partial_to_shard_uneven", T + "test_redistribute.py "
       "RedistributeTest.test_partial_to_shard (reduce_scatter of uneven dims)", lambda: (),
       lambda world: tuple(np.array_split(sum(per_rank((7, 5), world)), world, axis=d)
                           for d in (0, 1)))
def test_redistribute_partial_to_shard(mesh):
    local = randn(7, 5, seed=rank_of(mesh))
    out = []
    for shard_dim in (0, 1):
        partial = mt.DTensor.from_local(local, mesh, [Partial()])
        scattered = partial.redistribute(mesh, [Shard(shard_dim)])
        out.append(mesh.get_group().allgather(scattered.to_local()))
    return tuple(out)
