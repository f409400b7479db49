"""The corpus's registry: a snippet is a function of numpy arrays, its source, and a builder
of its inputs (fixed seeds, sizes that shard unevenly at 2 and 4 ranks)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np


@dataclass(frozen=True)
class Snippet:
    name: str
    source: str                      # repository + path (or URL) + exercise, as in README.md
    fn: Callable
    inputs: Callable[[], tuple]      # fresh inputs on every call (snippets may write into them)
    second: Optional[str] = "replicate"   # the second layout: "replicate", "last" or None


def registry():
    """A list and the decorator that fills it: ``@snippet(name, source, inputs, second=...)``."""
    found = []

    def snippet(name, source, inputs, second="replicate"):
        def add(fn):
            found.append(Snippet(name, source, fn, inputs, second))
            return fn
        return add
    return found, snippet


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def uniform(lo, hi, shape, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def randint(lo, hi, shape, seed=0):
    return np.random.default_rng(seed).integers(lo, hi, shape)
