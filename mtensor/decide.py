"""Deciding an op: the rule's strategies priced by the cost model, the cheapest bound to this
rank as a ``Decision`` and cached per signature (op name, static params, the operands' specs),
so a repeated call does no planning at all.
"""
from __future__ import annotations

import cmath
from functools import partial

import numpy as np

from . import modes, views
from .cost import model as cost
from .device.arrays import is_block, to_device
from .dtensor import DTensor, guarded, redistribution
from .ops import RULES, OpCall, Operand
from .ops.choose import choose_windows
from .ops.pointwise import PARTIAL_ALGEBRA
from .placement import Partial, Replicate, local_slices
from .redistribute.halo import bind_shared, bind_windows
from .spec import DTensorSpec, check_same_mesh

_SCALARS = (int, float, complex, bool)


class Decision:
    """A cached strategy bound to this rank: what to run for one op signature."""

    __slots__ = ("prepare", "in_specs", "direct", "kernel", "traced", "into", "dtype", "mesh",
                 "placements", "shape", "nout", "specs", "cost", "check", "attached")

    def out_spec(self, dtype) -> DTensorSpec:
        spec = self.specs.get(dtype)
        if spec is None:
            spec = self.specs[dtype] = DTensorSpec(self.mesh, self.placements, self.shape, dtype)
        return spec


MAX_DECISIONS = 16384     # cached signatures kept before the cache starts over
_decisions: dict = {}
direct_into: dict = {}   # (op, target spec, operand spec) -> kernel, for x op= y as laid out
decided_with = [None]  # the cost model the cached decisions were made with
current_model = cost.active_model   # the cell set_cost_model writes


def _finite_nonzero(value) -> bool:
    """Whether partial terms may be scaled by this constant: an inf, nan or 0 divisor makes
    terms disagree with numpy's whole-value result (0 * inf, -inf + inf), so those reduce
    first.  The answer is the same on every rank, since constants are."""
    if isinstance(value, _SCALARS):  # the common case, without numpy's per-call overhead
        return value != 0 and cmath.isfinite(value)
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.isfinite(value)) and np.all(value != 0))


def const_key(value):
    if isinstance(value, _SCALARS):
        return type(value), _finite_nonzero(value)
    value = value if is_block(value) else np.asarray(value)
    return "const", value.shape, value.dtype, _finite_nonzero(value)


def decision_for(name: str, operands, params=(), into=None) -> "Decision":
    """The cached decision for a call, deciding it on the first call of its signature.
    ``into``: placements the output must have (an ``out=`` or in-place target); then None
    when no strategy produces them."""
    if modes.active.autoshard is not None and not _local(operands):   # a plan's: not cached
        decision = decide(name, operands, params, into)
        if decision is not None and decision.check and not _values_fit(name, operands,
                                                                       decision):
            decision = decide(name, operands, params, into, unsafe=True)
        return decision
    if decided_with[0] is not current_model[0]:
        _decisions.clear()
        direct_into.clear()
        decided_with[0] = current_model[0]
    key = (name, params, into, _aliases(operands),
           *[o._spec if type(o) is DTensor else const_key(o) for o in operands])
    try:
        decision = _decisions[key]
    except KeyError:
        if len(_decisions) >= MAX_DECISIONS:   # a program of ever-new shapes: start over
            _decisions.clear()
            direct_into.clear()
        decision = _decisions[key] = decide(name, operands, params, into)
    if decision is not None and decision.check and not _values_fit(name, operands, decision):
        key = ("values", *key)
        decision = _decisions.get(key)
        if decision is None:
            decision = _decisions[key] = decide(name, operands, params, into, unsafe=True)
    return decision


def as_operand(value, unsafe: bool = False) -> Operand:
    """An operand as the sharding rules see it (shape, dtype, placements, and for a constant
    whether partial terms may meet it)."""
    if type(value) is DTensor:
        return Operand(value.shape, value.dtype, value.placements, safe=not unsafe)
    if type(value) in _SCALARS:     # Python's own: weak (numpy's float64 subclasses float)
        return Operand((), np.dtype(type(value)), None, weak=True, safe=_finite_nonzero(value))
    value = value if is_block(value) else np.asarray(value)
    return Operand(value.shape, value.dtype, None, safe=_finite_nonzero(value))


