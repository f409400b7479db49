"""``mt.optim``: what a training loop calls between the backward and the next step.

Pure functions on pytrees of DTensors, with optax's names and argument order where they
fit: the updates ``sgd`` (momentum, Nesterov), ``adam``, ``adamw`` and ``lion``, whose state
(``sgd_init``, ``adam_init``, ``lion_init``) is laid out like the parameters and saved with
``mt.save``; ``clip_by_global_norm`` and ``global_norm``; the schedules ``constant``,
``linear`` and ``warmup_cosine`` (plain functions of the step, passed as ``lr``); and
``accumulate`` / ``reduce_grads`` for gradients taken with ``value_and_grad(reduce=False)``.

- ``grads``: accumulation and the one reduction per step;
- ``clip``: the global norm, one scalar all-reduce per group of mesh dims;
- ``updates``: the optimizers, in place on the local blocks;
- ``schedules``: learning rates as functions of the step.
"""
from .clip import clip_by_global_norm, global_norm
from .grads import accumulate, reduce_grads
from .schedules import constant, linear, warmup_cosine
from .updates import adam, adam_init, adamw, lion, lion_init, sgd, sgd_init

__all__ = ["accumulate", "adam", "adam_init", "adamw", "clip_by_global_norm", "constant",
           "global_norm", "linear", "lion", "lion_init", "reduce_grads", "sgd", "sgd_init",
           "warmup_cosine"]
