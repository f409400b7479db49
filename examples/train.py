"""Train an MLP of Megatron blocks with data x tensor parallelism on a 2-D mesh.

    mpirun -n 8 python examples/train.py                     # mesh 2x4 (dp x tp)
    mpirun -n 4 python examples/train.py --mesh 4x1 --steps 100 --compile
    mpirun -n 4 python examples/train.py --mesh 4            # one number N means Nx1: 4x1
    mpirun -n 4 python examples/train.py --save-every 100 --save-dir runs/a
    mpirun -n 2 python examples/train.py --mesh 1x2 --resume runs/a/step-00200
    mpirun -n 4 python examples/train.py --accumulate 4 --clip 1.0 --optimizer adamw \
        --schedule warmup_cosine

The data: a noisy 4-arm spiral (4096 points, 4 classes; seed 0, generated here, nothing
downloaded), each point lifted to 64 features by a fixed random Fourier map; the first 3072
points train, the last 1024 measure accuracy.  The model:
``--blocks`` residual Megatron blocks ``h + tanh(h @ A) @ B`` (A column-parallel, B
row-parallel on "tp": one all-reduce per block) and a linear head, trained with Adam (or
``--optimizer``) on the softmax cross-entropy; the batch is split over "dp".  The training
loop's flags (``--optimizer``, ``--schedule``, ``--clip``, ``--accumulate K``) are
``training.py``'s, shared with ``train_lm.py``.  ``--mesh DPxTP`` sets the mesh, with
dp * tp the number of ranks (a single number N means N x 1: data parallelism only); the
default is 1x1, 1x2, 2x2, 2x4 for 1, 2, 4, 8 ranks.  Gradients come from
``mt.value_and_grad``; ``--compile`` runs the step through ``mt.compile`` (bucketed,
overlapped collectives).  Every mesh shape, eager or compiled, follows the same loss curve up
to float rounding: the last line's checksum (the sum of every step's loss, printed to the 12
significant digits every mesh agrees on) shows it.

On several nodes (``mpirun -n 16 -ppn 8``) the mesh lays "tp", the innermost dim, inside
each node, so the per-block all-reduces stay off the slow link (``init_device_mesh``'s
default ``layout="node"``; it warns if tp cannot fit), and rank 0 prints the layout:
``DeviceMesh(..., 2 nodes, tp inside a node, dp across nodes)``.

Checkpoints: ``--save-every K --save-dir DIR`` saves, after every K-th step, everything a
run needs to go on exactly to ``DIR/step-{step:05d}`` with ``mt.save(..., keep=2,
blocking=False)`` (the two newest stay; the blocks are copied aside and written while the
next steps train, the next save or the end of the run waits for the commit): the parameters,
the optimizer's state (its step count and its moments: DTensors laid out like their
parameters), the step, the data position (the next batch's index; the batch order is fixed,
so this restores it) and the losses so far. ``--resume DIR/step-NNNNN`` loads such a
checkpoint onto the current mesh (any mesh: 2x2 saved, 4x1, 1x2 or 1x1 resumed) and trains
from the saved step up to ``--steps``; ``--batch``, ``--blocks``, ``--hidden``, ``--lr`` and
the training loop's flags must be the saved run's. The losses then follow an uninterrupted
run's up to float rounding, and the summary and the checksum cover every step, those before
the checkpoint too. ``--print-losses`` prints ``loss <step> <value>`` (steps from 1, 17
significant digits) on rank 0 for every step this process ran, before the summary.
"""
import argparse
import functools
import re
import time

import numpy as np
from mpi4py import MPI
from tqdm import tqdm
from training import add_training_flags, check_training_flags, microbatches, optimizer, train_step

import mtensor as mt
from mtensor import Replicate, Shard

CLASSES, FEATURES, POINTS, TRAIN = 4, 64, 4096, 3072


