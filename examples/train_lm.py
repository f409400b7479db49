"""Train a byte-level GPT on Python's own standard library, data x tensor parallel.

    mpirun -n 8 python examples/train_lm.py                  # mesh 2x4 (dp x tp)
    mpirun -n 4 python examples/train_lm.py --mesh 2x2 --compile --explain
    mpirun -n 4 python examples/train_lm.py --accumulate 4 --optimizer adamw --clip 1.0 \
        --schedule warmup_cosine
    mpirun -n 8 python examples/train_lm.py --pp 2 --mesh 2x2 --microbatches 4   # pp x dp x tp
    python examples/train_lm.py --steps 50 --layers 1         # one process

The corpus exists offline on every machine: eight modules of the running Python's standard
library, read from ``sysconfig.get_paths()["stdlib"]``.  Seven train (``TRAIN_FILES``:
argparse, difflib, functools, heapq, inspect, statistics, textwrap; 436,075 bytes on
CPython 3.11.7), and one the model never sees in training holds out (``fractions.py``,
28,667 bytes there).  Bytes are tokens (vocabulary 256).  Step k's batch is ``--batch``
windows of ``--seq`` + 1 bytes at offsets drawn from ``numpy.random.default_rng([0, k])``,
the same on every mesh.

The model (``lm_model.py``): token and position embeddings, ``--layers`` pre-LayerNorm
blocks of causal multi-head attention and a GELU MLP, a final LayerNorm and the LM head,
trained with Adam (or ``--optimizer``; the training loop's flags ``--schedule``, ``--clip``,
``--accumulate K`` are ``training.py``'s) on the mean cross-entropy.  Only the parameters carry layouts, Megatron's
on "tp" (attention split by heads, MLP column/row, embedding and head split over the
vocabulary), and the batch is split over "dp"; mtensor places every collective.  ``--explain``
prints one step's bill per block: one all-reduce on tp in each attention and each MLP,
forward and backward, the loss's two all-reduces of one value per token, and one dp
all-reduce per gradient.

``--pp P`` splits the layers into P pipeline stages (``lm_pipeline.py``: the same model and
initial values, each block parameter stacked over the layers and split over ``pp``) on the
mesh (pp, dp, tp), ``--mesh DPxTP`` giving the rest of the ranks; each step runs
``--microbatches M`` micro-batches (default P) through the stages on ``--pp-schedule``
(``1f1b``, default, or ``gpipe``) with ``mt.pipeline.value_and_grad``; the losses follow the
unpipelined run's.  ``--explain`` then prints the pipeline's stage timelines after the run.
With ``--pp``, ``--save-every K --save-dir DIR`` saves the parameters, the optimizer state,
the step and the losses to ``DIR/step-NNNNN``, and ``--resume DIR/step-NNNNN`` continues
such a run on any ``--pp`` and ``--mesh`` (the stacks record layers by global index).

Output: rank 0 draws a progress bar with the loss and tokens/s; the end prints the held-out
loss in bits per byte (the first 64 windows of ``fractions.py``), the checksum (the sum of
every step's loss, 12 significant digits, the same on every mesh) and a short sample of
generated text.  ``--print-losses`` prints ``loss <step> <value>`` for every step.
"""
import argparse
import functools
import math
import os
import sys
import sysconfig
import time

import lm_model as lm
import lm_train_pipeline as pipeline
import numpy as np
from mpi4py import MPI
from tqdm import tqdm
from train import add_mesh_flag, default_mesh, mesh_shape
from training import add_training_flags, check_training_flags, microbatches, optimizer, train_step

import mtensor as mt
from mtensor import Replicate, Shard

TRAIN_FILES = ("argparse.py", "difflib.py", "functools.py", "heapq.py", "inspect.py",
               "statistics.py", "textwrap.py")
HELD_OUT_FILE = "fractions.py"
HELD_OUT_WINDOWS = 64


def read_corpus():
    """(training bytes, held-out bytes) as uint8 arrays, from the standard library."""
    root = sysconfig.get_paths()["stdlib"]

    def read(name):
        with open(os.path.join(root, name), "rb") as f:
            return f.read()
    train = b"".join(read(name) for name in TRAIN_FILES)
    return np.frombuffer(train, np.uint8), np.frombuffer(read(HELD_OUT_FILE), np.uint8)


def windows(data, starts, seq):
    return np.stack([data[s:s + seq + 1] for s in starts])


def batch_ids(data, step, batch, seq):
    """Step ``step``'s (batch, seq + 1) windows of the training bytes."""
    rng = np.random.default_rng([0, step])
    return windows(data, rng.integers(0, len(data) - seq - 1, batch), seq)


def one_hot(ids, mesh):
    """(inputs, next bytes) one-hot as DTensors split as ``lm_model.DATA``."""
    return lm.distribute(lm.one_hot(ids), mesh)


