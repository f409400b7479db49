"""Background checkpoints under MPI (``save(..., blocking=False)``): the same checkpoint as a
blocking save, bit for bit; the state may change right after ``save`` returns; a later save
or load waits for the pending one; keep=N; a failure on one rank raises on every rank at
``wait()`` or at the next save, naming the path and the rank, and the previous checkpoint
stays loadable."""
import glob
import json
import os

import numpy as np
import pytest

pytest.importorskip("zarr")

from mpi_helpers import WORLD, assert_all_ranks, host, mesh_shapes  # noqa: E402
from test_checkpoint import (  # noqa: E402
    check_loaded,
    raises_everywhere,
    same_bits,
    small_state,
    small_template,
    state_on,
    template_on,
)

import mtensor as mt  # noqa: E402
from mtensor import checkpoint as ck  # noqa: E402
from mtensor.checkpoint import store  # noqa: E402
from mtensor.placement import Partial, Replicate, Shard  # noqa: E402

R = Replicate()


def files_of(path):
    """Every file below ``path`` but the marker (which holds a time), relative to it."""
    return sorted(os.path.relpath(f, path) for f in glob.glob(os.path.join(path, "**"),
                                                              recursive=True)
                  if os.path.isfile(f) and os.path.basename(f) != "COMMITTED")


def chunks_of(path):
    with open(os.path.join(path, "COMMITTED")) as f:
        return json.load(f)["chunks"]


def big_state(mesh, value):
    """About 4 MiB a rank: big enough that its writes outlast the caller's next lines."""
    rows = 512 * WORLD.size + 3                    # uneven: the last shards are shorter
    full = np.full((rows, 1024), float(value))
    return {"w": mt.distribute_tensor(full, mesh, [Shard(0)] + [R] * (mesh.ndim - 1)),
            "p": mt.distribute_tensor(np.full((64, 64), float(value)), mesh,
                                      [Partial()] + [R] * (mesh.ndim - 1)),
            "table": np.full((300, 100), value, np.int32), "step": value}


def big_values(state):
    return {"w": np.array(host(state["w"])), "p": np.array(host(state["p"])),    # copies
            "table": state["table"].copy(), "step": state["step"]}


def holds(loaded, values):
    return all(same_bits(loaded[k], values[k]) for k in ("w", "p", "table")) and \
        loaded["step"] == values["step"]


@pytest.mark.mpi
def test_background_save_is_the_blocking_save(ckdir):
    bad = []
    for shape in mesh_shapes():
        mesh = mt.init_device_mesh(shape)
        name = "x".join(map(str, shape))
        blocking, background = (os.path.join(ckdir, f"{name}-{k}") for k in ("b", "bg"))
        state = state_on(mesh, 0)
        ck.save(blocking, state)
        handle = ck.save(background, state, blocking=False)
        bad += [f"{name}: handle {handle!r}"] if not isinstance(handle, ck.SaveHandle) else []
        assert handle.wait() is None
        bad += [f"{name}: not done after wait"] if not handle.done() else []
        if files_of(blocking) != files_of(background):
            bad.append(f"{name}: files {files_of(blocking)} != {files_of(background)}")
        if chunks_of(blocking) != chunks_of(background):
            bad.append(f"{name}: chunk digests differ")
        for load_shape in mesh_shapes():
            template = template_on(mt.init_device_mesh(load_shape), 1)
            bad += [f"{shape} -> {load_shape}: {b}"
                    for b in check_loaded(ck.load(background, like=template), template)]
    assert_all_ranks(not bad, f"{len(bad)} bad, e.g. {bad[:4]}")


@pytest.mark.mpi
def test_the_state_may_change_as_soon_as_save_returns(ckdir):
    mesh = mt.init_device_mesh(mesh_shapes()[-1])
    path = os.path.join(ckdir, "ck")
    state = big_state(mesh, 1)
    before = big_values(state)
    handle = ck.save(path, state, blocking=False)
    w, p = state["w"], state["p"]
    w += 1.0                                   # in place, while the thread writes
    p *= 3.0
    state["table"][...] = -5
    w.to_local()[...] = -7.0
    handle.wait()
    got = ck.load(path)                        # one process's read: no collective
    ok = holds(got, before) and float(host(w).max()) == -7.0
    assert_all_ranks(ok, "the saved values followed the in-place updates")


@pytest.mark.mpi
def test_a_save_or_load_waits_for_the_pending_one(ckdir):
    mesh = mt.init_device_mesh((WORLD.size,))
    first, second = os.path.join(ckdir, "first"), os.path.join(ckdir, "second")
    h1 = ck.save(first, big_state(mesh, 2), blocking=False)
    h2 = ck.save(second, small_state(mesh, 3)[0], blocking=False)     # waits for h1
    ok = h1.done() and os.path.isfile(os.path.join(first, "COMMITTED"))
    ok &= holds(ck.load(first), big_values(big_state(mesh, 2)))
    ck.save(second, small_state(mesh, 4)[0])                          # waits for h2
    ok &= h2.done()
    ok &= h1.wait() is None and h2.wait() is None       # settled: no collective, no error
    h3 = ck.save(first, big_state(mesh, 5), blocking=False)
    got = ck.load(first, like=big_state(mesh, 0))       # waits for h3 (collective)
    ok &= h3.done() and holds(big_values(got), big_values(big_state(mesh, 5)))
    ok &= ck.load(second, like=small_template(mesh))["step"] == 4
    assert_all_ranks(ok, "a save or load ran before the pending save had finished")


