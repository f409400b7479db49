"""The optimizers: ``sgd`` (momentum, Nesterov), ``adam``, ``adamw`` and ``lion``, each
updating every parameter's local block in place, with no communication: the gradients are
first laid out like their parameters (``reduce_grads``: the step's one reduction of
``reduce=False`` gradients; a no-op for gradients already laid out so), and the state
(``*_init``) is DTensors laid out like the parameters, so ``mt.save`` checkpoints it and
``mt.load(like=...)`` restores it on any mesh.  The state's ``step`` is a 0-d array the
update advances in place, so a compiled step advances it too, and a schedule passed as
``lr`` is evaluated at each update from it (0 at the first).  Each update is an ``effect``,
so inside ``mt.compile`` it is recorded and replayed in place; Adam's and AdamW's is one
fused update per parameter (``optim.fused``: scratch buffers on the host, one generated
kernel on a GPU).
"""
from __future__ import annotations

import numpy as np

from ..dtensor import DTensor
from ..modes import effect
from ..pytree import flatten
from ..spec import fmt_placements
from .fused import adam_update
from .grads import reduce_grads


def _zeros_like(params):
    leaves, build = flatten(params)
    return build([np.zeros_like(p) if type(p) is DTensor else None for p in leaves])


def sgd_init(params) -> dict:
    """SGD's state: the step count and a zeroed momentum trace per parameter."""
    return {"step": np.zeros((), np.int64), "trace": _zeros_like(params)}


def adam_init(params) -> dict:
    """The state of ``adam`` and ``adamw``: the step count and zeroed moments ``m``, ``v``."""
    return {"step": np.zeros((), np.int64), "m": _zeros_like(params),
            "v": _zeros_like(params)}


def lion_init(params) -> dict:
    """Lion's state: the step count and a zeroed moment ``m``."""
    return {"step": np.zeros((), np.int64), "m": _zeros_like(params)}


def _blocks(what: str, params, grads, *states):
    """Per parameter: its block, its gradient's (laid out like it) and its state's blocks."""
    grads = reduce_grads(grads, params)
    trees = [flatten(t)[0] for t in (params, grads, *states)]
    for i, (p, *rest) in enumerate(zip(*trees)):
        if type(p) is not DTensor:
            continue
        for s in rest[1:]:
            if type(s) is not DTensor or s.shape != p.shape or s.placements != p.placements:
                found = (f"{s.shape} {fmt_placements(s.placements)}" if type(s) is DTensor
                         else type(s).__name__)
                raise ValueError(f"{what}: the state of parameter {i} ({p.shape} "
                                 f"{fmt_placements(p.placements)}) is {found}; make the state "
                                 f"with the optimizer's init from these parameters")
        yield p._local, *(x._local for x in rest)


def _rate(lr, step) -> float:
    return lr(int(step) - 1) if callable(lr) else lr


def _advance(step):
    step += 1


def _sgd_update(p, g, lr):
    p -= lr * g


def _momentum_update(p, g, trace, step, lr, momentum, nesterov):
    trace *= momentum
    trace += g
    p -= _rate(lr, step) * (g + momentum * trace if nesterov else trace)


def sgd(params, grads, lr=1e-2, *, state=None, momentum=None, nesterov: bool = False):
    """``p -= lr * g``; with ``momentum`` (PyTorch's and optax's form, no dampening) the
    trace ``t = momentum * t + g`` is applied instead, or ``g + momentum * t`` with
    ``nesterov``.  Momentum and a schedule as ``lr`` need ``state=sgd_init(params)``.
    Returns the state."""
    if state is None:
        if momentum is not None or callable(lr):
            raise ValueError("sgd: momentum and a learning-rate schedule keep a state; pass "
                             "state=mt.optim.sgd_init(params)")
        for p, g in _blocks("sgd", params, grads):
            effect("sgd", _sgd_update, p, g, lr)
        return None
    effect("sgd step", _advance, state["step"])
    for p, g, t in _blocks("sgd", params, grads, state["trace"]):
        effect("sgd", _momentum_update, p, g, t, state["step"], lr, momentum or 0.0,
               nesterov)
    return state


def _adam_update(p, g, m, v, step, lr, b1, b2, eps, decay):
    adam_update(p, g, m, v, int(step), _rate(lr, step), b1, b2, eps, decay)


def _adam_family(what, params, grads, state, lr, b1, b2, eps, weight_decay, mask):
    leaves = flatten(params)[0]
    keep = [True] * len(leaves) if mask is None else flatten(mask)[0]
    if len(keep) != len(leaves):
        raise ValueError(f"{what}: mask has {len(keep)} leaves but params has {len(leaves)}")
    decays = [weight_decay if k else 0.0 for p, k in zip(leaves, keep) if type(p) is DTensor]
    effect(f"{what} step", _advance, state["step"])
    blocks = _blocks(what, params, grads, state["m"], state["v"])
    for (p, g, m, v), decay in zip(blocks, decays):
        effect(what, _adam_update, p, g, m, v, state["step"], lr, b1, b2, eps, decay)
    return state


def adam(params, grads, state: dict, lr=1e-3, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8) -> dict:
    """One Adam step (Kingma and Ba, 2015) in place; returns the updated state."""
    return _adam_family("adam", params, grads, state, lr, b1, b2, eps, 0.0, None)


def adamw(params, grads, state: dict, lr=1e-3, b1: float = 0.9, b2: float = 0.999,
          eps: float = 1e-8, weight_decay: float = 1e-4, mask=None) -> dict:
    """AdamW (Loshchilov and Hutter, 2019), optax's form: ``p -= lr * (adam + wd * p)``, the
    decay decoupled from the moments.  ``mask``: a tree of bools like ``params`` (False: no
    decay, e.g. for biases and norms)."""
    return _adam_family("adamw", params, grads, state, lr, b1, b2, eps, weight_decay, mask)


def _lion_update(p, g, m, step, lr, b1, b2, decay):
    direction = np.sign(b1 * m + (1 - b1) * g)
    m *= b2
    m += (1 - b2) * g
    if decay:
        direction += decay * p
    p -= _rate(lr, step) * direction


def lion(params, grads, state: dict, lr=1e-4, b1: float = 0.9, b2: float = 0.99,
         weight_decay: float = 1e-3) -> dict:
    """Lion (Chen et al., 2023), optax's form: the sign of an interpolated momentum, with
    decoupled weight decay; one moment of state (``lion_init``)."""
    effect("lion step", _advance, state["step"])
    for p, g, m in _blocks("lion", params, grads, state["m"]):
        effect("lion", _lion_update, p, g, m, state["step"], lr, b1, b2, weight_decay)
    return state