def decide(name: str, operands, params, into=None, unsafe=False) -> Decision:
    tensors = [o for o in operands if type(o) is DTensor]
    if not tensors:
        raise TypeError(f"{name}: no operand is a DTensor; call numpy directly")
    mesh = tensors[0].device_mesh
    for t in tensors[1:]:
        check_same_mesh(name, mesh, t.device_mesh)
    rule = RULES.get(name)
    if rule is None:
        raise TypeError(f"{name}: mtensor has no sharding rule for this op; call full_tensor() "
                        f"to compute on the whole array, or to_local() for this rank's block")
    call = OpCall(name, tuple(as_operand(o, unsafe) for o in operands), params, mesh.shape,
                  _aliases(operands))
    strategy = rule(call)
    model = mesh.cost_model()
    chosen = None
    if modes.active.autoshard is not None and not mesh.is_local:
        chosen = modes.active.autoshard.strategy(call, strategy.choices, into)
    if chosen is None:
        chosen = choose_windows(call, strategy.choices, model, into)
    if chosen is None:
        return None
    in_layouts, out_layout, predicted = chosen[:3]
    windows = chosen[3] if len(chosen) > 3 else ()     # auto_shard's plans use none
    d = Decision()
    prepared = [_layout_program(o, layout, mesh, model) for o, layout in zip(operands, in_layouts)]
    for j in sorted({w.operand for w in windows}):
        mine = [w for w in windows if w.operand == j]
        prepared[j] = _Windowed(prepared[j][0], operands[j], in_layouts[j], mine, mesh,
                                strategy.shares_windows), None
    d.prepare = tuple(run for run, _ in prepared)
    d.in_specs = tuple(spec for _, spec in prepared)
    # every operand a DTensor already laid out as wanted: the common, fastest case
    d.direct = all(type(o) is DTensor and p is None for o, p in zip(operands, d.prepare))
    d.kernel = strategy.bind(in_layouts, out_layout, mesh, windows)
    d.traced = getattr(d.kernel, "unpooled", d.kernel)    # what a trace records
    d.into, d.dtype = strategy.into, strategy.dtype
    d.mesh, d.placements, d.shape, d.nout = mesh, out_layout, strategy.out_shape, strategy.nout
    d.specs, d.cost, d.attached = {}, predicted, None
    d.check = () if unsafe or name not in PARTIAL_ALGEBRA else tuple(
        j for j, (o, layout) in enumerate(zip(operands, in_layouts)) if type(o) is DTensor
        and any(isinstance(q, Partial) and not isinstance(p, Partial)
                for p, q in zip(layout, out_layout)))
    return d


def _layout_program(operand, layout, mesh, model):
    """(what turns the operand into the block the strategy wants, the spec of that block);
    (None, None) when the operand is used as it is."""
    if type(operand) is DTensor:
        if layout == operand.placements:
            return None, None
        return redistribution(operand.spec, layout, model)
    if all(p == Replicate() for p in layout):
        if mesh.device_type == "cpu" or isinstance(operand, _SCALARS + (np.generic,)):
            return None, None
        return _ConstantBlock(Ellipsis, mesh.device_type), None    # a host array: copied up
    index = local_slices(np.shape(operand), mesh.shape, layout, mesh.coordinate)
    return _ConstantBlock(index, mesh.device_type), None


