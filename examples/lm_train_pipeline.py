"""``train_lm.py --pp P``: the GPT trained with its layers split into P pipeline stages.

The mesh is (pp, dp, tp) with ``--mesh DPxTP`` for the last two; the parameters are
``lm_pipeline``'s (stacks of layers split over pp); each step cuts the batch into
``--microbatches M`` micro-batches, runs them through ``mt.pipeline.value_and_grad`` on
``--pp-schedule`` and applies the optimizer of ``training.py``'s flags (``--clip`` clips
the gradients of every stage to one global norm: ``mt.optim`` sums the squares over the whole
mesh).  The held-out loss and the sample run the unpipelined model on the parameters with
their stacks gathered.  ``--save-every``/``--resume`` save and continue on any pp and mesh.
"""
import time

import lm_model as lm
import lm_pipeline as lp
import numpy as np
from tqdm import tqdm
from train import mesh_shape
from training import microbatches, optimizer

import mtensor as mt
from mtensor import Replicate, Shard

PP_SCHEDULES = ("1f1b", "gpipe")


def add_pipeline_flags(parser):
    parser.add_argument("--pp", type=int, metavar="P",
                        help="split the layers into P pipeline stages (mesh pp x dp x tp)")
    parser.add_argument("--microbatches", type=int, metavar="M",
                        help="with --pp: micro-batches per step (default: P)")
    parser.add_argument("--pp-schedule", choices=PP_SCHEDULES, default="1f1b",
                        help="with --pp: the pipeline schedule (default 1f1b)")
    parser.add_argument("--save-every", type=int, metavar="K",
                        help="with --pp: save a checkpoint after every K-th step")
    parser.add_argument("--save-dir", default="checkpoints", metavar="DIR",
                        help="where --save-every writes DIR/step-NNNNN")
    parser.add_argument("--resume", metavar="PATH",
                        help="with --pp: continue the run saved at PATH on this pp and mesh")


def check_pipeline_flags(parser, args, ranks):
    if args.pp is None:
        given = [f for f, v in (("--microbatches", args.microbatches), ("--save-every",
                 args.save_every), ("--resume", args.resume)) if v is not None]
        if given:
            parser.error(f"{' '.join(given)}: pass --pp P as well (1 for one stage)")
        return
    if args.pp < 1 or ranks % args.pp:
        parser.error(f"--pp {args.pp}: pass a number of stages >= 1 that divides the "
                     f"{ranks} ranks")
    args.microbatches = args.microbatches or args.pp
    if args.microbatches < 1 or args.batch % args.microbatches:
        parser.error(f"--microbatches {args.microbatches}: pass M >= 1 that divides --batch "
                     f"{args.batch}")
    if args.accumulate != 1:
        parser.error("--accumulate: with --pp the step accumulates over --microbatches")
    if args.save_every is not None and args.save_every < 1:
        parser.error(f"--save-every {args.save_every}: pass a number of steps >= 1")


def run_config(args):
    """What a resumed run must share with the saved one to continue it exactly."""
    return {"layers": args.layers, "d_model": args.d_model, "heads": args.heads,
            "seq": args.seq, "batch": args.batch, "lr": float(args.lr),
            "optimizer": args.optimizer, "schedule": args.schedule, "clip": args.clip}


def make_step(args, mesh, update):
    """``step(params, state, xs, ys) -> loss``: the pipelined gradients, clipped, applied."""
    stage = (lambda p, x, where: lp.stage(p, x, where, remat=True)) if args.remat else lp.stage
    pipe = mt.pipeline.value_and_grad(stage, lp.loss, mesh, schedule=args.pp_schedule)

    def step(params, state, xs, ys):
        value, grads = pipe(params, xs, ys)
        if args.clip is not None:
            grads, _ = mt.optim.clip_by_global_norm(grads, args.clip)
        update(params, grads, state)
        return value
    return pipe, step