@pytest.mark.mpi
def test_keep_rotates_in_the_background(ckdir):
    mesh = mt.init_device_mesh(mesh_shapes()[-1])
    state, _ = small_state(mesh, 5)
    handles = [ck.save(os.path.join(ckdir, f"step-{s:05d}"), state, keep=2, blocking=False)
               for s in (1, 2, 3, 10, 4)]
    handles[-1].wait()
    ok = all(h.done() and h.wait() is None for h in handles)
    WORLD.Barrier()
    left = sorted(os.listdir(ckdir))
    ok &= left == ["step-00004", "step-00010"]
    raises_everywhere("step number", ck.save, os.path.join(ckdir, "final"), state, keep=2,
                      blocking=False)
    assert_all_ranks(ok, f"left {left}")


def one_rank_fails(monkeypatch, name, rank, times=None):
    """``store.<name>`` raises on ``rank`` only (its first ``times`` calls; None: all)."""
    real, calls = getattr(store, name), [0]

    def refuse(*args, **kwargs):
        calls[0] += 1
        if WORLD.rank == rank and (times is None or calls[0] <= times):
            raise PermissionError(f"simulated: {name} refused on this rank")
        return real(*args, **kwargs)
    monkeypatch.setattr(store, name, refuse)


def previous_stays(ckdir, path, mesh, step):
    WORLD.Barrier()
    return sorted(os.listdir(ckdir)) == ["ck"] and \
        ck.load(path, like=small_template(mesh))["step"] == step


@pytest.mark.mpi
@pytest.mark.parametrize("where", ["write_region", "write_record"])
def test_a_failure_on_one_rank_is_raised_on_every_rank(ckdir, monkeypatch, where):
    mesh = mt.init_device_mesh((WORLD.size,))
    path = os.path.join(ckdir, "ck")
    ck.save(path, small_state(mesh, 1)[0])
    last = min(WORLD.size, 7) - 1        # the last rank that holds rows of (7, 5)
    named = f"rank {last}: PermissionError" if WORLD.size > 1 else "(on every rank)"

    one_rank_fails(monkeypatch, where, last)
    handle = ck.save(path, small_state(mesh, 2)[0], blocking=False)
    text = raises_everywhere("PermissionError: simulated", handle.wait)
    ok = named in text and path in text
    ok &= raises_everywhere("simulated", handle.wait) == text          # again, the same
    monkeypatch.undo()
    ok &= previous_stays(ckdir, path, mesh, 1)

    one_rank_fails(monkeypatch, where, last, times=1)   # nobody waits: the next save raises
    ck.save(path, small_state(mesh, 3)[0], blocking=False)
    text = raises_everywhere("PermissionError: simulated", ck.save, path,
                             small_state(mesh, 4)[0])
    ok &= named in text and path in text
    ok &= previous_stays(ckdir, path, mesh, 1)
    ck.save(path, small_state(mesh, 5)[0], blocking=False).wait()       # and then it works
    ok &= previous_stays(ckdir, path, mesh, 5)
    assert_all_ranks(ok, f"{where}: not raised alike on every rank, or the checkpoint lost")


@pytest.mark.mpi
def test_a_failed_commit_and_a_bad_path(ckdir, monkeypatch):
    mesh = mt.init_device_mesh((WORLD.size,))
    path = os.path.join(ckdir, "ck")
    ck.save(path, small_state(mesh, 1)[0])
    one_rank_fails(monkeypatch, "commit", 0)
    handle = ck.save(path, small_state(mesh, 2)[0], blocking=False)
    text = raises_everywhere("simulated: commit refused", handle.wait)
    monkeypatch.undo()
    ok = (WORLD.size == 1 or "rank 0: PermissionError" in text) and "stays in" in text
    ok &= ck.load(path, like=small_template(mesh))["step"] == 1
    afile = os.path.join(ckdir, "afile")
    if WORLD.rank == 0:
        open(afile, "w").close()
    WORLD.Barrier()                      # raised by save itself: its collective part
    raises_everywhere("afile", ck.save, os.path.join(afile, "ck"), small_state(mesh)[0],
                      blocking=False)
    assert_all_ranks(ok, text)


@pytest.mark.mpi
def test_rank_0_stops_waiting_for_a_record_that_never_comes(ckdir, monkeypatch):
    if WORLD.size == 1:
        pytest.skip("needs two ranks")
    mesh = mt.init_device_mesh((WORLD.size,))
    path = os.path.join(ckdir, "ck")
    ck.save(path, small_state(mesh, 1)[0])
    monkeypatch.setenv("MTENSOR_TIMEOUT", "0.5")      # read by rank 0's thread only
    if WORLD.rank == 1:                               # "writes" its record, leaves none
        monkeypatch.setattr(store, "write_record", lambda *args: None)
    handle = ck.save(path, small_state(mesh, 2)[0], blocking=False)
    text = raises_everywhere("rank 0: TimeoutError: rank 1 left no record", handle.wait)
    monkeypatch.undo()
    ok = ck.load(path, like=small_template(mesh))["step"] == 1 and path in text
    assert_all_ranks(ok, text)
