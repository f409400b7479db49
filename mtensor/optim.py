"""Optimizers as small pure functions on pytrees of DTensors: ``sgd`` and ``adam``.

They update each parameter's local block in place and need no communication, because
``value_and_grad`` lays every gradient out like its parameter.
"""
from __future__ import annotations

import numpy as np

from .autodiff.api import _flatten


def _pairs(params, grads):
    leaves, _ = _flatten(params)
    gleaves, _ = _flatten(grads)
    for p, g in zip(leaves, gleaves):
        if p.placements != g.placements or p.shape != g.shape:
            raise ValueError(f"optim: a gradient laid out as {list(g.placements)} {g.shape} "
                             f"does not match its parameter {list(p.placements)} {p.shape}")
        yield p, g


def sgd(params, grads, lr: float = 1e-2) -> None:
    """``p -= lr * g`` on every local block."""
    for p, g in _pairs(params, grads):
        p.to_local()[...] -= lr * g.to_local()


def adam_init(params) -> dict:
    """Adam's state: step count and zeroed moments, one per local block."""
    leaves, _ = _flatten(params)
    return {"step": 0, "m": [np.zeros_like(p.to_local()) for p in leaves],
            "v": [np.zeros_like(p.to_local()) for p in leaves]}


def adam(params, grads, state: dict, lr: float = 1e-3, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8) -> dict:
    """One Adam step (Kingma and Ba, 2015) in place; returns the updated state."""
    state["step"] += 1
    t = state["step"]
    for (p, g), m, v in zip(_pairs(params, grads), state["m"], state["v"]):
        gl = g.to_local()
        m *= b1
        m += (1 - b1) * gl
        v *= b2
        v += (1 - b2) * gl * gl
        p.to_local()[...] -= lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return state
