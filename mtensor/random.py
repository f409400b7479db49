"""``mt.random.default_rng(seed)``: random DTensors whose values do not depend on the mesh.

A counter-based generator: the value at global element ``i`` of the ``k``-th draw is a hash
of (seed, k, i) (SplitMix64's finalizer over a Weyl sequence, as in Steele, Lea and Flood,
"Fast splittable pseudorandom number generators", 2014), so each rank computes exactly its
own block with no communication and any mesh or placements give the same tensor.  Every rank
advances the draw counter alike, so successive calls differ.  The numbers are not those of
``numpy.random``.

On a GPU mesh the same arithmetic runs on the device (64-bit integer ops), so integers and
``random``/``uniform`` floats equal the host's bit for bit; ``standard_normal`` and ``normal``
go through the device's ``log1p``/``sqrt``/``cos``, which may differ from numpy's in the last
ulp.
"""
from __future__ import annotations

import numpy as np

from .device.arrays import array_module
from .dtensor import DTensor
from .numpy.creation import layout
from .placement import local_bounds

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function: a bijective avalanche on 64-bit words."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def _global_index(spec):
    """Row-major global position of every element of this rank's block (uint64, on the
    mesh's device)."""
    mesh = spec.mesh
    xp = array_module(mesh.device_type)
    bounds = local_bounds(spec.shape, mesh.shape, spec.placements, mesh.coordinate)
    index = xp.zeros((1,) * len(spec.shape), np.uint64)
    stride = 1
    for d in reversed(range(len(spec.shape))):
        lo, hi = bounds[d]
        along = xp.arange(lo, hi, dtype=np.uint64) * np.uint64(stride)
        index = index + along.reshape((-1,) + (1,) * (len(spec.shape) - 1 - d))
        stride *= spec.shape[d]
    return index


class Generator:
    """Draws DTensors; ``shape``/``size`` is the global shape, on ``mesh=`` or, without it,
    the mesh of the enclosing ``with mesh:`` block."""

    def __init__(self, seed: int = 0):
        self._key = _mix(np.array([seed], np.uint64))[0]
        self._draws = 0

    def _bits(self, op, shape, mesh, placements, dtype, per_element=1):
        spec = layout(op, shape, mesh, placements, dtype)
        with np.errstate(over="ignore"):
            base = _mix(np.array([self._key + np.uint64(self._draws) * _GOLDEN], np.uint64))[0]
            self._draws += 1
            index = _global_index(spec) * np.uint64(per_element)
            bits = [_mix(base + (index + np.uint64(k + 1)) * _GOLDEN) for k in range(per_element)]
        return spec, bits

    def _unit(self, bits):
        """Floats uniform in [0, 1) from the top 53 bits."""
        return (bits >> np.uint64(11)).astype(np.float64) * 2.0 ** -53

    def random(self, size=(), dtype=np.float64, *, mesh=None, placements=None) -> DTensor:
        spec, (bits,) = self._bits("random", size, mesh, placements, dtype)
        return DTensor(self._unit(bits).astype(spec.dtype), spec)

    def uniform(self, low=0.0, high=1.0, size=(), *, mesh=None, placements=None) -> DTensor:
        spec, (bits,) = self._bits("uniform", size, mesh, placements, np.float64)
        return DTensor(low + (high - low) * self._unit(bits), spec)

    def standard_normal(self, size=(), dtype=np.float64, *, mesh=None, placements=None) -> DTensor:
        """Box-Muller on two uniforms per element."""
        spec, (b1, b2) = self._bits("standard_normal", size, mesh, placements, dtype, 2)
        radius = np.sqrt(-2.0 * np.log1p(-self._unit(b1)))
        return DTensor((radius * np.cos(2.0 * np.pi * self._unit(b2))).astype(spec.dtype), spec)

    def normal(self, loc=0.0, scale=1.0, size=(), *, mesh=None, placements=None) -> DTensor:
        z = self.standard_normal(size, mesh=mesh, placements=placements)
        return DTensor(loc + scale * z._local, z.spec)

    def integers(self, low, high=None, size=(), dtype=np.int64, endpoint=False, *, mesh=None,
                 placements=None) -> DTensor:
        if high is None:
            low, high = 0, low
        span = int(high) - int(low) + (1 if endpoint else 0)
        if span <= 0:
            raise ValueError(f"integers: low={low} must be below high={high}")
        spec, (bits,) = self._bits("integers", size, mesh, placements, dtype)
        return DTensor((int(low) + (bits % np.uint64(span)).astype(np.int64)).astype(spec.dtype),
                       spec)


def default_rng(seed: int = 0) -> Generator:
    return Generator(seed)
