"""Gradient idioms (``to_local``/``from_local`` with ``grad_placements``, the loss-parallel
cross-entropy) and tensor parallelism written with DTensor ops (ColwiseParallel /
RowwiseParallel, sequence-parallel norms, a vocabulary-parallel embedding), translated to
numpy + mtensor: ``loss.backward()`` -> ``mt.value_and_grad``; a module's parameters become
the DTensors the parallel style makes of them.  Sizes 7 and 13 shard unevenly.  The registry
and the translation rules are in dtensor_idioms.py; README.md cites each."""
import numpy as np
from dtensor_idioms import randn, rank_of, registry

import mtensor as mt
from mtensor import Partial, Replicate, Shard

IDIOMS, idiom = registry()
T = "pytorch/pytorch test/distributed/tensor/"
STYLE = "pytorch/pytorch torch/distributed/tensor/parallel/style.py "


def _from_local_backward_ref(world):
    return [np.ones((3, 3)) * 9] * world


@idiom("test_dtensor_from_local_backward", T + "test_dtensor.py DTensorTest.test_from_local "
       "('dist tensor works with torch.Tensor during backwards': local * 3, from_local "
       "Shard(0), * 3, backward(ones)): grad 9", lambda: (), _from_local_backward_ref)
def test_dtensor_from_local_backward(mesh):
    local_tensor_with_grad = mt.DTensor.from_local(randn(3, 3, seed=rank_of(mesh)),
                                                   mesh.local_mesh(), [Replicate()])

    def run(local_tensor_with_grad):
        local_tensor_temp = local_tensor_with_grad * 3
        dist_tensor = mt.DTensor.from_local(local_tensor_temp, mesh, [Shard(0)])
        output = dist_tensor * 3
        grad_output = mt.DTensor.from_local(np.ones((3, 3)), mesh, [Shard(0)])
        return (output * grad_output).sum()
    grad = mt.grad(run)(local_tensor_with_grad)
    return mesh.get_group().allgather(mt.asnumpy(grad))


@idiom("test_dtensor_to_local_backward", T + "test_dtensor.py DTensorTest.test_to_local "
       "('to_local does not break the autograd': (st * 3).to_local() + 1, sum().backward()); "
       "13 x 3 Shard(0)", lambda: (randn(13, 3),), lambda world, x: np.ones((13, 3)) * 3)
def test_dtensor_to_local_backward(mesh, x):
    sharded_tensor = mt.distribute_tensor(x, mesh, [Shard(0)])

    def run(sharded_tensor):
        temp_st = sharded_tensor * 3
        new_tensor_with_grad = temp_st.to_local()
        res = new_tensor_with_grad + 1
        return res.sum()
    return mt.grad(run)(sharded_tensor).full_tensor()


@idiom("issue_172932_to_local_from_local_partial", "github.com/pytorch/pytorch/issues/172932 "
       "(to_local + from_local on a Partial DTensor produce a different gradient than the "
       "DTensor itself)", lambda: (np.array([1.0, 2.0, 4.0]),),
       lambda world, t: (np.full(3, 2.0), np.full(3, 2.0)))
def issue_172932(mesh, t):
    original_tensor = mt.distribute_tensor(t, mesh, [Shard(0)])

    def test_case(original_tensor, plan):
        partial = original_tensor.sum()            # Partial(sum) over the shards
        if plan == 2:
            partial = mt.DTensor.from_local(partial.to_local(), mesh, partial.placements)
        return partial.redistribute(mesh, [Replicate()]) * 2
    return tuple(mt.grad(lambda x: test_case(x, plan))(original_tensor).full_tensor()
                 for plan in (1, 2))


def _colwise_expert_ref(world, x, w):
    g = 2 * (x @ w)
    return g @ w.T, x.T @ g