def held_out_bits(params, data, mesh, seq, batch):
    """Mean cross-entropy in bits per byte over the first windows of the held-out file."""
    starts = np.arange(min(HELD_OUT_WINDOWS, (len(data) - 1) // seq)) * seq
    total = 0.0
    for i in range(0, len(starts), batch):
        chunk = starts[i:i + batch]
        total += float(lm.loss(params, *one_hot(windows(data, chunk, seq), mesh))) * len(chunk)
    return total / len(starts) / math.log(2)


def sample(params, mesh, prompt, chars, seq, seed=0):
    """``prompt`` continued by ``chars`` bytes drawn at temperature 0.8 (the same draws on
    every rank, from ``seed``)."""
    rng, out = np.random.default_rng(seed), list(prompt.encode())
    for _ in range(chars):
        context = np.array([out[-seq:]])
        (x,) = lm.distribute([lm.encode(context)], mesh, [Replicate(), Shard(2)])
        z = lm.logits(params, x)[0, -1].full_tensor() / 0.8
        p = np.exp(z - z.max())
        out.append(int(rng.choice(lm.VOCAB, p=p / p.sum())))
    return bytes(out).decode("utf-8", errors="replace")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_mesh_flag(parser)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16, help="global batch (windows)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--compile", action="store_true", help="run the step through mt.compile")
    parser.add_argument("--explain", action="store_true",
                        help="print one step's collectives per block before training")
    parser.add_argument("--sample", type=int, default=80, metavar="N",
                        help="bytes of text to generate at the end (0: none)")
    parser.add_argument("--print-losses", action="store_true",
                        help="print 'loss <step> <value>' for every step (rank 0)")
    parser.add_argument("--remat", action="store_true",
                        help="recompute each block's activations in the backward (mt.remat)")
    add_training_flags(parser)
    pipeline.add_pipeline_flags(parser)
    args = parser.parse_args()
    if args.steps < 1:
        parser.error(f"--steps {args.steps}: train at least one step")
    check_training_flags(parser, args)
    pipeline.check_pipeline_flags(parser, args, MPI.COMM_WORLD.size)
    return args


def step_batch(data, step, args, mesh):
    """Step ``step``'s batch as ``--accumulate`` microbatches: (inputs, targets) lists."""
    pairs = [one_hot(ids, mesh) for ids in
             microbatches(batch_ids(data, step, args.batch, args.seq), args.accumulate)]
    return [x for x, _ in pairs], [y for _, y in pairs]


def main():
    args = parse_args()
    world = MPI.COMM_WORLD
    if args.pp is not None:
        return pipeline.main(args, world, read_corpus(), sys.modules[__name__])
    example = "x".join(map(str, default_mesh(world.size)))
    try:
        shape = mesh_shape(args.mesh, world.size)
    except ValueError as err:  # said once, by rank 0; every rank exits with status 1
        raise SystemExit(f"train_lm.py: {err}; e.g. --mesh {example}" if world.rank == 0 else 1)
    try:
        lm.check_sizes(args.d_model, args.heads)
    except ValueError as err:
        raise SystemExit(f"train_lm.py: {err}" if world.rank == 0 else 1)
    mesh = mt.init_device_mesh(shape, mesh_dim_names=("dp", "tp"))
    train, held_out = read_corpus()
    params = lm.init_params(mesh, args.layers, args.d_model, args.heads, args.seq)
    init, update = optimizer(args)
    state = init(params)
    loss_and_grads = mt.value_and_grad(lm.loss)
    if args.explain:
        with mt.CommDebugMode() as comm:
            loss_and_grads(params, *one_hot(batch_ids(train, 0, args.batch, args.seq), mesh))
        if world.rank == 0:
            print(f"one step's collectives on mesh {shape} (dp x tp), rank 0:")
            print(comm.bill(mesh.mesh_dim_names))
    step = train_step(functools.partial(lm.loss, remat=args.remat), args, update)
    step = mt.compile(step) if args.compile else step
    losses = []
    bar = tqdm(range(args.steps), disable=world.rank != 0, unit="step", mininterval=0.5)
    start = time.perf_counter()
    for i in bar:
        losses.append(float(step(params, state, *step_batch(train, i, args, mesh))))
        rate = (i + 1) * args.batch * args.seq / (time.perf_counter() - start)
        bar.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False, tokens_s=f"{rate:.0f}")
    bits = held_out_bits(params, held_out, mesh, args.seq, args.batch)
    text = sample(params, mesh, "def ", args.sample, args.seq) if args.sample else ""
    if world.rank == 0:
        if args.print_losses:
            for i, value in enumerate(losses):
                print(f"loss {i + 1} {value:.17g}")
        mode = "compiled" if args.compile else "eager"
        print(f"mesh {shape} (dp x tp), {mode}, {args.steps} steps of {args.batch} x "
              f"{args.seq} bytes: loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
              f"{rate:.0f} tokens/s")
        if args.compile:
            print(step.explain().summary)
        print(f"held-out {HELD_OUT_FILE}: {bits:.3f} bits per byte")
        if text:
            print(f"sample: {text!r}")
        print(f"checksum {sum(losses):.11e}")  # 12 significant digits


if __name__ == "__main__":
    main()
