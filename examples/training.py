"""The training loop's choices, shared by ``train.py`` and ``train_lm.py``: the optimizer,
the learning-rate schedule, gradient clipping and gradient accumulation, as flags.

    --optimizer adam|adamw|sgd|lion   (sgd: momentum 0.9; adamw/lion: --weight-decay)
    --schedule constant|linear|warmup_cosine   (peak --lr; --warmup steps, default 1/10)
    --clip NORM                       clip the gradients to a global norm of NORM
    --accumulate K                    split each step's batch into K microbatches

(``--remat``, each block through ``mt.remat``, is the examples' own: it changes the model.)

``--accumulate K`` runs K forward/backward passes of batch/K examples each per step (the
activations of a batch/K), with ``value_and_grad(reduce=False)``: the gradients' data-
parallel sums stay pending (``Partial``) and add up with no communication, and the optimizer
reduces each gradient once per step, as DDP's ``no_sync`` does.  Each microbatch's loss is
its mean divided by K, so the step's loss, its gradients and the whole run equal the run of
the full batch without accumulation, up to float rounding.
"""
import numpy as np

import mtensor as mt

OPTIMIZERS = ("adam", "adamw", "sgd", "lion")
SCHEDULES = ("constant", "linear", "warmup_cosine")


def add_training_flags(parser):
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="adam")
    parser.add_argument("--weight-decay", type=float, default=0.01,
                        help="adamw's and lion's decoupled weight decay (default 0.01)")
    parser.add_argument("--schedule", choices=SCHEDULES, default="constant",
                        help="the learning rate over the run, peaking at --lr")
    parser.add_argument("--warmup", type=int, metavar="STEPS",
                        help="warmup_cosine's warmup (default: a tenth of --steps)")
    parser.add_argument("--clip", type=float, metavar="NORM",
                        help="clip the gradients to a global 2-norm of NORM")
    parser.add_argument("--accumulate", type=int, default=1, metavar="K",
                        help="K microbatches of batch/K per step, one reduction per gradient")


def check_training_flags(parser, args):
    if args.accumulate < 1 or args.batch % args.accumulate:
        parser.error(f"--accumulate {args.accumulate}: pass K >= 1 that divides --batch "
                     f"{args.batch}")
    if args.clip is not None and not args.clip > 0:
        parser.error(f"--clip {args.clip}: pass a norm > 0")


def schedule(args):
    """``--lr`` as a constant, or a schedule over ``--steps`` peaking at it."""
    if args.schedule == "constant":
        return args.lr
    if args.schedule == "linear":
        return mt.optim.linear(args.lr, 0.0, transition_steps=args.steps)
    warmup = args.steps // 10 if args.warmup is None else args.warmup
    return mt.optim.warmup_cosine(0.0, args.lr, warmup_steps=warmup, decay_steps=args.steps,
                                  end_value=args.lr / 10)


def optimizer(args):
    """(init(params) -> state, update(params, grads, state)) for ``--optimizer``."""
    lr = schedule(args)
    if args.optimizer == "sgd":
        return mt.optim.sgd_init, lambda p, g, s: mt.optim.sgd(p, g, lr, state=s, momentum=0.9)
    if args.optimizer == "lion":
        return mt.optim.lion_init, lambda p, g, s: mt.optim.lion(
            p, g, s, lr, weight_decay=args.weight_decay)
    if args.optimizer == "adamw":
        return mt.optim.adam_init, lambda p, g, s: mt.optim.adamw(
            p, g, s, lr, weight_decay=args.weight_decay)
    return mt.optim.adam_init, lambda p, g, s: mt.optim.adam(p, g, s, lr=lr)


def microbatches(x, k):
    """The numpy batch ``x`` cut into ``k`` equal consecutive microbatches."""
    return np.split(x, k)


def train_step(loss, args, update):
    """``step(params, state, xs, ys) -> loss``: the gradients of ``loss`` over the
    microbatches ``xs``, ``ys`` (lists of K DTensors), clipped with ``--clip``, applied by
    ``update``."""
    k = args.accumulate
    whole = mt.value_and_grad(loss)
    pending = mt.value_and_grad(lambda p, x, y: loss(p, x, y) / k, reduce=False)

    def step(params, state, xs, ys):
        if k == 1:
            value, grads = whole(params, xs[0], ys[0])
        else:
            value, grads = None, None
            for x, y in zip(xs, ys):
                part, g = pending(params, x, y)
                value = part if value is None else value + part
                grads = mt.optim.accumulate(grads, g)
        if args.clip is not None:
            grads, _ = mt.optim.clip_by_global_norm(grads, args.clip)
        update(params, grads, state)
        return value
    return step
