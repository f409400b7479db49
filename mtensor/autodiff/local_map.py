"""``mt.local_map``: a rank's own code on the blocks, inside a DTensor program (DTensor's
``local_map``, JAX's ``shard_map``).

``fn`` gets each DTensor argument's block and returns blocks, which come back as DTensors
with the declared ``out_placements``.  It is differentiable through the tape: inside
``value_and_grad`` the blocks are DTensors of the rank's one-rank mesh, so numpy code on them
is recorded op by op (a ``custom_vjp`` of ``fn`` gives its own gradient instead).

The gradient placements default to the forward's *transposed*: a replicated input's gradient
is ``Partial()`` (each rank's code used the whole input, so each holds a term of its
gradient), a ``Partial`` input's is replicated, a shard stays a shard; likewise the cotangent
of each output is taken transposed before ``fn``'s backward runs.  That is the rule DTensor's
and JAX's users most often get wrong by hand.  Under ``MTENSOR_CHECK=1`` an output (or a
gradient) declared ``Replicate()`` whose blocks differ across ranks raises on every rank.

Under ``mt.compile`` the call of ``fn`` on plain blocks is one node of the graph, replayed
as it is; with a gradient its ops are recorded one by one.
"""
from __future__ import annotations

import functools

from .. import modes
from ..dtensor import DTensor
from ..halo import halo as halo_block
from ..placement import Partial, Placement, Replicate
from ..spec import fmt_placements
from .blocks import check_replicated


def local_map(fn=None, out_placements=None, in_placements=None, in_grad_placements=None,
              device_mesh=None, *, redistribute_inputs: bool = False, halo=None):
    """``fn`` run on each rank's blocks, as a function of DTensors.

    ``out_placements``: the placements of the one output, or a tuple of them (None for an
    output that is not an array) matching the tuple ``fn`` returns.  ``in_placements``: per
    positional argument, the placements its DTensor must have (None: any); a DTensor laid
    out otherwise is redistributed with ``redistribute_inputs=True``, else refused.
    ``in_grad_placements``: per argument, the layout of its gradient (default: its
    placements transposed).  Called with no DTensor argument, ``fn``'s result is returned as
    it is (DTensor's rule; ``device_mesh`` is accepted for its signature).  ``halo``:
    ``(dim, width)`` for every DTensor argument, or ``{position: (dim, width)}``: that
    argument's block comes with ``width`` slices of its neighbours' blocks along ``dim``
    attached (``mt.halo``; ``(dim, width, True)`` wraps round); not under a gradient.
    Usable as a decorator: ``@mt.local_map(out_placements=[Shard(0)])``."""
    if fn is None:
        return functools.partial(local_map, out_placements=out_placements,
                                 in_placements=in_placements,
                                 in_grad_placements=in_grad_placements,
                                 device_mesh=device_mesh,
                                 redistribute_inputs=redistribute_inputs, halo=halo)
    if out_placements is None:
        raise TypeError("local_map: out_placements is required (the placements of each "
                        "output block, e.g. [Shard(0)])")
    single = _is_placements(out_placements)
    outs = (tuple(out_placements),) if single else tuple(
        None if p is None else tuple(p) for p in out_placements)
    name = getattr(fn, "__name__", "fn")

    @functools.wraps(fn)
    def mapped(*args, **kwargs):
        args = _laid_out(name, args, in_placements, redistribute_inputs)
        mesh = next((a.device_mesh for a in args if type(a) is DTensor), None)
        if mesh is None:        # DTensor's rule: plain arguments, fn's result as it is
            return fn(*args, **kwargs)
        followed = modes.active.tape is not None and any(
            modes.is_tracked(a) for a in args)
        grads = in_grad_placements or (None,) * len(args)
        blocks = [_block_of(a, g, followed) for a, g in zip(args, grads)]
        if halo is not None:
            blocks = _with_halos(name, args, blocks, halo, followed)
        result = _run(name, fn, blocks, kwargs, len(outs), single, followed)
        results = (result,) if single else tuple(result)
        if len(results) != len(outs):
            raise ValueError(f"local_map({name}): fn returned {len(results)} outputs but "
                             f"out_placements names {len(outs)}")
        wrapped = tuple(r if p is None else _wrap(name, r, mesh, p, followed)
                        for r, p in zip(results, outs))
        return wrapped[0] if single else wrapped
    return mapped


