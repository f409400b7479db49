"""Dispatch: the one path every op takes on DTensors.

    unwrap -> rule -> choose -> redistribute inputs -> local compute -> wrap

Everything up to the choice depends only on the op name, static params and the operands'
specs, so it is decided once per signature and cached as a ``Decision``: a repeated call
looks the signature up, runs the bound redistribution programs (none when the layouts
already fit), calls the kernel on the local blocks and wraps the result.
"""
from __future__ import annotations

import cmath

import numpy as np

from . import modes, views
from .device import is_block, to_device
from .comm import guard
from .dtensor import DTensor, _redistribution, guarded
from .ops import RULES, OpCall, Operand, choose
from .ops.pointwise import PARTIAL_ALGEBRA
from .placement import Partial, Replicate, local_slices
from .redistribute import cost
from .spec import DTensorSpec, _fmt as fmt, check_same_mesh

_SCALARS = (int, float, complex, bool)


class Decision:
    """A cached strategy bound to this rank: what to run for one op signature."""

    __slots__ = ("prepare", "in_specs", "direct", "kernel", "into", "mesh", "placements",
                 "shape", "nout", "specs", "cost", "check", "attached")

    def out_spec(self, dtype) -> DTensorSpec:
        spec = self.specs.get(dtype)
        if spec is None:
            spec = self.specs[dtype] = DTensorSpec(self.mesh, self.placements, self.shape, dtype)
        return spec


MAX_DECISIONS = 16384     # cached signatures kept before the cache starts over
_decisions: dict = {}
_direct_into: dict = {}   # (op, target spec, operand spec) -> kernel, for x op= y as laid out
_model = [None]  # the cost model the cached decisions were made with
_current_model = cost._default


def _finite_nonzero(value) -> bool:
    """Whether partial terms may be scaled by this constant: an inf, nan or 0 divisor makes
    terms disagree with numpy's whole-value result (0 * inf, -inf + inf), so those reduce
    first.  The answer is the same on every rank, since constants are."""
    if isinstance(value, _SCALARS):  # the common case, without numpy's per-call overhead
        return value != 0 and cmath.isfinite(value)
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.isfinite(value)) and np.all(value != 0))


def _const_key(value):
    if isinstance(value, _SCALARS):
        return type(value), _finite_nonzero(value)
    value = value if is_block(value) else np.asarray(value)
    return "const", value.shape, value.dtype, _finite_nonzero(value)


def decision_for(name: str, operands, params=(), into=None) -> "Decision":
    """The cached decision for a call, deciding it on the first call of its signature.
    ``into``: placements the output must have (an ``out=`` or in-place target); then None
    when no strategy produces them."""
    if modes.active.autoshard is not None and not _local(operands):   # a plan's: not cached
        decision = _decide(name, operands, params, into)
        if decision is not None and decision.check and not _values_fit(name, operands,
                                                                       decision):
            decision = _decide(name, operands, params, into, unsafe=True)
        return decision
    if _model[0] is not _current_model[0]:
        _decisions.clear()
        _direct_into.clear()
        _model[0] = _current_model[0]
    key = (name, params, into, _aliases(operands),
           *[o._spec if type(o) is DTensor else _const_key(o) for o in operands])
    try:
        decision = _decisions[key]
    except KeyError:
        if len(_decisions) >= MAX_DECISIONS:   # a program of ever-new shapes: start over
            _decisions.clear()
            _direct_into.clear()
        decision = _decisions[key] = _decide(name, operands, params, into)
    if decision is not None and decision.check and not _values_fit(name, operands, decision):
        key = ("values", *key)
        decision = _decisions.get(key)
        if decision is None:
            decision = _decisions[key] = _decide(name, operands, params, into, unsafe=True)
    return decision


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


def dispatch(name: str, operands, params=(), cache: bool = True, keep=None):
    """Run op ``name`` on ``operands`` (DTensors, scalars, arrays) with ``params``, hashable
    unless ``cache`` is False (index arrays: decided anew on each call).  ``keep``: an
    operand that must keep its layout (the target an in-place op writes back into)."""
    if views.state.detached:
        _sync(operands)
    seen = read_forms(operands) if reduced.count else operands
    decision = decision_for(name, seen, params) if cache else _decide(name, seen, params)
    return run_decision(name, operands, params, decision, keep, seen)


