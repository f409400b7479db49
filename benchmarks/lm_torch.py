"""The byte-level GPT of ``examples/lm_model.py`` in PyTorch: torch's own tensor parallelism
on ``tp``, data parallelism on ``dp`` by hand, float64 on CPU over gloo.

    mpiexec -n 4 python benchmarks/lm_torch.py [--check] [--dp 2] [--layers 2 --d-model 64
        --heads 4 --seq 32 --batch 8 --steps 10]

:func:`make_torch_step` builds the model from ``lm_model.init_params(None, ...)``'s arrays on a
``init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))`` (rank = i_dp * tp + i_tp)
and returns one forward + backward step.  ``parallelize_module`` on the ``tp`` sub-mesh:

* token embedding (``nn.Embedding``): ``RowwiseParallel(input_layouts=Replicate())``, torch's
  vocabulary-parallel embedding (rows of ``wte`` split, the output all-reduced);
* q, k, v and the first MLP linear: ``ColwiseParallel`` (q, k, v by heads);
* attention output and second MLP linear: ``RowwiseParallel`` (output all-reduced);
* head: ``ColwiseParallel(output_layouts=Shard(-1), use_local_output=False)``, the logits
  left split over the vocabulary for ``F.cross_entropy`` under ``loss_parallel()``.

Positions, LayerNorms and biases of the row-parallel linears stay plain tensors, replicated.
Each dp rank takes its ``numpy.array_split`` rows of the batch, sums the cross-entropy and
divides by the global token count; every gradient's local tensor (and the loss) is then
all-reduced (summed) on the dp group by hand, one asynchronous ``all_reduce`` per parameter.

Without ``--dp`` the script runs every (dp, tp) factorisation of the world size, printing
ms/step (median over ``--steps``, slowest rank).  ``--check`` also compares, on every rank, the
loss with ``lm_model.loss`` on numpy and the gradients with the same module run unparallelised
on the whole batch (relative error, max |diff| / max |reference|, must be under 1e-10).

One thread per rank: OMP/OPENBLAS/MKL_NUM_THREADS default to 1 below, before numpy is
imported, and torch gets ``set_num_threads(1)``.
"""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402  (the thread settings above must precede numpy)
import socket  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from mpi4py import MPI  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.tensor import DTensor, Replicate, Shard, init_device_mesh  # noqa: E402
from torch.distributed.tensor.parallel import (  # noqa: E402
    ColwiseParallel,
    RowwiseParallel,
    loss_parallel,
    parallelize_module,
)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import lm_model  # noqa: E402

TOLERANCE = 1e-10
TP_PLAN = {"tok": RowwiseParallel(input_layouts=Replicate()),
           "blocks.*.q": ColwiseParallel(), "blocks.*.k": ColwiseParallel(),
           "blocks.*.v": ColwiseParallel(), "blocks.*.o": RowwiseParallel(),
           "blocks.*.fc1": ColwiseParallel(), "blocks.*.fc2": RowwiseParallel(),
           "head": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False)}