@idiom("pull_175867_from_local_grad_placements", "github.com/pytorch/pytorch/pull/175867 "
       "([DTensor] Add grad_placement to from_local: Replicate forward, Partial backward, as "
       "the ColwiseLinear of a shared expert needs); x 7 x 5 Replicate, w 5 x 13 Shard(1)",
       lambda: (randn(7, 5), randn(5, 13, seed=1)), _colwise_expert_ref)
def pull_175867(mesh, x, w):
    X = mt.distribute_tensor(x, mesh, [Replicate()])
    W = mt.distribute_tensor(w, mesh, [Shard(1)])

    def loss(X, W):
        x_local = X.to_local(grad_placements=[Partial()])
        x_again = mt.DTensor.from_local(x_local, mesh, [Replicate()], grad_placements=[Partial()])
        return ((x_again @ W) ** 2).sum()
    _, (gx, gw) = mt.value_and_grad(loss, argnums=(0, 1))(X, W)
    return gx.full_tensor(), gw.full_tensor()


def _experts(world):
    return [(randn(4, 3, seed=10 + r), randn(3, 4, seed=20 + r)) for r in range(world)]


def _moe_ref(world, x):
    y = sum(np.tanh(x @ a) @ b for a, b in _experts(world))
    g = 2 * y
    return y, sum(((g @ b.T) * (1 - np.tanh(x @ a) ** 2)) @ a.T for a, b in _experts(world))


@idiom("torchtitan_1805_moe_to_local_grad_placements", "github.com/pytorch/torchtitan/issues/"
       "1805 (TP gradient wrong during MoE backward: the tokens' to_local() without "
       "grad_placements misses the reduction); each rank's expert on replicated tokens 7 x 4",
       lambda: (randn(7, 4),), _moe_ref)
def torchtitan_1805(mesh, x):
    a, b = _experts(mesh.size())[rank_of(mesh)]
    tokens = mt.distribute_tensor(x, mesh, [Replicate()])

    def routed(tokens):
        local = tokens.to_local(grad_placements=[Partial()])
        expert_out = np.tanh(local @ a) @ b
        return mt.DTensor.from_local(expert_out, mesh, [Partial()]).redistribute(
            mesh, [Replicate()])
    grad = mt.grad(lambda t: (routed(t) ** 2).sum())(tokens)
    return routed(tokens).full_tensor(), grad.full_tensor()


def _rms(x, eps=1e-6):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)


def _rmsnorm_ref(world, x, w, t):
    return _rms(x) * w, (t * _rms(x)).sum(axis=(0, 1))


@idiom("torchtitan_2532_rmsnorm_to_local", "github.com/pytorch/torchtitan/pull/2532 (explicit "
       "grad_placements in to_local: a Replicate() RMSNorm weight's gradient is Partial()); "
       "x 2 x 7 x 6 Shard(1)", lambda: (randn(2, 7, 6), randn(6, seed=1), randn(2, 7, 6, seed=2)),
       _rmsnorm_ref)
def torchtitan_2532(mesh, x, w, t):
    X = mt.distribute_tensor(x, mesh, [Shard(1)])
    W = mt.distribute_tensor(w, mesh, [Replicate()])
    target = mt.distribute_tensor(t, mesh, [Shard(1)])
    grad_placements = [Partial() if p == Replicate() else p for p in W.placements]

    def norm(W):
        w_local = W.to_local(grad_placements=grad_placements)
        x_local = X.to_local()
        y_local = x_local / np.sqrt((x_local * x_local).mean(axis=-1, keepdims=True) + 1e-6)
        return mt.DTensor.from_local(y_local * w_local, mesh, [Shard(1)])
    grad = mt.grad(lambda W: (norm(W) * target).sum())(W)
    return norm(W).full_tensor(), grad.full_tensor()


@idiom("sequence_parallel_rmsnorm", STYLE + "SequenceParallel (norm on inputs Shard(1) over the "
       "sequence, weight Replicate, output Shard(1)); torchtitan's RMSNorm; seq 7",
       lambda: (randn(2, 7, 6), randn(6, seed=1), randn(2, 7, 6, seed=2)), _rmsnorm_ref)