def read_forms(operands, keep=None) -> tuple:
    """The operands as ops read them (``DTensor.reduced_form``): a tensor of partial terms
    that an earlier op reduced is read reduced; ``keep`` (a write's target) as it is."""
    for o in operands:
        if type(o) is DTensor and o._reduced is not None and o is not keep:
            return tuple(x.reduced_form() if type(x) is DTensor and x is not keep else x
                         for x in operands)
    return operands


def run_decision(name: str, operands, params, decision, keep=None, seen=None):
    """Run a decision (``decision_for``'s, made on ``seen``: the operands as read, by
    default themselves) on the operands and wrap the result; the tape and auto_shard see
    the operands themselves."""
    seen = operands if seen is None else seen
    tracer = modes.active.tracer
    if decision.direct and tracer is None:
        blocks = None
        result = decision.kernel(*[o._local for o in seen])
    else:
        blocks = _blocks(name, seen, decision, keep)
        if tracer is None:
            result = decision.kernel(*blocks)
        else:
            result = tracer.call(name, decision.kernel, blocks, decision.nout,
                                 detail=_strategy(decision, seen))
    if decision.nout > 1:
        out = tuple(_wrap(r, decision) for r in result)
    elif is_block(result) and result.dtype in decision.specs:
        out = DTensor(result, decision.specs[result.dtype])
    else:
        out = _wrap(result, decision)
    if modes.active.tape is not None or modes.active.autoshard is not None:
        used = _as_used(seen, decision, blocks)
        if modes.active.tape is not None:
            modes.active.tape.push(name, operands, params, out, used)
        if modes.active.autoshard is not None and not decision.mesh.is_local:
            modes.active.autoshard.ran(name, operands, params, out, used=used)
    return out


def dispatch_into(name: str, operands, params, target) -> bool:
    """Run op ``name`` writing its result into ``target``'s block, in ``target``'s layout
    (numpy's ``out=``, the in-place operators).  False, having done nothing, when no
    strategy of the op produces that layout or the op cannot write into a block: the caller
    then computes the result and assigns it."""
    if views.state.detached:
        _sync(operands + (target,))
    operands = read_forms(operands, target) if reduced.count else operands
    decision = decision_for(name, operands, params, target._spec.placements)
    if decision is None or decision.into is None or decision.shape != target._spec.shape:
        return False
    if (decision.direct and not decision.check and not params and len(operands) == 2
            and operands[0] is target and modes.active.autoshard is None):
        _direct_into[(name, target._spec, operands[1]._spec)] = decision.into
    blocks = _blocks(name, operands, decision, target) + [target._local]
    if modes.active.tracer is None:
        decision.into(*blocks)
    else:
        modes.active.tracer.call(name, decision.into, blocks, 0, "effect",
                                 _strategy(decision, operands))
    if modes.active.autoshard is not None and not decision.mesh.is_local:
        modes.active.autoshard.ran(name, operands, params, None, target=target)
    return True


def inplace_direct(name: str, target, other) -> bool:
    """``target op= other`` where both blocks are used as they are (the common case) in one
    lookup; False when that case has not been decided yet (``dispatch_into`` decides it).
    The caller makes sure no hook (tape, tracer, view) needs to see the write."""
    into = _direct_into.get((name, target._spec, other._spec))
    if into is None or _model[0] is not _current_model[0]:
        return False
    into(target._local, other._local, target._local)
    return True


def _sync(operands) -> None:
    for o in operands:
        if type(o) is DTensor and o._view is not None:
            views.sync(o)


def _blocks(name, operands, decision, keep=None) -> list:
    """Each operand's block as the decision wants it (redistributed where needed); the
    DTensors reduced on the way keep their reduced block (:func:`_settle`), but ``keep``."""
    guard.state.op = name
    reuse = modes.active.reuse
    if reuse is not None:
        return [(o._local if type(o) is DTensor else o) if run is None
                else _laid_out_once(o, run, spec, reuse)
                for o, run, spec in zip(operands, decision.prepare, decision.in_specs)]
    blocks, moved = [], {}
    for o, run, spec in zip(operands, decision.prepare, decision.in_specs):
        if run is None:
            blocks.append(o._local if type(o) is DTensor else o)
        elif type(o) is not DTensor:
            blocks.append(run(o))
        else:
            key = (id(o), id(run))
            if key not in moved:
                moved[key] = (o, run(o._local), spec)
            blocks.append(moved[key][1])
    for o, block, spec in moved.values():
        if o is not keep:
            _settle(o, block, spec)
    return blocks