class Block(nn.Module):
    """Pre-LayerNorm block: causal multi-head attention, then the gelu-tanh MLP."""

    def __init__(self, d_model, heads):
        super().__init__()
        self.head_dim = d_model // heads
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.q, self.k, self.v = (nn.Linear(d_model, d_model, bias=False) for _ in range(3))
        self.o = nn.Linear(d_model, d_model, bias=False)
        self.fc1, self.fc2 = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)

    def forward(self, h):
        a = self.ln1(h)
        b, t, _ = a.shape   # under tensor parallelism q, k, v hold this rank's heads only
        q, k, v = (lin(a).view(b, t, -1, self.head_dim).transpose(1, 2)
                   for lin in (self.q, self.k, self.v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + self.o(att.transpose(1, 2).reshape(b, t, -1))
        return h + self.fc2(F.gelu(self.fc1(self.ln2(h)), approximate="tanh"))


class GPT(nn.Module):
    """Token and position embeddings, ``layers`` blocks, final LayerNorm, head (no bias)."""

    def __init__(self, layers, d_model, heads, seq):
        super().__init__()
        self.tok, self.pos = nn.Embedding(lm_model.VOCAB, d_model), nn.Embedding(seq, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, lm_model.VOCAB, bias=False)

    def forward(self, ids):
        """Logits (batch, seq, vocab) of the byte ids (batch, seq)."""
        h = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        for block in self.blocks:
            h = block(h)
        return self.head(self.lnf(h))


def param_names(layers):
    """{torch parameter name: (lm_model key, whether it is an ``nn.Linear`` weight)}."""
    out = {"tok.weight": ("wte", False), "pos.weight": ("wpe", False),
           "lnf.weight": ("lnf_g", False), "lnf.bias": ("lnf_b", False),
           "head.weight": ("head", True)}
    for i in range(layers):
        pre = f"blocks.{i}."
        out.update({pre + m: (f"{w}{i}", False)
                    for m, w in [("ln1.weight", "ln1_g"), ("ln1.bias", "ln1_b"),
                                 ("ln2.weight", "ln2_g"), ("ln2.bias", "ln2_b"),
                                 ("fc1.bias", "b1"), ("fc2.bias", "b2")]})
        out.update({pre + m + ".weight": (f"{w}{i}", True)
                    for m, w in [("q", "wq"), ("k", "wk"), ("v", "wv"), ("o", "wo"),
                                 ("fc1", "w1"), ("fc2", "w2")]})
    return out


def build_model(params):
    """The float64 :class:`GPT` holding ``params`` (lm_model's numpy arrays).

    An ``nn.Linear`` weight is (out, in): ``wq`` (d, H, hd) becomes ``reshape(d, H * hd).T``,
    so the output features run head by head; ``wo`` (H, hd, d) becomes ``reshape(H * hd, d).T``.
    """
    layers, (d_model, heads) = lm_model.layers_of(params), params["wq0"].shape[:2]
    model = GPT(layers, d_model, heads, params["wpe"].shape[0]).to(torch.float64)
    with torch.no_grad():
        for name, p in model.named_parameters():
            key, linear = param_names(layers)[name]
            a = params[key].reshape(p.shape[::-1]).T if linear else params[key]
            p.copy_(torch.from_numpy(np.ascontiguousarray(a)))
    return model


def numpy_grads(model, params):
    """The gradients of ``model`` as full numpy arrays keyed and shaped like ``params``."""
    out = {}
    for name, p in model.named_parameters():
        key, linear = param_names(lm_model.layers_of(params))[name]
        g = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
        out[key] = (g.T if linear else g).numpy().reshape(params[key].shape)
    return out


def init_distributed():
    """Start torch.distributed over gloo on the MPI world (env://), once per process."""
    if dist.is_initialized():
        return
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    comm = MPI.COMM_WORLD
    port = comm.bcast(_free_port() if comm.rank == 0 else None)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      RANK=str(comm.rank), WORLD_SIZE=str(comm.size))
    dist.init_process_group("gloo", init_method="env://")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def split_batch(ids, rows):
    """Inputs and next-byte targets (int64 tensors) of the batch rows ``rows`` of ``ids``."""
    ids = ids[rows].astype(np.int64)
    return torch.from_numpy(ids[:, :-1].copy()), torch.from_numpy(ids[:, 1:].copy())


def build_torch_step(params, dp, tp):
    """(model, step): the tensor-parallel model on this rank and :func:`make_torch_step`'s
    step."""
    init_distributed()
    mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    model = parallelize_module(build_model(params), mesh["tp"], TP_PLAN)
    dp_group, i_dp = mesh["dp"].get_group(), mesh.get_coordinate()[0]
    weights = list(model.parameters())

    def step(ids):
        rows = np.array_split(np.arange(ids.shape[0]), dp)[i_dp]
        x, y = split_batch(ids, rows)
        model.zero_grad(set_to_none=True)
        with loss_parallel():
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), reduction="sum")
            loss = loss / (ids.shape[0] * x.shape[1])
            loss.backward()
        value = loss.detach().to_local().clone()
        if dp > 1:
            works = [dist.all_reduce(t, group=dp_group, async_op=True)
                     for t in [value] + [_local(p.grad) for p in weights]]
            for work in works:
                work.wait()
        return float(value)
    return model, step


