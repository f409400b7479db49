"""Optimizers as small pure functions on pytrees of DTensors: ``sgd`` and ``adam``.

They update each parameter's local block in place and need no communication, because
``value_and_grad`` lays every gradient out like its parameter.  Each update is an
``effect``, so inside ``mt.compile`` it is recorded and replayed in place.
"""
from __future__ import annotations

import numpy as np

from .modes import effect
from .pytree import flatten


def _pairs(params, grads):
    leaves, _ = flatten(params)
    gleaves, _ = flatten(grads)
    for p, g in zip(leaves, gleaves):
        if p.placements != g.placements or p.shape != g.shape:
            raise ValueError(f"optim: a gradient laid out as {list(g.placements)} {g.shape} "
                             f"does not match its parameter {list(p.placements)} {p.shape}")
        yield p, g


def _sgd_update(p, g, lr):
    p -= lr * g


def sgd(params, grads, lr: float = 1e-2) -> None:
    """``p -= lr * g`` on every local block."""
    for p, g in _pairs(params, grads):
        effect("sgd", _sgd_update, p._local, g._local, lr)


def adam_init(params) -> dict:
    """Adam's state: the step count (a 0-d array, so a compiled step advances it) and zeroed
    moments, one per local block."""
    leaves, _ = flatten(params)
    return {"step": np.zeros((), np.int64), "m": [np.zeros_like(p._local) for p in leaves],
            "v": [np.zeros_like(p._local) for p in leaves]}


def _count(step):
    step += 1


def _adam_update(p, g, m, v, step, lr, b1, b2, eps):
    t = int(step)
    m *= b1
    m += (1 - b1) * g
    v *= b2
    v += (1 - b2) * g * g
    p -= lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)


def adam(params, grads, state: dict, lr: float = 1e-3, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8) -> dict:
    """One Adam step (Kingma and Ba, 2015) in place; returns the updated state."""
    effect("adam step", _count, state["step"])
    for (p, g), m, v in zip(_pairs(params, grads), state["m"], state["v"]):
        effect("adam", _adam_update, p._local, g._local, m, v, state["step"], lr, b1, b2, eps)
    return state
