"""The byte-level GPT of ``train_lm.py``, written as single-device numpy on DTensors.

Nothing here names a collective: the parameters carry Megatron's layouts
(:func:`init_params`), the inputs are split over ``dp``, and mtensor's sharding rules place
every all-reduce.  The same functions run on plain numpy arrays (``init_params(None, ...)``),
which is how the tests get a one-process reference.

The token lookup is a product with the one-hot bytes: on a mesh, each rank holds the
one-hot columns and the embedding rows of its slice of the vocabulary, so ids outside the
slice contribute zero and one all-reduce completes the sum (a vocabulary-parallel
embedding).  The product keeps the gradient a product too (``np.take``'s gradient would
gather the ids).  The loss reads the logits split over the vocabulary: the row maximum and
the sum of exponentials each need one value per token, never the logits themselves.
"""
import math

import numpy as np

import mtensor as mt
from mtensor import Replicate, Shard
from mtensor.debug import region

VOCAB = 256   # bytes
DATA = [Shard(0), Shard(2)]   # one-hot (batch, seq, byte): the batch on dp, the bytes on tp


def encode(ids):
    """One-hot bytes: (..., 256) floats of the integer ``ids``."""
    return np.eye(VOCAB)[ids]


def one_hot(ids):
    """(inputs, next-byte targets), one-hot (batch, seq, 256), of windows ``ids``
    (batch, seq + 1)."""
    return encode(ids[:, :-1]), encode(ids[:, 1:])


def distribute(arrays, mesh, placements=DATA):
    """numpy arrays as DTensors of ``placements``; every rank cuts its own block."""
    return tuple(mt.distribute_tensor(a, mesh, placements, src_data_rank=None) for a in arrays)


def layouts(layers):
    """Each parameter's placements on the (dp, tp) mesh: Megatron's splits on ``tp``,
    replicated on ``dp``."""
    rep, col, row = [Replicate(), Replicate()], [Replicate(), Shard(1)], [Replicate(), Shard(0)]
    out = {"wte": row, "wpe": rep, "lnf_g": rep, "lnf_b": rep, "head": col}
    for i in range(layers):
        out.update({f"ln1_g{i}": rep, f"ln1_b{i}": rep, f"ln2_g{i}": rep, f"ln2_b{i}": rep,
                    f"wq{i}": col, f"wk{i}": col, f"wv{i}": col,   # (d, heads, d_head): by heads
                    f"wo{i}": row,                                 # (heads, d_head, d)
                    f"w1{i}": col, f"b1{i}": [Replicate(), Shard(0)], f"w2{i}": row,
                    f"b2{i}": rep})
    return out


def check_sizes(d_model, heads):
    if heads < 1 or d_model % heads:
        raise ValueError(f"--d-model {d_model} is not a multiple of --heads {heads}")


def init_params(mesh, layers, d_model, heads, seq, seed=0):
    """GPT-2's initialisation (normal(0, 0.02), output projections scaled by 1/sqrt(2L)) as
    numpy arrays, distributed on ``mesh`` unless it is None.  Every rank draws the same
    values from ``seed`` and cuts its own block."""
    check_sizes(d_model, heads)
    rng, hd, std = np.random.default_rng(seed), d_model // heads, 0.02
    out_std = std / math.sqrt(2 * layers)
    p = {"wte": rng.normal(0, std, (VOCAB, d_model)), "wpe": rng.normal(0, std, (seq, d_model)),
         "lnf_g": np.ones(d_model), "lnf_b": np.zeros(d_model),
         "head": rng.normal(0, std, (d_model, VOCAB))}
    for i in range(layers):
        p.update({f"ln1_g{i}": np.ones(d_model), f"ln1_b{i}": np.zeros(d_model),
                  f"ln2_g{i}": np.ones(d_model), f"ln2_b{i}": np.zeros(d_model)})
        for w in "qkv":
            p[f"w{w}{i}"] = rng.normal(0, std, (d_model, heads, hd))
        p[f"wo{i}"] = rng.normal(0, out_std, (heads, hd, d_model))
        p[f"w1{i}"] = rng.normal(0, std, (d_model, 4 * d_model))
        p[f"b1{i}"] = np.zeros(4 * d_model)
        p[f"w2{i}"] = rng.normal(0, out_std, (4 * d_model, d_model))
        p[f"b2{i}"] = np.zeros(d_model)
    if mesh is None:
        return p
    place = layouts(layers)
    return {k: distribute([v], mesh, place[k])[0] for k, v in p.items()}


