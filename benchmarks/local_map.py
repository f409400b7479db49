"""What the escape hatch costs: a training step whose loss is a numpy kernel on the blocks
(``mt.local_map``, differentiated through the tape), against the same step written by hand
with numpy and mpi4py (forward and backward by hand, one Allreduce of the loss and one of
the weight gradient), and against the loss written as DTensor ops.  Ratios in one run.

    mpiexec -n 2 python benchmarks/local_map.py [--batch 4096] [--d 256] [--classes 64]
"""
import argparse
import time

import numpy as np
from mpi4py import MPI

import mtensor as mt
from mtensor import Replicate, Shard

WORLD = MPI.COMM_WORLD


def xent_rows(logits, onehot):
    shift = logits.max(axis=-1, keepdims=True)
    if isinstance(shift, mt.DTensor):
        shift = mt.stop_gradient(shift)
    z = logits - shift
    return -((z - np.log(np.exp(z).sum(axis=-1, keepdims=True))) * onehot).sum(axis=-1)


def by_hand(x, onehot, w, n_rows):
    """The data-parallel step in numpy + mpi4py on this rank's rows."""
    z = x @ w
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    loss = np.array([xent_rows(z, onehot).sum() / n_rows])
    grad = x.T @ (p - onehot) / n_rows
    WORLD.Allreduce(MPI.IN_PLACE, loss)
    WORLD.Allreduce(MPI.IN_PLACE, grad)
    return loss[0], grad


def median_ms(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        WORLD.Barrier()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--d", type=int, default=256)
    parser.add_argument("--classes", type=int, default=64)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.batch, args.d))
    onehot = np.eye(args.classes)[rng.integers(0, args.classes, args.batch)]
    w = rng.standard_normal((args.d, args.classes)) * 0.1

    mesh = mt.init_device_mesh((WORLD.size,))
    rows = [Shard(0)]
    X, Y = mt.distribute_tensor(x, mesh, rows), mt.distribute_tensor(onehot, mesh, rows)
    W = mt.distribute_tensor(w, mesh, [Replicate()])
    xent = mt.local_map(xent_rows, out_placements=rows, in_placements=(rows, rows))
    mapped = mt.value_and_grad(lambda W, X, Y: xent(X @ W, Y).mean())
    as_ops = mt.value_and_grad(lambda W, X, Y: xent_rows(X @ W, Y).mean())
    compiled = mt.compile(mapped)
    mine_x, mine_y = X.to_local(), Y.to_local()

    def run(step):
        loss, grad = step(W, X, Y)
        return float(loss), mt.asnumpy(grad)

    hand_loss, hand_grad = by_hand(mine_x, mine_y, w, args.batch)
    for name, step in (("local_map", mapped), ("DTensor ops", as_ops), ("compiled", compiled)):
        loss, grad = run(step)
        assert np.isclose(loss, hand_loss) and np.allclose(grad, hand_grad), name
    hand = median_ms(lambda: by_hand(mine_x, mine_y, w, args.batch), args.reps)
    rows_out = [("numpy + mpi4py by hand", hand)]
    for name, step in (("mt.local_map, eager", mapped), ("mt.local_map, compiled", compiled),
                       ("the loss as DTensor ops", as_ops)):
        rows_out.append((name, median_ms(lambda: run(step), args.reps)))
    if WORLD.rank == 0:
        print(f"{WORLD.size} ranks, batch {args.batch}, d {args.d}, classes {args.classes}, "
              f"float64, median of {args.reps}")
        print("| step | ms | / by hand |\n|---|---|---|")
        for name, ms in rows_out:
            print(f"| {name} | {ms:.2f} | {ms / hand:.2f} |")


if __name__ == "__main__":
    main()