def _local(t):
    """The local tensor of a DTensor (a view: reducing it in place updates ``t``), else ``t``."""
    return t.to_local() if isinstance(t, DTensor) else t


def make_torch_step(params, dp, tp):
    """``step(ids)`` for the GPT holding ``params`` (identical on every rank) on a (dp, tp)
    mesh: ids (batch, seq + 1) ints, the same on every rank; zeroes the gradients, runs
    forward and backward (no optimizer step) and returns the mean next-byte cross-entropy
    over the whole batch as a float, the same on every rank."""
    return build_torch_step(params, dp, tp)[1]


def reference(params, ids):
    """(numpy loss, gradients of the unparallelised torch model) on the whole batch."""
    value = lm_model.loss(params, *lm_model.one_hot(ids))
    model = build_model(params)
    x, y = split_batch(ids, slice(None))
    F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
    return float(value), numpy_grads(model, params)


def relative_error(a, b):
    """max |a - b| / max |b|."""
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def time_steps(step, ids, steps, comm):
    """Median seconds per step of the slowest rank, after one warm-up step."""
    step(ids)
    times = []
    for _ in range(steps):
        comm.Barrier()
        start = time.perf_counter()
        step(ids)
        times.append(time.perf_counter() - start)
    return comm.allreduce(float(np.median(times)), op=MPI.MAX)


def run_mesh(params, ids, dp, tp, args, comm, ref):
    """Build, optionally check against ``ref`` and time the step on one mesh; True when the
    checks pass on every rank."""
    model, step = build_torch_step(params, dp, tp)
    value, ok, line = step(ids), True, ""
    if ref is not None:
        err = relative_error(np.array(value), np.array(ref[0]))
        grads = numpy_grads(model, params)
        gerr = max(relative_error(grads[k], ref[1][k]) for k in ref[1])
        err, gerr = comm.allreduce(err, op=MPI.MAX), comm.allreduce(gerr, op=MPI.MAX)
        ok = err < TOLERANCE and gerr < TOLERANCE
        line = f"  loss rel err {err:.2e}  grad rel err {gerr:.2e}  {'ok' if ok else 'FAIL'}"
    ms = time_steps(step, ids, args.steps, comm) * 1e3
    if comm.rank == 0:
        print(f"mesh (dp {dp}, tp {tp}): loss {value:.15f}  {ms:.2f} ms/step{line}", flush=True)
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare loss and gradients with the references")
    parser.add_argument("--dp", type=int, help="dp size (default: every factorisation)")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per mesh")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    n = comm.size
    params = lm_model.init_params(None, args.layers, args.d_model, args.heads, args.seq,
                                  args.seed)
    ids = np.random.default_rng(args.seed + 1).integers(0, lm_model.VOCAB,
                                                        (args.batch, args.seq + 1))
    ref = reference(params, ids) if args.check else None
    if comm.rank == 0:
        print(f"{n} ranks, layers {args.layers}, d_model {args.d_model}, heads {args.heads}, "
              f"seq {args.seq}, batch {args.batch}, float64, gloo", flush=True)
        if ref is not None:
            print(f"numpy loss {ref[0]:.15f}", flush=True)
    meshes = [(args.dp, n // args.dp)] if args.dp else [(d, n // d) for d in range(1, n + 1)
                                                         if n % d == 0]
    ok = all([run_mesh(params, ids, dp, tp, args, comm, ref) for dp, tp in meshes])
    dist.destroy_process_group()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