def sequence_parallel_rmsnorm(mesh, x, w, t):
    X = mt.distribute_tensor(x, mesh, [Shard(1)])
    W = mt.distribute_tensor(w, mesh, [Replicate()])
    target = mt.distribute_tensor(t, mesh, [Shard(1)])

    def rmsnorm(x, weight, eps=1e-6):
        return x * (1.0 / np.sqrt(np.mean(x ** 2, axis=-1, keepdims=True) + eps)) * weight
    grad = mt.grad(lambda W: (rmsnorm(X, W) * target).sum())(W)
    return rmsnorm(X, W).full_tensor(), grad.full_tensor()


def _mlp_inputs():
    return (randn(8, 10), randn(13, 10, seed=1), randn(13, seed=2), randn(10, 13, seed=3),
            randn(10, seed=4))


def _mlp_ref(world, x, w1, b1, w2, b2):
    a = x @ w1.T + b1
    h = np.maximum(a, 0)
    out = h @ w2.T + b2
    g = 2 * out
    g_a = (g @ w2) * (a > 0)
    return out, g_a.T @ x, g_a.sum(axis=0), g.T @ h, g.sum(axis=0)


@idiom("tp_colwise_rowwise_mlp", "liangan1/Tensor-Parallel-PyTorch test_torch_dtensor_tp.py "
       "(MLPModule net1 ColwiseParallel, relu, net2 RowwiseParallel; placements of "
       + STYLE + "); hidden 13, loss (out ** 2).sum()", _mlp_inputs, _mlp_ref)
def tp_colwise_rowwise_mlp(mesh, x, w1, b1, w2, b2):
    params = {"net1.weight": mt.distribute_tensor(w1, mesh, [Shard(0)]),   # ColwiseParallel
              "net1.bias": mt.distribute_tensor(b1, mesh, [Shard(0)]),
              "net2.weight": mt.distribute_tensor(w2, mesh, [Shard(1)]),   # RowwiseParallel
              "net2.bias": mt.distribute_tensor(b2, mesh, [Replicate()])}
    inp = mt.distribute_tensor(x, mesh, [Replicate()])

    def forward(p, x):
        act1 = np.maximum(x @ p["net1.weight"].T + p["net1.bias"], 0)
        return act1 @ p["net2.weight"].T + p["net2.bias"]
    _, grads = mt.value_and_grad(lambda p: (forward(p, inp) ** 2).sum())(params)
    return [forward(params, inp).full_tensor()] + [grads[k].full_tensor() for k in params]


def _row_parallel_ref(world, x, w, b):
    return x @ w + b, np.ones((7, w.shape[1])).T @ x


@idiom("megatron_row_parallel_bias", "NVIDIA/Megatron-LM megatron/core/tensor_parallel/"
       "layers.py RowParallelLinear (input_is_parallel: X Shard(1) @ W Shard(0) is Partial; "
       "the bias is added once, after the reduction)",
       lambda: (randn(7, 13), randn(13, 5, seed=1), randn(5, seed=2)), _row_parallel_ref)
def megatron_row_parallel(mesh, x, w, b):
    X = mt.distribute_tensor(x, mesh, [Shard(1)])
    W = mt.distribute_tensor(w, mesh, [Shard(0)])
    bias = mt.distribute_tensor(b, mesh, [Replicate()])
    output = X @ W + bias
    grad = mt.grad(lambda W: (X @ W + bias).sum())(W)
    return output.full_tensor(), grad.T.full_tensor()


def _column_ref(world, x, w):
    y = x @ w
    return y, x.T @ (2 * y)


@idiom("megatron_column_parallel_gather", "NVIDIA/Megatron-LM megatron/core/tensor_parallel/"
       "layers.py ColumnParallelLinear (gather_output=True: X Replicate @ W Shard(1), output "
       "all-gathered)", lambda: (randn(7, 5), randn(5, 13, seed=1)), _column_ref)
