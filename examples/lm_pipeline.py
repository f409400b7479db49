"""The GPT of ``lm_model.py`` cut into pipeline stages on a (pp, dp, tp) mesh.

The same functions and the same initial values: each block parameter of ``lm_model`` is
stacked over the layers (``params["blocks"]["wq"]`` of shape (layers, d, heads, d_head)),
split over ``pp`` on that axis (stage s holds its ``numpy.array_split`` share of the layers),
with Megatron's splits on ``tp`` and replicated on ``dp`` as in ``lm_model.layouts``.  The
embeddings, the final LayerNorm and the head are replicated over ``pp``: the first stage
uses the embeddings, the last the head (``mt.pipeline`` adds their gradients over ``pp``).
A checkpoint of these parameters records every layer by its global index, so a run saved
with one ``--pp`` resumes with another.

``stage(params, x, where)`` is one stage: the embedding on the first, its layers, nothing
else; ``loss(params, h, y)`` is the final LayerNorm, the head and the cross-entropy on the
last.  ``full_loss`` runs the whole model on the same parameters unpipelined (the held-out
loss and the sample of ``train_lm.py``, after ``gathered``).
"""
import lm_model as lm
import numpy as np

import mtensor as mt
from mtensor import Replicate, Shard
from mtensor.debug import region

DATA = [Replicate(), Shard(0), Shard(2)]   # (batch, seq, byte): pp whole, batch on dp, bytes on tp
OUTER = ("wte", "wpe", "lnf_g", "lnf_b", "head")


def layouts():
    """Placements on the (pp, dp, tp) mesh: the blocks' stacks split over pp on axis 0 with
    ``lm_model``'s tp split one axis further; the rest replicated over pp."""
    place = lm.layouts(1)
    blocks = {}
    for k in lm.BLOCK:
        _, tp = place[f"{k}0"]
        blocks[k] = [Shard(0), Replicate(), Shard(tp.dim + 1) if isinstance(tp, Shard) else tp]
    return {"blocks": blocks, **{k: [Replicate(), *place[k]] for k in OUTER}}


def init_params(mesh, layers, d_model, heads, seq, seed=0):
    """``lm_model.init_params``'s values, the blocks stacked, distributed on ``mesh`` (or
    numpy arrays if it is None)."""
    flat = lm.init_params(None, layers, d_model, heads, seq, seed)
    params = {"blocks": {k: np.stack([flat[f"{k}{i}"] for i in range(layers)])
                         for k in lm.BLOCK}, **{k: flat[k] for k in OUTER}}
    if mesh is None:
        return params
    place = layouts()
    put = lambda a, p: mt.distribute_tensor(a, mesh, p, src_data_rank=None)   # noqa: E731
    return {"blocks": {k: put(v, place["blocks"][k]) for k, v in params["blocks"].items()},
            **{k: put(params[k], place[k]) for k in OUTER}}


def layer(blocks, j):
    """Layer ``j``'s parameters by ``lm_model.BLOCK`` name, from stacks (a DTensor or the
    list a pipeline stage sees)."""
    return {k: blocks[k][j] for k in lm.BLOCK}


def stage(params, x, where, remat=False):
    """Pipeline stage ``where.index``: the embeddings on the first, then its layers."""
    h = lm.embed(params, x) if where.first else x
    run = mt.remat(lm.block) if remat else lm.block
    for j, i in enumerate(where.layers):
        h = run(h, layer(params["blocks"], j), i)
    return h


def loss(params, h, y):
    """The last stage's end: final LayerNorm, head, mean cross-entropy."""
    with region("head"):
        z = lm.layer_norm(h, params["lnf_g"], params["lnf_b"]) @ params["head"]
    return lm.cross_entropy(z, y)


def full_loss(params, x, y):
    """The whole model unpipelined, on parameters whose stacks every rank holds whole."""
    h = lm.embed(params, x)
    for i in range(params["blocks"]["wq"].shape[0]):
        h = lm.block(h, layer(params["blocks"], i), i)
    return loss(params, h, y)


def gathered(params):
    """The parameters with every stack gathered over pp (one all-gather per leaf): what
    ``full_loss`` reads, for evaluation."""
    def whole(x):
        return x.redistribute(x.device_mesh, [Replicate(), *x.placements[1:]])
    return {"blocks": {k: whole(v) for k, v in params["blocks"].items()},
            **{k: params[k] for k in OUTER}}