def layers_of(params):
    return sum(k.startswith("wq") for k in params)


def layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc / np.sqrt(var + eps) * g + b


def gelu(x):
    """GPT-2's tanh approximation."""
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * (x * x * x))))


def attention(x, wq, wk, wv, wo):
    """Causal multi-head self-attention; the heads are the einsum label ``h``."""
    t, hd = x.shape[1], wq.shape[2]
    q = np.einsum("btd,dhk->bhtk", x, wq) * (1 / math.sqrt(hd))
    k = np.einsum("btd,dhk->bhtk", x, wk)
    v = np.einsum("btd,dhk->bhtk", x, wv)
    scores = np.where(np.tril(np.ones((t, t), dtype=bool)), q @ np.swapaxes(k, -1, -2), -np.inf)
    e = np.exp(scores - mt.stop_gradient(scores.max(axis=-1, keepdims=True)))
    att = e / e.sum(axis=-1, keepdims=True)
    return np.einsum("bhtk,hkd->btd", att @ v, wo)


def mlp(x, w1, b1, w2, b2):
    return gelu(x @ w1 + b1) @ w2 + b2


BLOCK = ("ln1_g", "ln1_b", "wq", "wk", "wv", "wo", "ln2_g", "ln2_b", "w1", "b1", "w2", "b2")


def block(h, p, i):
    """Transformer block ``i`` on the hidden state ``h``; ``p``: its parameters by
    ``BLOCK`` name."""
    with region(f"block{i}/attention"):
        a = layer_norm(h, p["ln1_g"], p["ln1_b"])
        h = h + attention(a, p["wq"], p["wk"], p["wv"], p["wo"])
    with region(f"block{i}/mlp"):
        a = layer_norm(h, p["ln2_g"], p["ln2_b"])
        return h + mlp(a, p["w1"], p["b1"], p["w2"], p["b2"])


def embed(params, x):
    """Token plus position embeddings of the one-hot bytes ``x``."""
    with region("embedding"):
        return x @ params["wte"] + params["wpe"][: x.shape[1]]


def hidden(params, x, remat=False):
    """The last hidden state (batch, seq, d_model) of the one-hot bytes ``x``.  ``remat``:
    each block through ``mt.remat`` (its activations recomputed in the backward)."""
    h = embed(params, x)
    run = mt.remat(block) if remat else block
    for i in range(layers_of(params)):
        h = run(h, {k: params[f"{k}{i}"] for k in BLOCK}, i)
    with region("head"):
        return layer_norm(h, params["lnf_g"], params["lnf_b"])


def logits(params, x, remat=False):
    """(batch, seq, 256) next-byte logits, split over the vocabulary on a mesh."""
    h = hidden(params, x, remat)
    with region("head"):
        return h @ params["head"]


def loss(params, x, y, remat=False):
    """Mean cross-entropy (nats per byte) of the one-hot next bytes ``y`` given ``x``."""
    return cross_entropy(logits(params, x, remat), y)


def cross_entropy(z, y):
    """Mean cross-entropy of the one-hot ``y`` under the logits ``z``."""
    with region("loss"):
        top = mt.stop_gradient(z.max(axis=-1, keepdims=True))
        log_sum = np.log(np.exp(z - top).sum(axis=-1, keepdims=True)) + top
        return (log_sum - (z * y).sum(axis=-1, keepdims=True)).mean()