class _Windowed:
    """Lays an operand out as the strategy wants, then reads its windows: called on the
    DTensor, whose widened block a kernel that shares windows (``Strategy.shares_windows``:
    getitem, whose results are views of the operand) reads from while it is unchanged."""

    __slots__ = ("layout", "windows", "shared", "bind")

    def __init__(self, layout, operand, placements, windows, mesh, share):
        self.layout = layout
        self.windows = bind_windows(mesh, operand.shape, operand.dtype, placements, windows)
        self.bind = partial(bind_shared, mesh, operand.shape, operand.dtype, placements, windows)
        self.shared = None if layout is not None or not share else self.bind()

    def __call__(self, operand):
        if self.shared is not None:
            return _widened(operand, self.shared, self.bind)
        local = operand._local
        return self.windows(local if self.layout is None else self.layout(local))


def _widened(x: DTensor, shared, bind):
    """``shared``'s window of ``x``, cut from a block of ``x`` widened at least as far.
    ``x._windows`` keeps [content stamp, {(geom, widths): widened block}, {geom: widths}]:
    the blocks made while ``x`` is unchanged (its storage's write count and the replay epoch
    name its content; a write or ``to_local`` drops them), and the widest widths read so
    far, with which the next version's block is made at once, so that a stencil whose
    slices reach one and two rows exchanges once a step, whatever their order."""
    stamp = views.stamp(x)
    held = x._windows
    if held is None:
        held = x._windows = [stamp, {}, {}]
    elif held[0] != stamp:
        held[0], held[1] = stamp, {}
    blocks, hints = held[1], held[2]
    for (geom, widths), wide in blocks.items():
        if geom == shared.geom and all(w >= r for w, r in zip(widths, shared.widths)):
            program = bind(widths)
            if program is not None:
                return program.take(wide)
    widths = tuple(max(pair) for pair in zip(shared.widths, hints.get(shared.geom, ())))
    program = shared if not widths or widths == shared.widths else bind(widths) or shared
    blocks[program.geom, program.widths] = wide = program.widen(x._local)
    hints[program.geom] = program.widths
    return program.take(wide)


class _ConstantBlock:
    """Cuts this rank's block out of a replicated constant, on the mesh's device (reported
    to the tracer: the constant may be an argument of a compiled function)."""

    __slots__ = ("index", "device_type")

    def __init__(self, index, device_type):
        self.index, self.device_type = index, device_type

    def cut(self, value):
        value = value if is_block(value) else np.asarray(value)
        return to_device(value[self.index], self.device_type)

    def __call__(self, value):
        if modes.active.tracer is None:
            return self.cut(value)
        return modes.active.tracer.call("slice", self.cut, (value,))




def _local(operands) -> bool:
    """Whether the op runs on a rank's one-rank mesh (inside ``local_map``: opaque to
    ``auto_shard``, which plans the global mesh only)."""
    return any(type(o) is DTensor and o.device_mesh.is_local for o in operands)


def _aliases(operands) -> tuple:
    """For each operand from the second, the index of the first operand that is the same
    DTensor (``x * x``), or -1; ``()`` when there are none (the common case, one check)."""
    if len(operands) < 2 or (len(operands) == 2 and operands[0] is not operands[1]):
        return ()
    out = tuple(next((i for i in range(j) if operands[i] is o and type(o) is DTensor), -1)
                for j, o in enumerate(operands) if j)
    return out if any(i >= 0 for i in out) else ()


def _values_fit(name: str, operands, decision) -> bool:
    """Whether the DTensors that partial terms meet (a scale, a divisor, a shift of a max)
    are finite (and, dividing, non-zero): otherwise 0 * inf or -inf + inf in one term
    gives NaN where numpy's whole value gives inf, and the terms must be reduced first.
    Read from the values, so agreed over the mesh unless every rank holds them all."""
    checked = [operands[j] for j in decision.check]
    fit = all(_finite_values(o._local, name == "divide") for o in checked)
    if all(all(p == Replicate() for p in o.placements) for o in checked):
        return fit
    mesh = decision.mesh
    with guarded(name, "all_reduce", (1,), np.dtype(np.int64), mesh):
        return not mesh.communicator().sum_ints([int(not fit)])[0]


def _finite_values(block, nonzero: bool) -> bool:
    with np.errstate(invalid="ignore"):
        return bool(np.isfinite(block).all() and (not nonzero or block.all()))
