"""``mt.pipeline``: pipeline parallelism, the layer stack split into stages along a mesh dim.

- ``schedules``: GPipe, 1F1B and interleaved 1F1B as data (per rank, the forward and
  backward actions it runs in order), checked and simulated by pure code: deadlock-free by
  construction, with the bubble each predicts;
- ``stages``: the parameters (one tree on the whole mesh, layers stacked along an axis split
  over the pipeline dim) as each stage sees them, and their gradients back;
- ``p2p``: activations and their gradients between stages, ``Isend``/``Irecv`` of blocks;
- ``run``: one step's actions on this rank; ``api``: ``value_and_grad``;
- ``timeline``: each stage's measured timeline and bubble against the schedule's.
"""
from .api import Pipeline, value_and_grad
from .schedules import Action, Schedule, gpipe, interleaved_1f1b, one_f_one_b
from .simulation import DeadlockError, predicted_bubble, simulate
from .stages import Stage
from .timeline import StageTimeline, Timelines, timelines

__all__ = ["Action", "DeadlockError", "Pipeline", "Schedule", "Stage", "StageTimeline",
           "Timelines", "gpipe", "interleaved_1f1b", "one_f_one_b", "predicted_bubble",
           "simulate", "timelines", "value_and_grad"]