def resume(path, mesh, args, init):
    """(params, optimizer state, first step, losses so far) from ``path`` onto ``mesh``."""
    head = mt.load(path, like={"step": 0, "config": run_config(args)})
    differ = {k: (v, head["config"][k]) for k, v in run_config(args).items()
              if head["config"][k] != v}
    if differ:
        text = ", ".join(f"--{k.replace('_', '-')} {mine} (saved: {saved})"
                         for k, (mine, saved) in differ.items())
        raise ValueError(f"--resume {path}: {text}; pass the saved run's values")
    params = lp.init_params(mesh, args.layers, args.d_model, args.heads, args.seq)
    template = {"params": params, "optimizer": init(params), "step": 0,
                "losses": np.zeros(head["step"]), "config": run_config(args)}
    saved = mt.load(path, like=template)
    return saved["params"], saved["optimizer"], saved["step"], [float(x) for x in saved["losses"]]


def main(args, world, corpus, tl):
    """The run; ``tl``: the train_lm module (its corpus windows and held-out constants)."""
    try:
        dp, tp = mesh_shape(args.mesh, world.size // args.pp)
        lm.check_sizes(args.d_model, args.heads)
    except ValueError as err:
        raise SystemExit(f"train_lm.py: {err}" if world.rank == 0 else 1)
    mesh = mt.init_device_mesh((args.pp, dp, tp), mesh_dim_names=("pp", "dp", "tp"))
    train, held_out = corpus
    init, update = optimizer(args)
    if args.resume:
        try:
            params, state, first, losses = resume(args.resume, mesh, args, init)
        except (ValueError, mt.checkpoint.CheckpointError) as err:
            raise SystemExit(f"train_lm.py: {err}" if world.rank == 0 else 1)
    else:
        params = lp.init_params(mesh, args.layers, args.d_model, args.heads, args.seq)
        state, first, losses = init(params), 0, []
    pipe, step = make_step(args, mesh, update)
    step = mt.compile(step) if args.compile else step
    put = lambda a: mt.distribute_tensor(a, mesh, lp.DATA, src_data_rank=None)  # noqa: E731
    bar = tqdm(range(first, args.steps), disable=world.rank != 0, unit="step", mininterval=0.5)
    start = time.perf_counter()
    for i in bar:
        pairs = [lm.one_hot(ids) for ids in microbatches(
            tl.batch_ids(train, i, args.batch, args.seq), args.microbatches)]
        xs, ys = [put(x) for x, _ in pairs], [put(y) for _, y in pairs]
        losses.append(float(step(params, state, xs, ys)))
        rate = (i + 1 - first) * args.batch * args.seq / (time.perf_counter() - start)
        bar.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False, tokens_s=f"{rate:.0f}")
        if args.save_every and (i + 1) % args.save_every == 0:
            mt.save(f"{args.save_dir}/step-{i + 1:05d}",
                    {"params": params, "optimizer": state, "step": i + 1,
                     "losses": np.array(losses), "config": run_config(args)}, keep=2)
    report = mt.pipeline.timelines(step if args.compile else pipe) if args.explain else None
    whole = lp.gathered(params)
    bits = held_out_bits(whole, held_out, mesh, args, tl)
    if world.rank == 0:
        if args.print_losses:
            for k in range(first, args.steps):
                print(f"loss {k + 1} {losses[k]:.17g}")
        mode = "compiled" if args.compile else "eager"
        print(f"mesh {(args.pp, dp, tp)} (pp x dp x tp), {args.pp_schedule} with "
              f"{args.microbatches} micro-batches, {mode}, {args.steps} steps of {args.batch} "
              f"x {args.seq} bytes: loss {losses[0]:.4f} -> {losses[-1]:.4f}")
        if report is not None:
            print(report)
        print(f"held-out {tl.HELD_OUT_FILE}: {bits:.3f} bits per byte")
        print(f"checksum {sum(losses):.11e}")  # 12 significant digits


def held_out_bits(params, data, mesh, args, tl):
    """``train_lm.held_out_bits`` of the unpipelined model on the gathered parameters."""
    seq, starts = args.seq, np.arange(min(tl.HELD_OUT_WINDOWS, (len(data) - 1) // args.seq))
    starts = starts * seq
    total = 0.0
    for i in range(0, len(starts), args.batch):
        chunk = starts[i:i + args.batch]
        x, y = (mt.distribute_tensor(a, mesh, [Replicate(), Shard(0), Shard(2)],
                                     src_data_rank=None)
                for a in lm.one_hot(tl.windows(data, chunk, seq)))
        total += float(lp.full_loss(params, x, y)) * len(chunk)
    return total / len(starts) / np.log(2)