def _is_placements(value) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(
        isinstance(p, Placement) for p in value)


def _laid_out(name, args, in_placements, redistribute: bool) -> tuple:
    """The arguments laid out as ``in_placements`` asks.  While ``auto_shard`` records
    (every argument a replicated copy) they are redistributed, so the plan sees each as
    pinned to its declared layout: ``fn`` is an opaque node of the graph."""
    if modes.active.autoshard is not None:
        if in_placements is None:
            raise ValueError(f"local_map({name}): under auto_shard, pass in_placements (the "
                             f"layout fn's blocks need is part of the plan)")
        redistribute = True
    if in_placements is None:
        return args
    if len(in_placements) != len(args):
        raise ValueError(f"local_map({name}): in_placements names {len(in_placements)} "
                         f"arguments but {len(args)} were passed")
    out = []
    for i, (a, want) in enumerate(zip(args, in_placements)):
        if type(a) is DTensor and want is not None and tuple(want) != a.placements:
            if not redistribute:
                raise ValueError(
                    f"local_map({name}): argument {i} of shape {a.shape} is laid out as "
                    f"{fmt_placements(a.placements)} but in_placements asks {fmt_placements(want)}; "
                    f"redistribute it, or pass redistribute_inputs=True")
            a = a.redistribute(placements=want)
        out.append(a)
    return tuple(out)


def transposed(placements) -> tuple:
    """The gradient's layout for a value laid out as ``placements``: Replicate <-> Partial."""
    out = []
    for p in placements:
        if isinstance(p, Partial) and p.reduce_op != "sum":
            raise ValueError(f"local_map: no default gradient layout for {p} (not linear "
                             f"in its terms); pass in_grad_placements")
        out.append(Partial() if p == Replicate() else Replicate() if isinstance(p, Partial)
                   else p)
    return tuple(out)


def _block_of(arg, grad_placements, followed: bool):
    if type(arg) is not DTensor:
        return arg
    if followed and modes.is_tracked(arg):
        grads = transposed(arg.placements) if grad_placements is None else grad_placements
        return arg.to_local(grad_placements=grads)
    return arg._block() if modes.active.tracer is None else arg._local


def _with_halos(name, args, blocks, halo, followed: bool) -> list:
    """The blocks of the arguments ``halo`` names, with their neighbours' edges."""
    wanted = halo if isinstance(halo, dict) else {
        i: halo for i, a in enumerate(args) if type(a) is DTensor}
    out = list(blocks)
    for i, spec in wanted.items():
        if i >= len(args) or type(args[i]) is not DTensor:
            raise ValueError(f"local_map({name}): halo names argument {i}, which is not a "
                             f"DTensor argument")
        if followed:
            raise TypeError(f"local_map({name}): halo= blocks have no gradient; compute the "
                            f"stencil with shifted slices (U[2:] + U[:-2]), which exchange "
                            f"halos and differentiate")
        dim, width, *periodic = spec
        out[i] = halo_block(args[i], width, dim, *periodic)
    return out


def _run(name, fn, blocks, kwargs, nout: int, single: bool, followed: bool):
    """``fn`` on the blocks; while tracing without a gradient, one node of the graph."""
    tracer = modes.active.tracer
    if tracer is None or followed:
        return fn(*blocks, **kwargs)
    call = (lambda *b: fn(*b, **kwargs)) if single else (lambda *b: tuple(fn(*b, **kwargs)))
    return tracer.call(f"local_map({name})", call, blocks, 1 if single else nout)


def _wrap(name, result, mesh, placements, followed: bool) -> DTensor:
    """An output block as a DTensor (its global shape gathered where it is sharded)."""
    if type(result) is DTensor and result.device_mesh is not mesh.local_mesh():
        raise TypeError(f"local_map({name}): fn returned a DTensor on {result.device_mesh}; "
                        f"it must return this rank's blocks")
    out = DTensor.from_local(result, mesh, list(placements),
                             grad_placements=transposed(placements) if followed else None)
    check_replicated(out, f"local_map({name}): an output")
    return out
