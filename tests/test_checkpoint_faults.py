"""A rank killed with SIGKILL in the middle of a checkpoint save never costs the checkpoint.

Each run is its own ``mpiexec -n 2`` (under a timeout) that saves step k over the
checkpoint of an earlier step while one rank kills itself at a chosen point: inside each
phase of the save on either rank, at rank 0's commit and publish, or after a random delay.
Afterwards a plain process loads the checkpoint: it must be complete and be either the one
committed before or the new one, never a mix.  ``MTENSOR_FAULT_RUNS`` caps the runs.
The background save (``blocking=False``) is killed at the points inside its thread: the
chunk writes, before and after each rank's record file, rank 0's commit; its last run
exits without ``wait()``, and the exit hook must still commit it.
"""
import os
import random
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from launcher import finish, mpiexec

pytest.importorskip("zarr")

SCRIPT = r"""
import os, signal, sys, threading
import numpy as np
import mtensor as mt
from mtensor import checkpoint as ck
from mtensor.checkpoint import store
from mpi4py import MPI

path, step, victim, hook, nth, delay, mode = sys.argv[1:8]
step, victim, nth, delay = int(step), int(victim), int(nth), float(delay)
rank = MPI.COMM_WORLD.rank
mesh = mt.init_device_mesh((MPI.COMM_WORLD.size,))
state = {"w": mt.distribute_tensor(np.full((6, 4), float(step)), mesh, [mt.Shard(0)]),
         "b": mt.distribute_tensor(np.arange(5.0) + step, mesh, [mt.Replicate()]),
         "step": step}

def die():
    os.kill(os.getpid(), signal.SIGKILL)

if rank == victim and hook == "timer":
    timer = threading.Timer(delay, die)
    timer.daemon = True
    timer.start()
elif rank == victim and hook != "none":
    when, name = hook.split(":")
    real, calls = getattr(store, name), [0]
    def wrapped(*args, **kwargs):
        calls[0] += 1
        if when == "before" and calls[0] == nth:
            die()
        out = real(*args, **kwargs)
        if when == "after" and calls[0] == nth:
            die()
        return out
    setattr(store, name, wrapped)
MPI.COMM_WORLD.Barrier()
if mode == "blocking":
    ck.save(path, state)
else:
    handle = ck.save(path, state, blocking=False)
    state["w"] += 1.0                # the training goes on: not in the checkpoint
    if mode == "background":
        handle.wait()
print(f"saved {step}", flush=True)   # one write: ranks print at once
"""

# (victim rank, hook, nth call): every phase of a save, on the rank that runs it
POINTS = [
    (0, "before:create_root", 1), (0, "after:create_root", 1),
    (1, "before:create_arrays", 1), (0, "after:create_arrays", 1),
    (1, "before:write_region", 1), (0, "before:write_region", 2),
    (1, "after:write_region", 1), (0, "before:fsync", 1), (1, "after:fsync", 1),
    (0, "before:commit", 1),
    (0, "after:fsync", 2),          # in commit: metadata flushed, no marker yet
    (0, "after:fsync", 3),          # in commit: marker written, not yet published
    (0, "before:publish", 1), (0, "after:publish", 1), (0, "after:commit", 1),
]
# the same, inside the background save's thread (its main-thread phases are the ones above)
BACKGROUND_POINTS = [
    (1, "before:write_region", 1),  # writing the chunks
    (1, "after:fsync", 1),          # chunks flushed, no record file yet
    (1, "after:write_record", 1),   # record left: rank 0 may commit before the kill lands
    (0, "after:write_record", 1),   # rank 0's thread about to wait for rank 1's record
    (0, "before:commit", 1),        # every record read, the folder removed
    (0, "after:fsync", 3),          # in commit: marker written, not yet published
    (0, "before:publish", 1),
]


def run_once(path, step, victim, hook, nth, delay, mode="blocking"):
    env = dict(os.environ, PYTHONUNBUFFERED="1", MTENSOR_TIMEOUT="30")
    proc = subprocess.Popen(
        [mpiexec(), "-n", "2", sys.executable, "-c", SCRIPT, path, str(step), str(victim), hook,
         str(nth), str(delay), mode],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    out, _ = finish(proc, 120, f"{hook} on rank {victim} ({mode}): mpiexec after the kill")
    return proc.returncode, out


def kill_at(points, mode, last_mode):
    """Save step 0, then steps 1.. each killed at one of ``points``; then one more, clean,
    in ``last_mode``, which must commit and clear every leftover."""
    from mtensor import checkpoint as ck
    root = tempfile.mkdtemp(prefix="mtensor-ckpt-faults-")
    path = os.path.join(root, "ck")
    try:
        code, out = run_once(path, 0, 0, "none", 0, 0.0, mode)      # a clean first checkpoint
        assert code == 0 and "saved 0" in out, out[-5000:]
        committed = 0
        for step, (victim, hook, nth, *rest) in enumerate(points, start=1):
            delay = rest[0] if rest else 0.0
            code, out = run_once(path, step, victim, hook, nth, delay, mode)
            got = ck.load(path)
            assert got["step"] in (committed, step), (hook, victim, got["step"], out[-3000:])
            s = got["step"]
            assert np.array_equal(got["w"], np.full((6, 4), float(s))), (hook, victim)
            assert np.array_equal(got["b"], np.arange(5.0) + s), (hook, victim)
            if code == 0:
                assert s == step, (hook, victim)
            assert code != 0 or hook == "timer", f"{hook} on rank {victim} never ran"
            committed = s
        last = len(points) + 1
        code, out = run_once(path, last, 0, "none", 0, 0.0, last_mode)   # clears the leftovers
        assert code == 0, out[-5000:]
        assert ck.load(path)["step"] == last, out[-5000:]
        assert os.listdir(root) == ["ck"], os.listdir(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_sigkill_during_save_keeps_a_whole_checkpoint():
    runs = int(os.environ.get("MTENSOR_FAULT_RUNS", "20"))
    rng = random.Random(0)
    points = POINTS + [(rng.randrange(2), "timer", 0, rng.uniform(0.0, 0.4))
                       for _ in range(max(0, runs - len(POINTS)))]
    kill_at(points[:runs], "blocking", "blocking")


def test_sigkill_during_background_save_keeps_a_whole_checkpoint():
    runs = int(os.environ.get("MTENSOR_FAULT_RUNS", "20"))
    kill_at(BACKGROUND_POINTS[:runs], "background", "nowait")