class _Reduced:
    count = 0   # reduced twins made so far: until the first, operands are read as they are


reduced = _Reduced()


def _settle(operand, block, spec) -> None:
    """A DTensor of partial terms that an op needed reduced keeps the reduced block as its
    twin (``DTensor.reduced_form``): the same value, so every later read (the normalisation
    after the variance, the residual read again) finds it whole instead of reducing it
    again, as Megatron's all-reduce hands its one result to every consumer.  The operand's
    own placements and block stay as its owner made them (reading never changes a layout);
    its next write drops the twin.  Views keep their own reads, and a compiled step's
    arguments too (the graph reads them as they were passed)."""
    if (operand._view is None and spec is not None
            and any(isinstance(p, Partial) for p in operand._spec.placements)
            and not any(isinstance(p, Partial) for p in spec.placements)
            and (modes.active.tracer is None or not modes.active.tracer.is_input(operand._local))):
        operand._reduced = (operand._version, views.state.epoch, DTensor(block, spec))
        reduced.count += 1


def _strategy(decision: Decision, operands) -> str:
    """``[S(0), R] x const -> [S(0), R]``: the layouts the kernel ran on and produced."""
    used = [fmt(spec.placements) if spec is not None else
            fmt(o.placements) if type(o) is DTensor else "const"
            for o, spec in zip(operands, decision.in_specs)]
    return f"{' x '.join(used)} -> {fmt(decision.placements)}"


def _as_used(operands, decision, blocks):
    """The operands laid out as the op used them: the backward pass reuses these (the
    all-reduced activation, not the Partial one it came from)."""
    if blocks is None:
        return operands
    return tuple(DTensor(b, spec) if spec is not None else o
                 for o, b, spec in zip(operands, blocks, decision.in_specs))


def _laid_out_once(operand, run, spec, reuse: dict):
    """During a backward pass a tensor is redistributed once per layout, however many
    products use it; ``reuse[id]`` also keeps its latest layout, which the pass hands to the
    next product (the memo lives as long as the pass and keeps the operand alive)."""
    if type(operand) is not DTensor:
        return run(operand)
    key = (id(operand), id(run))
    if key not in reuse:
        reuse[key] = reuse[id(operand)] = (operand, DTensor(run(operand._local), spec))
    return reuse[key][1]._local


def _wrap(result, decision: Decision) -> DTensor:
    if not is_block(result):
        result = np.asarray(result)       # numpy reductions return scalars
    return DTensor(result, decision.out_spec(result.dtype))


def as_operand(value, unsafe: bool = False) -> Operand:
    """An operand as the sharding rules see it (shape, dtype, placements, and for a constant
    whether partial terms may meet it)."""
    if type(value) is DTensor:
        return Operand(value.shape, value.dtype, value.placements, safe=not unsafe)
    if isinstance(value, _SCALARS):
        return Operand((), np.dtype(type(value)), None, weak=True, safe=_finite_nonzero(value))
    value = value if is_block(value) else np.asarray(value)
    return Operand(value.shape, value.dtype, None, safe=_finite_nonzero(value))


def _decide(name: str, operands, params, into=None, unsafe=False) -> Decision:
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
        chosen = choose(call, strategy.choices, model, into)
    if chosen is None:
        return None
    in_layouts, out_layout, predicted = chosen
    d = Decision()
    prepared = [_layout_program(o, layout, mesh, model) for o, layout in zip(operands, in_layouts)]
    d.prepare = tuple(run for run, _ in prepared)
    d.in_specs = tuple(spec for _, spec in prepared)
    # every operand a DTensor already laid out as wanted: the common, fastest case
    d.direct = all(type(o) is DTensor and p is None for o, p in zip(operands, d.prepare))
    d.kernel = strategy.bind(in_layouts, out_layout, mesh)
    d.into = strategy.into
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
        return _redistribution(operand.spec, layout, model)
    if all(p == Replicate() for p in layout):
        if mesh.device_type == "cpu" or isinstance(operand, _SCALARS + (np.generic,)):
            return None, None
        return _ConstantBlock(Ellipsis, mesh.device_type), None    # a host array: copied up
    index = local_slices(np.shape(operand), mesh.shape, layout, mesh.coordinate)
    return _ConstantBlock(index, mesh.device_type), None


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

