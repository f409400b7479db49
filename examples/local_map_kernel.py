"""A per-block kernel inside a distributed training step: ``mt.local_map``.

A softmax classifier on a batch split over the ranks (rows split unevenly where the batch
does not divide).  The loss is a fused log-softmax cross-entropy written as plain numpy on
each rank's rows, the kind of kernel a user writes once and does not want re-expressed as
DTensor ops; ``local_map`` runs it on the blocks, and ``value_and_grad`` differentiates
through it (the tape follows the kernel's numpy code on a one-rank mesh).  The weight is
replicated, so its gradient comes back as partial terms and is all-reduced once, as data
parallelism does by hand.  The losses are compared with the same training in plain numpy.

    mpiexec -n 4 python examples/local_map_kernel.py [--steps 20] [--compile]
"""
import argparse

import numpy as np
from mpi4py import MPI

import mtensor as mt
from mtensor import Replicate, Shard


def xent_rows(logits, onehot):
    """Cross-entropy per row, numerically stable: numpy code on one rank's rows."""
    shift = logits.max(axis=-1, keepdims=True)
    if isinstance(shift, mt.DTensor):
        shift = mt.stop_gradient(shift)     # the shift's true gradient is zero
    z = logits - shift
    return -((z - np.log(np.exp(z).sum(axis=-1, keepdims=True))) * onehot).sum(axis=-1)


def numpy_training(x, onehot, w, steps, lr):
    """The same training, single process, gradient by hand."""
    losses = []
    for _ in range(steps):
        z = x @ w
        p = np.exp(z - z.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        losses.append(xent_rows(z, onehot).mean())
        w = w - lr * x.T @ (p - onehot) / len(x)
    return losses


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=203)
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.batch, 16))
    onehot = np.eye(5)[rng.integers(0, 5, args.batch)]
    w0 = rng.standard_normal((16, 5)) * 0.1

    mesh = mt.init_device_mesh((MPI.COMM_WORLD.size,))
    rows = [Shard(0)]
    X, Y = mt.distribute_tensor(x, mesh, rows), mt.distribute_tensor(onehot, mesh, rows)
    W = mt.distribute_tensor(w0, mesh, [Replicate()])
    xent = mt.local_map(xent_rows, out_placements=rows, in_placements=(rows, rows))
    step = mt.value_and_grad(lambda W, X, Y: xent(X @ W, Y).mean())
    step = mt.compile(step) if args.compile else step

    losses = []
    with mt.CommDebugMode() as comm:
        for _ in range(args.steps):
            loss, grad = step(W, X, Y)
            W -= 0.5 * grad
            losses.append(float(loss))
    want = numpy_training(x, onehot, w0, args.steps, 0.5)
    if MPI.COMM_WORLD.rank == 0:
        print(f"loss: {losses[0]:.6f} -> {losses[-1]:.6f} over {args.steps} steps")
        print(f"collectives per step: {comm.get_total_counts() // args.steps} "
              f"({comm.get_comm_counts()})")
        print(f"matches numpy: {bool(np.allclose(losses, want, rtol=1e-10))}")


if __name__ == "__main__":
    main()