def spiral(seed=0):
    """(features, one-hot labels, labels) of a noisy 4-arm spiral, the same on every rank."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, POINTS)
    radius = rng.uniform(0.05, 1.0, POINTS)
    angle = 4.0 * radius + labels * (2 * np.pi / CLASSES) + rng.normal(0, 0.35, POINTS)
    xy = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    projection = rng.normal(0, 2.0, (2, FEATURES // 2))
    features = np.concatenate([np.sin(xy @ projection), np.cos(xy @ projection)], axis=1)
    return features, np.eye(CLASSES)[labels], labels


def default_mesh(n):
    if n <= 2:
        return 1, n
    return (2, n // 2) if n % 2 == 0 else (n, 1)


def add_mesh_flag(parser):
    parser.add_argument("--mesh", metavar="DPxTP",
                        help="mesh dp x tp, e.g. 2x4; one number N means Nx1 "
                             "(default: 1x1, 1x2, 2x2, 2x4 for 1, 2, 4, 8 ranks)")


def mesh_shape(text, ranks):
    """(dp, tp) from ``--mesh``: "DPxTP", or one number N for N x 1 (None: the default)."""
    if text is None:
        return default_mesh(ranks)
    match = re.fullmatch(r"(\d+)(?:x(\d+))?", text)
    if match is None:
        raise ValueError(f"--mesh {text}: expected DPxTP (dp x tp ranks) or N (N x 1)")
    dp, tp = int(match[1]), int(match[2] or 1)
    if dp * tp != ranks:
        raise ValueError(f"--mesh {text} holds {dp * tp} ranks but {ranks} are running")
    return dp, tp


def init_params(mesh, blocks, hidden, seed=1):
    rng = np.random.default_rng(seed)
    col, row, rep = [Replicate(), Shard(1)], [Replicate(), Shard(0)], [Replicate()] * 2
    params = {"head": mt.distribute_tensor(rng.normal(0, FEATURES ** -0.5, (FEATURES, CLASSES)),
                                           mesh, rep)}
    for i in range(blocks):
        params[f"a{i}"] = mt.distribute_tensor(
            rng.normal(0, FEATURES ** -0.5, (FEATURES, hidden)), mesh, col)
        params[f"b{i}"] = mt.distribute_tensor(
            rng.normal(0, hidden ** -0.5 / blocks, (hidden, FEATURES)), mesh, row)
    return params


def block(h, a, b):
    return h + np.tanh(h @ a) @ b


def logits(params, x, remat=False):
    """``remat``: each block through ``mt.remat`` (its activations recomputed in the
    backward instead of kept)."""
    h, run = x, mt.remat(block) if remat else block
    for i in range(sum(k.startswith("a") for k in params)):
        h = run(h, params[f"a{i}"], params[f"b{i}"])
    return h @ params["head"]


def cross_entropy(params, x, y, remat=False):
    z = logits(params, x, remat)
    top = z.max(axis=1)
    log_sum = np.log(np.exp(z - top[:, None]).sum(axis=1)) + top
    return (log_sum - (z * y).sum(axis=1)).mean()


def run_config(args):
    """The flags a resumed run must share with the saved one to continue it exactly."""
    return {"batch": args.batch, "blocks": args.blocks, "hidden": args.hidden,
            "lr": float(args.lr), "optimizer": args.optimizer, "schedule": args.schedule,
            "accumulate": args.accumulate, "clip": args.clip}


def checkpoint_state(params, state, step, next_batch, losses, args):
    return {"params": params, "optimizer": state, "step": step,
            "data": {"next_batch": next_batch}, "losses": np.array(losses, dtype=np.float64),
            "config": run_config(args)}


def resume(path, mesh, args, world, init):
    """(params, optimizer state, step, next batch index, losses so far) loaded from ``path``
    onto ``mesh`` through templates built on it (``init``: the optimizer's state maker)."""
    head = mt.load(path, like={"step": 0, "config": run_config(args)})    # scalars only
    differ = {k: (v, head["config"][k]) for k, v in run_config(args).items()
              if head["config"][k] != v}
    if differ:
        text = ", ".join(f"--{k} {mine} (saved: {saved})" for k, (mine, saved) in differ.items())
        raise SystemExit(f"train.py: --resume {path}: {text}; pass the saved run's values"
                         if world.rank == 0 else 1)
    params = init_params(mesh, args.blocks, args.hidden)     # the template: layout and shapes
    template = checkpoint_state(params, init(params), 0, 0, np.zeros(head["step"]), args)
    saved = mt.load(path, like=template)
    return (saved["params"], saved["optimizer"], saved["step"],
            saved["data"]["next_batch"], [float(x) for x in saved["losses"]])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_mesh_flag(parser)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=256, help="global batch")
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--compile", action="store_true", help="run the step through mt.compile")
    parser.add_argument("--save-every", type=int, metavar="K",
                        help="save a checkpoint after every K-th step (the two newest stay)")
    parser.add_argument("--save-dir", default="checkpoints", metavar="DIR",
                        help="where --save-every writes DIR/step-NNNNN (default: checkpoints)")
    parser.add_argument("--resume", metavar="PATH",
                        help="continue the run saved at PATH (a DIR/step-NNNNN) on this mesh")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the blocks live: cuda puts them on GPU local_rank %% count "
                             "(CuPy; collectives through MTENSOR_GPU_COMM, default auto)")
    parser.add_argument("--print-losses", action="store_true",
                        help="print 'loss <step> <value>' for every step run (rank 0)")
    parser.add_argument("--remat", action="store_true",
                        help="recompute each block's activations in the backward (mt.remat)")
    add_training_flags(parser)
    args = parser.parse_args()
    check_training_flags(parser, args)
    if args.save_every is not None and args.save_every < 1:
        parser.error(f"--save-every {args.save_every}: pass a number of steps >= 1")
    world = MPI.COMM_WORLD
    try:
        shape = mesh_shape(args.mesh, world.size)
    except ValueError as err:  # said once, by rank 0; every rank exits with status 1
        example = "x".join(map(str, default_mesh(world.size)))
        raise SystemExit(f"train.py: {err}; e.g. --mesh {example} or --mesh {world.size}"
                         if world.rank == 0 else 1)
    mesh = mt.init_device_mesh(shape, mesh_dim_names=("dp", "tp"), device_type=args.device)
    batch_split = [Shard(0), Replicate()]

    features, onehot, labels = spiral()
    def pieces(values):      # a step's batch as --accumulate microbatches, split over dp
        return [mt.distribute_tensor(v, mesh, batch_split)
                for v in microbatches(values, args.accumulate)]
    batches = [(pieces(features[i:i + args.batch]), pieces(onehot[i:i + args.batch]))
               for i in range(0, TRAIN - args.batch + 1, args.batch)]
    init, update = optimizer(args)
    if args.resume:
        try:
            params, state, first, next_batch, losses = resume(args.resume, mesh, args, world,
                                                              init)
        except mt.checkpoint.CheckpointError as err:    # raised on every rank; said once
            raise SystemExit(f"train.py: --resume: {err}" if world.rank == 0 else 1)
    else:
        params = init_params(mesh, args.blocks, args.hidden)
        state = init(params)
        first, next_batch, losses = 0, 0, []
    step = train_step(functools.partial(cross_entropy, remat=args.remat), args, update)
    step = mt.compile(step) if args.compile else step
    bar = tqdm(range(first, args.steps), disable=world.rank != 0, unit="step", mininterval=0.5)
    if args.resume and world.rank == 0:
        bar.write(f"resumed {args.resume} at step {first}")
    start = time.perf_counter()
    saving = None                      # the checkpoint being written while training goes on
    for i in bar:
        x, y = batches[next_batch]
        next_batch = (next_batch + 1) % len(batches)
        losses.append(float(step(params, state, x, y)))
        rate = (i + 1 - first) * args.batch / (time.perf_counter() - start)
        bar.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False, samples_s=f"{rate:.0f}")
        if args.save_every and (i + 1) % args.save_every == 0:
            where = f"{args.save_dir}/step-{i + 1:05d}"
            if saving is not None:      # the previous one committed (or raises here)
                saving.wait()
            saving = mt.save(where, checkpoint_state(params, state, i + 1, next_batch, losses,
                                                     args), keep=2, blocking=False)
            if world.rank == 0:
                bar.write(f"saving {where} in the background")
    if saving is not None:
        saving.wait()
    held_out = mt.distribute_tensor(features[TRAIN:], mesh, batch_split)
    predicted = mt.asnumpy(np.argmax(logits(params, held_out), axis=1))
    accuracy = float(np.mean(predicted == labels[TRAIN:]))
    if world.rank == 0:
        if args.print_losses:
            for i in range(first, args.steps):
                print(f"loss {i + 1} {losses[i]:.17g}")
        mode = "compiled" if args.compile else "eager"
        print(f"mesh {shape} (dp x tp) on {args.device} ({'/'.join(mesh.backends)}), {mode}, "
              f"{args.steps} steps of batch {args.batch}: "
              f"loss {losses[0]:.4f} -> {losses[-1]:.4f}, held-out accuracy {accuracy:.3f}")
        if len(set(mesh.nodes)) > 1:         # which mesh dims stay inside a node
            print(repr(mesh))
        if args.compile:
            print(step.explain().summary)
        print(f"checksum {sum(losses):.11e}")  # 12 significant digits


if __name__ == "__main__":
    main()
