"""Views that alias their base, as numpy's do: writing to either shows in both.

Where a view's block is a numpy view of its base's block (a slice along a dim that is not
split, a transpose, ``expand_dims``) the aliasing is numpy's own: the view is *attached* and
shares its base's storage.  Where it cannot be (a slice across a split dim gathers or makes
partial terms), the view is *detached*: it owns a block, and

- a write to it (or to anything attached to it) is written through to its base
  (``put_back``: the base's setitem at the view's key), and
- a write to its base makes it stale: the next read recomputes it (``redo``).

Staleness is tracked with a version per storage owner, bumped by every write; every rank
writes in the same program order, so the versions, and with them every refresh and its
collectives, agree across ranks.  A compiled replay cannot count its writes, so it starts a
new epoch and every detached view refreshes on its next read.
"""
from __future__ import annotations

import numpy as np

from . import modes


class View:
    """How a DTensor views ``parent``: through ``op`` (the view op's name and params);
    ``key``: the index object a getitem view was made with (``x[k] op= v`` hands the same
    object to the setitem that follows); ``seen``: the parent storage's (epoch, version)
    the view's values were taken at."""

    __slots__ = ("parent", "op", "attached", "key", "seen")

    def __init__(self, parent, op, attached: bool, key=None):
        self.parent, self.op, self.attached, self.key = parent, op, attached, key
        self.seen = stamp(parent)


class _State:
    detached = False   # any detached view made so far: reads must check for staleness
    epoch = 0          # advanced by a compiled replay, which writes without counting


state = _State()

# Filled by the layer that makes views (numpy.shapes), so this one imports nothing above:
# recompute(parent, op) -> the view anew; PUT_BACK[op name](parent, view, params) writes a
# view's values into its parent.
recompute = None
PUT_BACK: dict = {}


def owner(x):
    """The DTensor whose storage ``x``'s block lives in."""
    while x._view is not None and x._view.attached:
        x = x._view.parent
    return x


def stamp(x):
    """What names the content of ``x``'s storage: (replay epoch, its owner's write count)."""
    return state.epoch, owner(x)._version


def link(out, parent, op, attached: bool, key=None) -> None:
    """Make ``out`` a view of ``parent`` through ``op`` (name, params)."""
    out._view = View(parent, op, attached, key)
    if not attached or owner(parent)._view is not None:
        state.detached = True


def sync(x) -> None:
    """Bring ``x`` up to date with the bases it views (a collective where recomputing the
    view needs one; every rank syncs at the same reads, so they agree)."""
    o = owner(x)
    view = o._view
    if view is None:
        return
    sync(view.parent)
    now = stamp(view.parent)
    if view.seen != now:
        fresh = recompute(view.parent, view.op)
        modes.effect("refresh view", np.copyto, o._local, fresh._local)
        view.seen = now
        o._version += 1


def wrote(x) -> None:
    """``x``'s block was just written in place: count it, and write it through to its base."""
    o = owner(x)
    o._version += 1
    if o._windows is not None:
        o._windows[1] = {}     # the widened blocks are stale; the widths read stay a hint
    view = o._view
    if view is not None:
        PUT_BACK[view.op[0]](view.parent, o, view.op[1])
        view.seen = stamp(view.parent)


def new_epoch() -> None:
    """Every detached view refreshes at its next read: after a compiled replay (which writes
    blocks without counting), and when a trace starts (so the trace records the refresh of
    each view made before it, and its replays repeat it)."""
    state.epoch += 1