def megatron_column_parallel(mesh, x, w):
    X = mt.distribute_tensor(x, mesh, [Replicate()])
    W = mt.distribute_tensor(w, mesh, [Shard(1)])

    def forward(W):
        return (X @ W).redistribute(mesh, [Replicate()])
    grad = mt.grad(lambda W: (forward(W) ** 2).sum())(W)
    return forward(W).to_local(), grad.full_tensor()


def _embedding_ref(world, weight, ids):
    g = np.zeros_like(weight)
    np.add.at(g, ids, 2 * weight[ids])
    return weight[ids], g


@idiom("vocab_parallel_embedding_mask_partial", "pytorch/pytorch torch/distributed/tensor/_ops/"
       "_embedding_ops.py _MaskPartial (_partition_value: mask the ids outside the local vocab, "
       "look up, zero the masked rows; the output Partial); vocab 13",
       lambda: (randn(13, 4), np.array([0, 12, 5, 5, 7, 3, 12])), _embedding_ref)
def vocab_parallel_embedding(mesh, weight, ids):
    W = mt.distribute_tensor(weight, mesh, [Shard(0)])
    lo = sum(len(b) for b in np.array_split(np.arange(13), mesh.size())[:rank_of(mesh)])
    hi = lo + len(np.array_split(np.arange(13), mesh.size())[rank_of(mesh)])

    def embed(W):
        mask = (ids < lo) | (ids >= hi)
        masked_ids = ids - lo
        masked_ids[mask] = 0
        local = W.to_local()[masked_ids]
        local = local * (~mask)[:, None]
        return mt.DTensor.from_local(local, mesh, [Partial()])
    grad = mt.grad(lambda W: (embed(W) ** 2).sum())(W)
    return embed(W).full_tensor(), grad.full_tensor()


def _xent_ref(world, x, target):
    logp = x - x.max(axis=1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(axis=1, keepdims=True))
    n = len(target)
    onehot = np.eye(x.shape[1])[target]
    return -logp[np.arange(n), target].mean(), (np.exp(logp) - onehot) / n


def _log_softmax(x, dim):
    shifted = x - mt.stop_gradient(x.max(axis=dim, keepdims=True))
    return shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))


@idiom("loss_parallel_cross_entropy", "pytorch/pytorch torch/distributed/tensor/parallel/loss.py "
       "loss_parallel docstring (F.cross_entropy of class-sharded logits, reduction='mean', "
       "backward); nll as take_along_axis; 4 x 13 classes",
       lambda: (randn(4, 13), np.array([0, 12, 6, 3])), _xent_ref)
def loss_parallel_cross_entropy(mesh, x, target):
    dist_input = mt.distribute_tensor(x, mesh, placements=[Shard(1)])

    def cross_entropy(input, target):
        logp = _log_softmax(input, -1)
        return -np.take_along_axis(logp, target[:, None], axis=1).mean()
    loss, grad = mt.value_and_grad(lambda x: cross_entropy(x, target))(dist_input)
    return loss.full_tensor(), grad.full_tensor()


def _log_softmax_grad_ref(world, x, w):
    p = np.exp(x - x.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    return np.log(p), w - p * w.sum(axis=-1, keepdims=True)


@idiom("issue_190746_log_softmax_other_consumer", "github.com/pytorch/pytorch/issues/190746 "
       "(loss_parallel() gives identity gradients to a log_softmax not consumed by "
       "cross_entropy) and issues/152016 (log_softmax(pred, -1), a negative dim); 5 x 13",
       lambda: (randn(5, 13), randn(5, 13, seed=1)), _log_softmax_grad_ref)
def issue_190746(mesh, x, w):
    X = mt.distribute_tensor(x, mesh, [Shard(1)])
    weights = mt.distribute_tensor(w, mesh, [Shard(1)])
    grad = mt.grad(lambda X: (_log_softmax(X, -1) * weights).sum())(X)
    return _log_softmax(X, -1).full_tensor(), grad.full_tensor()
