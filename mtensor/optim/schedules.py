"""Learning-rate schedules as plain functions of the step (optax's shapes): pass one as an
optimizer's ``lr``, and it is evaluated at each update from the optimizer state's step
count (0 at the first update), inside a compiled step too.  Past its last step a schedule
holds its final value, as optax's do; a negative step is an error.
"""
from __future__ import annotations

import math


def _count(name: str, value, least: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name}: expected an integer >= {least}, got {value!r}")
    return value


def _step(name: str, step) -> int:
    step = int(step)
    if step < 0:
        raise ValueError(f"{name}: the step is {step}; schedules start at step 0")
    return step


def constant(value: float):
    """``value`` at every step."""
    def schedule(step):
        _step("constant", step)
        return value
    return schedule


def linear(init_value: float, end_value: float, transition_steps: int,
           transition_begin: int = 0):
    """``init_value`` until ``transition_begin``, then linearly to ``end_value`` over
    ``transition_steps`` steps, then ``end_value``."""
    _count("linear (transition_steps)", transition_steps, 1)
    _count("linear (transition_begin)", transition_begin)

    def schedule(step):
        done = min(max(_step("linear", step) - transition_begin, 0), transition_steps)
        return init_value + (end_value - init_value) * done / transition_steps
    return schedule


def warmup_cosine(init_value: float, peak_value: float, warmup_steps: int,
                  decay_steps: int, end_value: float = 0.0):
    """optax's ``warmup_cosine_decay_schedule``: linear from ``init_value`` to
    ``peak_value`` over ``warmup_steps``, then a half cosine down to ``end_value`` at
    ``decay_steps`` (counted from step 0, warmup included), then ``end_value``."""
    _count("warmup_cosine (warmup_steps)", warmup_steps)
    _count("warmup_cosine (decay_steps)", decay_steps, 1)
    if decay_steps < warmup_steps:
        raise ValueError(f"warmup_cosine: decay_steps ({decay_steps}) counts the warmup too; "
                         f"it must be >= warmup_steps ({warmup_steps})")

    def schedule(step):
        step = _step("warmup_cosine", step)
        if step < warmup_steps:
            return init_value + (peak_value - init_value) * step / warmup_steps
        span = decay_steps - warmup_steps
        done = min(step - warmup_steps, span) / span if span else 1.0
        return end_value + (peak_value - end_value) * 0.5 * (1 + math.cos(math.pi * done))
    return schedule
