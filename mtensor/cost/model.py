"""The communication cost model: time = alpha + bytes / beta per collective step.

Bytes follow the bus-bandwidth convention of nccl-tests, per rank, for a buffer of S bytes on
n ranks: all-reduce 2(n-1)/n*S; all-gather and reduce-scatter (n-1)/n*S with S the full,
gathered buffer; all-to-all (n-1)/n*S with S the rank's own buffer.  Local steps (slicing a
replicated block, zeroing a partial term) cost a memory copy at ``copy_beta``.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Tuple

from ..placement import Partial, Placement, Shard
from ..step_kinds import COLLECTIVES, STEP_KINDS


def bus_bytes(kind: str, n: int, nbytes: int) -> int:
    """Bytes one rank moves for step ``kind`` on ``n`` ranks over an S-byte buffer (none on
    one rank: the factor ``n - 1`` is 0); a halo exchange moves its edge slabs, ``nbytes``."""
    if STEP_KINDS[kind].neighbours:
        return nbytes if n > 1 else 0
    return STEP_KINDS[kind].bus_factor * (n - 1) * nbytes // n


@dataclass(frozen=True)
class CostModel:
    """Latency ``alpha`` (s) and bandwidth ``beta`` (bytes/s), optionally one pair per mesh dim.

    Defaults are for MPI over shared memory on one node.  Frozen and hashable so that plans
    can be cached per cost model.

    How communication overlaps compute (``cost.timeline``): behind compute a link moves
    at ``overlap_rate`` of its speed (``rate_per_dim`` per mesh dim once calibrated), and
    compute runs ``1 + overlap_slowdown`` times slower while it does.  The default rate, 0,
    is shared memory's (the cores copy the bytes inside MPI calls, so nothing moves behind
    compute); over a network ``mt.calibrate`` measures the real one.

    ``flops``: the speed of a matmul (flop/s), with which ``mt.auto_shard`` prices an op's
    compute (elementwise ops at ``copy_beta``), so that splitting work is weighed against
    the communication it costs; ``mt.calibrate`` measures it too.
    """

    alpha: float = 5e-6
    beta: float = 4e9
    copy_beta: float = 1e10
    per_dim: Tuple[Tuple[float, float], ...] = ()
    overlap_rate: float = 0.0
    overlap_slowdown: float = 0.0
    rate_per_dim: Tuple[float, ...] = ()
    flops: float = 2e10
    # per mesh dim: (ranks per node, nodes) where its collectives may run in two levels
    # (``comm.hierarchical``), () where they are flat
    two_level: Tuple[Tuple[int, ...], ...] = ()
    _hash: int = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        # the model keys the plan caches of every redistribute: hash it once
        object.__setattr__(self, "_hash", hash(tuple(
            getattr(self, f.name) for f in dataclasses.fields(self) if f.compare)))

    def __hash__(self) -> int:
        return self._hash

    def link(self, mesh_dim: int) -> Tuple[float, float]:
        if mesh_dim < len(self.per_dim):
            return self.per_dim[mesh_dim]
        return self.alpha, self.beta

    def rate(self, mesh_dim: int) -> float:
        """The share of its speed a link of ``mesh_dim`` keeps behind compute."""
        if mesh_dim < len(self.rate_per_dim):
            return self.rate_per_dim[mesh_dim]
        return self.overlap_rate

    def step_time(self, kind: str, mesh_dim: int, n: int, nbytes: int) -> float:
        """Predicted seconds for one step moving ``bus_bytes`` or copying ``nbytes`` locally."""
        if kind in COLLECTIVES:
            alpha, beta = self.link(mesh_dim)
            flat = alpha + bus_bytes(kind, n, nbytes) / beta
            levels = self.two_level[mesh_dim] if mesh_dim < len(self.two_level) else ()
            if levels and kind in TWO_LEVEL_KINDS:     # the backend runs the cheaper one
                return min(flat, two_level_time(self, kind, mesh_dim, *levels, nbytes))
            return flat
        return nbytes / self.copy_beta

    def change_time(self, src: Placement, dst: Placement, mesh_dim: int, n: int,
                    block_bytes: int) -> float:
        """Estimated seconds to move one mesh dim from ``src`` to ``dst`` directly, for a block
        of ``block_bytes`` before the change.  Strategy choice prices candidates with this (no
        path search); the planner then finds the exact steps for the chosen one."""
        if n == 1 or src == dst:
            return 0.0
        t = self.step_time
        if isinstance(src, Shard):
            if isinstance(dst, Shard):
                return t("all_to_all", mesh_dim, n, block_bytes)
            gather = t("all_gather", mesh_dim, n, block_bytes * n)
            return gather + (block_bytes * n / self.copy_beta if isinstance(dst, Partial) else 0.0)
        if isinstance(src, Partial):
            if isinstance(dst, Shard):
                return t("reduce_scatter", mesh_dim, n, block_bytes)
            reduce = t("all_reduce", mesh_dim, n, block_bytes)
            return reduce + (block_bytes / self.copy_beta if isinstance(dst, Partial) else 0.0)
        copied = block_bytes // n if isinstance(dst, Shard) else block_bytes
        return copied / self.copy_beta


active_model = [CostModel()]


def get_cost_model() -> CostModel:
    return active_model[0]


# An uncalibrated model's link across nodes: 20 us and 10 Gbit/s (a common Ethernet; an
# InfiniBand cluster is faster, and ``mt.calibrate`` measures each mesh dim's own link).  Its
# own ``alpha``/``beta`` stand for a link inside a node (shared memory).
INTER_NODE = (2e-5, 1.25e9)
# ... and the share of its speed such a link keeps behind compute (the network bed's
# calibrated 0.40: a NIC moves posted bytes while the cores compute; shared memory's is 0)
INTER_NODE_RATE = 0.4


def for_links(model: CostModel, intra_node, two_level=()) -> CostModel:
    """``model`` for a mesh whose dims are inside a node or not (``mesh.intra_node``), and
    whose dims across nodes may run their collectives in two levels (``two_level``: per
    dim, (ranks per node, nodes) or ()): a calibrated model (one link per mesh dim,
    measured through the dim's own backend) as it is; otherwise the dims across nodes get
    ``INTER_NODE``, so plans prefer the fast axis, priced in two levels where they run so."""
    if model.per_dim or all(intra_node):
        return model
    return _with_links(model, tuple(bool(i) for i in intra_node), tuple(two_level))


TWO_LEVEL_KINDS = ("all_reduce", "all_gather", "reduce_scatter")


def _two_level_terms(model: CostModel, kind: str, mesh_dim: int, per_node: int,
                     nodes: int):
    """(latency seconds beyond the dim's own alpha, seconds per byte) of ``kind`` in two
    levels: inside a node at ``model``'s own alpha and beta, across at the dim's link.
    All-reduce (of S bytes): reduce-scatter and all-gather inside, all-reduce of S/k across.
    All-gather and reduce-scatter (S: the whole buffer): one level across moving S/k, one
    inside, and a copy of S into the two-level order."""
    _, b_x = model.link(mesh_dim)
    k, m = per_node, nodes
    across, inside = (m - 1) / m / k / b_x, (k - 1) / k / model.beta
    if kind == "all_reduce":
        return 2 * model.alpha, 2 * (inside + across)
    return model.alpha, inside + across + 1 / model.copy_beta


def two_level_time(model: CostModel, kind: str, mesh_dim: int, per_node: int, nodes: int,
                   nbytes: float) -> float:
    """Seconds for ``kind`` over a mesh dim of ``per_node`` ranks on each of ``nodes`` nodes
    in two levels (``comm.hierarchical``).  ``nbytes``: the buffer (all-reduce), the whole
    gathered or scattered one (all-gather, reduce-scatter)."""
    extra, per_byte = _two_level_terms(model, kind, mesh_dim, per_node, nodes)
    return model.link(mesh_dim)[0] + extra + per_byte * nbytes


def hierarchical_crossover(model: CostModel, mesh_dim: int, per_node: int, nodes: int,
                           kind: str = "all_reduce") -> float:
    """Bytes above which collective ``kind`` over a mesh dim spread ``per_node`` ranks on
    each of ``nodes`` nodes is faster in two levels than flat, where ``two_level_time``
    meets the flat step time (inf: never)."""
    n = per_node * nodes
    flat_per_byte = STEP_KINDS[kind].bus_factor * (n - 1) / n / model.link(mesh_dim)[1]
    extra, per_byte = _two_level_terms(model, kind, mesh_dim, per_node, nodes)
    saved = flat_per_byte - per_byte
    return extra / saved if saved > 0 else float("inf")


@functools.lru_cache(maxsize=64)
def _with_links(model: CostModel, intra_node, two_level) -> CostModel:
    links = tuple((model.alpha, model.beta) if inside else INTER_NODE for inside in intra_node)
    rates = tuple(model.overlap_rate if inside else INTER_NODE_RATE for inside in intra_node)
    return dataclasses.replace(model, per_dim=links, rate_per_dim=rates, two_level=two_level)


def set_cost_model(model: CostModel) -> None:
    """Use ``model`` for every later plan; every rank must set the same model."""
    active_model[0] = model
