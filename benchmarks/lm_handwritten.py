"""The byte-level GPT of ``examples/lm_model.py`` written by hand as Megatron would: numpy
and mpi4py, forward and backward, on the same shards as ``lm_model.layouts``.

    mpiexec -n 4 python benchmarks/lm_handwritten.py --check

``make_step(params, dp, tp, comm)`` cuts this rank's blocks of the full numpy parameters
(``lm_model.init_params(None, ...)``) for the (dp, tp) grid of ``comm`` (rank = i_dp * tp +
i_tp) and returns a callable ``step(ids)`` -> ``(loss, grads)``: ``ids`` (batch, seq + 1) the
same on every rank, the batch rows split over dp as numpy.array_split does, ``grads`` this
rank's gradient block of each parameter, summed over dp.  The communication, all of it
in-place all-reduces on the dp and tp sub-communicators (none on a group of one rank):

* forward on tp: the vocabulary-parallel embedding (one (b*T, d) sum), one sum after each
  attention's output projection and one after each MLP's second matmul, and the
  vocabulary-parallel cross-entropy: the MAX of one logit per token, then one SUM of the
  sum of exponentials fused with the target logit (two values per token);
* backward on tp: one sum of the input gradient of each attention and each MLP (Megatron's
  f operator) and one of the head's input gradient;
* on dp: the loss, then one sum per parameter gradient.

``step.bytes`` and ``step.calls`` count them per group, bytes in the bus-bandwidth
convention of ``mtensor.cost.model`` (an all-reduce of S bytes on n ranks: 2(n-1)/n*S).

``--check`` runs every (dp, tp) grid of the launch's ranks on a small model with uneven
splits (heads, batch rows) and compares the loss with ``lm_model.loss`` on numpy, and the
loss and every rank's gradient blocks with ``mt.value_and_grad(lm_model.loss)`` computed by
rank 0 alone on a 1x1 mesh over ``MPI.COMM_SELF``; rank 0 prints a markdown table
(``--json PATH`` also writes it and its numbers, ``tables.emit``); exit status 1 on a
mismatch.
"""
import argparse
import math
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import lm_model  # noqa: E402  (examples/ is not a package)
from tables import emit  # noqa: E402

import mtensor as mt  # noqa: E402

GELU_C = math.sqrt(2 / math.pi)
LOSS_RTOL, GRAD_RTOL = 1e-10, 1e-8


class Groups:
    """The dp and tp sub-communicators of this rank in a (dp, tp) grid over ``comm``, with
    in-place all-reduces that count their calls and bytes per group."""

    def __init__(self, comm, dp, tp):
        if dp * tp != comm.size:
            raise ValueError(f"a ({dp}, {tp}) grid needs {dp * tp} ranks, not {comm.size}")
        self.i_dp, self.i_tp = divmod(comm.rank, tp)
        self.comms = {"dp": comm.Split(self.i_tp, self.i_dp),
                      "tp": comm.Split(self.i_dp, self.i_tp)}
        self.calls = dict.fromkeys(self.comms, 0)
        self.bytes = dict.fromkeys(self.comms, 0)

    def allreduce(self, group, a, op=MPI.SUM):
        """``a`` (C-contiguous) reduced in place over ``group`` ("dp" or "tp"), returned."""
        comm = self.comms[group]
        n = comm.size
        if n > 1:
            comm.Allreduce(MPI.IN_PLACE, a, op)
            self.calls[group] += 1
            self.bytes[group] += 2 * (n - 1) * a.nbytes // n
        return a

    def free(self):
        for comm in self.comms.values():
            comm.Free()


def split_dims(layers):
    """Each parameter's split dim on tp (None: replicated), read from ``lm_model.layouts``."""
    return {k: getattr(place[1], "dim", None) for k, place in lm_model.layouts(layers).items()}


def block(a, n, i, dim):
    """Block ``i`` of ``n`` of ``a`` along ``dim`` as numpy.array_split cuts it (all of ``a``
    when ``dim`` is None), contiguous."""
    return np.ascontiguousarray(a if dim is None else np.array_split(a, n, axis=dim)[i])


def layer_norm(x, g, b, eps=1e-5):
    """LayerNorm over the last dim, and what its backward needs."""
    xc = x - x.mean(axis=-1, keepdims=True)
    rstd = 1 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)
    xhat = xc * rstd
    return xhat * g + b, (xhat, rstd, g)


def layer_norm_back(dy, cache):
    """(input gradient, gain gradient, bias gradient) of ``layer_norm``; rows are tokens."""
    xhat, rstd, g = cache
    dxhat = dy * g
    dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True)
                 - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    return dx, (dy * xhat).sum(axis=0), dy.sum(axis=0)


def gelu(u):
    """GPT-2's tanh GELU and the tanh its derivative reuses (``u * u * u``: numpy's
    ``u ** 3`` goes through pow, over ten times slower)."""
    t = np.tanh(GELU_C * (u + 0.044715 * (u * u * u)))
    return 0.5 * u * (1 + t), t


def gelu_back(dy, u, t):
    """The input gradient of ``gelu`` at ``u`` (``t`` its tanh) for output gradient ``dy``."""
    return dy * (0.5 * (1 + t) + 0.5 * u * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * u * u))


class MegatronStep:
    """One forward+backward of the model on this rank's blocks; see the module docstring."""

    def __init__(self, params, dp, tp, comm):
        self.groups = Groups(comm, dp, tp)
        self.dp = dp
        self.layers = lm_model.layers_of(params)
        self.dims = split_dims(self.layers)
        self.p = {k: block(v, tp, self.groups.i_tp, self.dims[k]) for k, v in params.items()}
        vocab = np.array_split(np.arange(lm_model.VOCAB), tp)[self.groups.i_tp]
        self.lo, self.hi = int(vocab[0]), int(vocab[-1]) + 1

    @property
    def calls(self):
        """All-reduces run so far, per group."""
        return self.groups.calls

    @property
    def bytes(self):
        """Bytes this rank moved so far, per group (bus-bandwidth convention)."""
        return self.groups.bytes

    def free(self):
        self.groups.free()

    def __call__(self, ids):
        """(mean loss over all of ``ids``, {name: this rank's gradient block})."""
        n_global = ids.shape[0] * (ids.shape[1] - 1)
        ids = ids[np.array_split(np.arange(ids.shape[0]), self.dp)[self.groups.i_dp]]
        b, t = ids.shape[0], ids.shape[1] - 1
        tokens, targets = ids[:, :-1].ravel(), ids[:, 1:].ravel()
        p, caches = self.p, []
        h = self._embed(tokens, b, t)
        for i in range(self.layers):
            a, ln1 = layer_norm(h, p[f"ln1_g{i}"], p[f"ln1_b{i}"])
            out, att = self._attention(a, i, b, t)
            h = h + out
            a, ln2 = layer_norm(h, p[f"ln2_g{i}"], p[f"ln2_b{i}"])
            out, mlp = self._mlp(a, i)
            h = h + out
            caches.append((ln1, att, ln2, mlp))
        hf, lnf = layer_norm(h, p["lnf_g"], p["lnf_b"])
        loss, dz = self._cross_entropy(hf @ p["head"], targets, n_global)

        grads = {"head": hf.T @ dz}
        dh = self.groups.allreduce("tp", dz @ p["head"].T)
        dh, grads["lnf_g"], grads["lnf_b"] = layer_norm_back(dh, lnf)
        for i in reversed(range(self.layers)):
            ln1, att, ln2, mlp = caches[i]
            dx, grads[f"ln2_g{i}"], grads[f"ln2_b{i}"] = layer_norm_back(
                self._mlp_back(dh, i, mlp, grads), ln2)
            dh = dh + dx
            dx, grads[f"ln1_g{i}"], grads[f"ln1_b{i}"] = layer_norm_back(
                self._attention_back(dh, i, att, grads), ln1)
            dh = dh + dx
        self._embed_back(dh, tokens, t, grads)
        for g in grads.values():
            self.groups.allreduce("dp", g)
        return loss, {k: grads[k] for k in p}

    def _embed(self, tokens, b, t):
        """Vocabulary-parallel lookup: this rank's rows, zero for ids outside its slice, summed
        over tp; plus the positions.  (b*t, d)."""
        mine = (tokens >= self.lo) & (tokens < self.hi)
        h = self.p["wte"][np.where(mine, tokens - self.lo, 0)]
        h[~mine] = 0
        self.groups.allreduce("tp", h)
        d = h.shape[1]
        return (h.reshape(b, t, d) + self.p["wpe"][:t]).reshape(b * t, d)

    def _embed_back(self, dh, tokens, t, grads):
        """The embedding gradients into ``grads``: this rank's vocabulary rows and the
        positions (no communication: ``dh`` is whole on every tp rank)."""
        mine = (tokens >= self.lo) & (tokens < self.hi)
        grads["wte"] = np.zeros_like(self.p["wte"])
        np.add.at(grads["wte"], tokens[mine] - self.lo, dh[mine])
        grads["wpe"] = np.zeros_like(self.p["wpe"])
        grads["wpe"][:t] = dh.reshape(len(tokens) // t, t, dh.shape[1]).sum(axis=0)

    def _attention(self, a, i, b, t):
        """Causal attention over this rank's heads; the output projection summed over tp."""
        wq, wk, wv, wo = (self.p[f"w{w}{i}"] for w in "qkvo")
        d, heads, hd = wq.shape

        def project(w):   # (b*t, d) @ (d, heads*hd) -> (b, heads, t, hd)
            return (a @ w.reshape(d, heads * hd)).reshape(b, t, heads, hd).transpose(0, 2, 1, 3)

        q, k, v = project(wq) * (1 / math.sqrt(hd)), project(wk), project(wv)
        scores = np.where(np.tril(np.ones((t, t), dtype=bool)), q @ k.swapaxes(-1, -2), -np.inf)
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        att = e / e.sum(axis=-1, keepdims=True)
        o = (att @ v).transpose(0, 2, 1, 3).reshape(b * t, heads * hd)
        out = self.groups.allreduce("tp", o @ wo.reshape(heads * hd, d))
        return out, (a, q, k, v, att, o)

    def _attention_back(self, dout, i, cache, grads):
        """The weight gradients into ``grads``; returns the input gradient, summed over tp."""
        a, q, k, v, att, o = cache
        wq, wk, wv, wo = (self.p[f"w{w}{i}"] for w in "qkvo")
        d, heads, hd = wq.shape
        b, t = q.shape[0], q.shape[2]
        grads[f"wo{i}"] = (o.T @ dout).reshape(wo.shape)
        do = (dout @ wo.reshape(heads * hd, d).T).reshape(b, t, heads, hd).transpose(0, 2, 1, 3)
        datt = do @ v.swapaxes(-1, -2)
        ds = att * (datt - (datt * att).sum(axis=-1, keepdims=True))
        da = np.zeros_like(a)
        for w, dproj in (("q", ds @ k * (1 / math.sqrt(hd))), ("k", ds.swapaxes(-1, -2) @ q),
                         ("v", att.swapaxes(-1, -2) @ do)):
            dflat = dproj.transpose(0, 2, 1, 3).reshape(b * t, heads * hd)
            grads[f"w{w}{i}"] = (a.T @ dflat).reshape(d, heads, hd)
            da += dflat @ self.p[f"w{w}{i}"].reshape(d, heads * hd).T
        return self.groups.allreduce("tp", da)

    def _mlp(self, a, i):
        """Column-parallel first matmul, row-parallel second, summed over tp."""
        u = a @ self.p[f"w1{i}"] + self.p[f"b1{i}"]
        act, th = gelu(u)
        out = self.groups.allreduce("tp", act @ self.p[f"w2{i}"]) + self.p[f"b2{i}"]
        return out, (a, u, th, act)

    def _mlp_back(self, dout, i, cache, grads):
        """The weight gradients into ``grads``; returns the input gradient, summed over tp."""
        a, u, th, act = cache
        grads[f"b2{i}"] = dout.sum(axis=0)
        grads[f"w2{i}"] = act.T @ dout
        du = gelu_back(dout @ self.p[f"w2{i}"].T, u, th)
        grads[f"b1{i}"] = du.sum(axis=0)
        grads[f"w1{i}"] = a.T @ du
        return self.groups.allreduce("tp", du @ self.p[f"w1{i}"].T)

    def _cross_entropy(self, z, targets, n_global):
        """Vocabulary-parallel cross-entropy of this rank's logit columns ``z`` (tokens,
        vocab slice): the loss (mean over all ``n_global`` tokens, summed over dp) and its
        gradient in ``z``."""
        top = self.groups.allreduce("tp", z.max(axis=1), MPI.MAX)
        e = np.exp(z - top[:, None])
        mine = (targets >= self.lo) & (targets < self.hi)
        col = np.where(mine, targets - self.lo, 0)
        rows = np.arange(z.shape[0])
        sums = np.empty((2, z.shape[0]))
        sums[0] = e.sum(axis=1)
        sums[1] = np.where(mine, z[rows, col], 0)
        self.groups.allreduce("tp", sums)
        total = np.array([(np.log(sums[0]) + top - sums[1]).sum()])
        loss = self.groups.allreduce("dp", total)[0] / n_global
        dz = e / sums[0][:, None]
        dz[rows[mine], col[mine]] -= 1
        dz /= n_global
        return float(loss), dz


def make_step(params, dp, tp, comm):
    """The hand-written step on the (dp, tp) grid of ``comm``, from the full numpy
    ``params`` (every rank holds them all)."""
    return MegatronStep(params, dp, tp, comm)


def mtensor_reference(sizes, ids):
    """(loss, full gradients) of ``mt.value_and_grad(lm_model.loss)`` on a 1x1 mesh over
    ``MPI.COMM_SELF``: collective over this rank only."""
    mesh = mt.init_device_mesh((1, 1), mesh_dim_names=("dp", "tp"), comm=MPI.COMM_SELF)
    params = lm_model.init_params(mesh, *sizes)
    x, y = lm_model.distribute(lm_model.one_hot(ids), mesh)
    value, grads = mt.value_and_grad(lm_model.loss)(params, x, y)
    return float(value), {k: g.full_tensor() for k, g in grads.items()}


def grids(n):
    """Every (dp, tp) with dp * tp == n."""
    return [(dp, n // dp) for dp in range(1, n + 1) if n % dp == 0]


def check(comm, layers=2, d_model=24, heads=6, seq=10, t=8, batch=5, seed=0):
    """Compare the hand-written step on every grid of ``comm`` with the model (module
    docstring): (all passed, markdown lines, the numbers behind them)."""
    sizes = (layers, d_model, heads, seq, seed)
    params = lm_model.init_params(None, *sizes)
    ids = np.random.default_rng(seed + 1).integers(0, lm_model.VOCAB, (batch, t + 1))
    np_loss = float(lm_model.loss(params, *lm_model.one_hot(ids)))
    ref_loss, ref = comm.bcast(mtensor_reference(sizes, ids) if comm.rank == 0 else None)
    scale = {k: float(np.abs(g).max()) or 1.0 for k, g in ref.items()}
    lines = [f"{comm.size} ranks; layers {layers}, d_model {d_model}, heads {heads}, batch "
             f"{batch}, seq {t} (wpe {seq}): numpy loss {np_loss:.15f}, mtensor 1x1 "
             f"{ref_loss:.15f} (relative {abs(ref_loss - np_loss) / np_loss:.1e})", "",
             "| grid (dp, tp) | loss | vs numpy | vs mtensor | worst gradient error | "
             "tp all-reduces | dp all-reduces | |", "|---|---:|---:|---:|---|---:|---:|---|"]
    rows = []
    for dp, tp in grids(comm.size):
        step = make_step(params, dp, tp, comm)
        loss, grads = step(ids)
        want = {k: block(ref[k], tp, step.groups.i_tp, step.dims[k]) for k in ref}
        laid_out = comm.allreduce(grads.keys() == want.keys() and all(
            grads[k].shape == want[k].shape for k in want), op=MPI.LAND)
        grad_err, worst = math.inf, "blocks not laid out like the parameters"
        if laid_out:
            errs = [(float(np.abs(grads[k] - w).max(initial=0)) / scale[k], k)
                    for k, w in want.items()]
            grad_err, worst = comm.allreduce(max(errs), op=MPI.MAX)
        row = {"grid": [dp, tp], "loss": loss,
               "vs_numpy": comm.allreduce(abs(loss - np_loss) / np_loss, op=MPI.MAX),
               "vs_mtensor": comm.allreduce(abs(loss - ref_loss) / ref_loss, op=MPI.MAX),
               "gradient_error": grad_err, "worst": worst, "calls": dict(step.calls)}
        row["passed"] = (max(row["vs_numpy"], row["vs_mtensor"]) < LOSS_RTOL
                         and grad_err < GRAD_RTOL)
        rows.append(row)
        lines.append(f"| ({dp}, {tp}) | {loss:.15f} | {row['vs_numpy']:.1e} | "
                     f"{row['vs_mtensor']:.1e} | {grad_err:.1e} of max abs ({worst}) | "
                     f"{step.calls['tp']} | {step.calls['dp']} | "
                     f"{'ok' if row['passed'] else 'FAILED'} |")
        step.free()
    ok = all(r["passed"] for r in rows)
    lines += ["", f"check {'passed' if ok else 'FAILED'} (loss to {LOSS_RTOL:g} relative, "
              f"gradients to {GRAD_RTOL:g} of each gradient's largest entry)"]
    return ok, lines, {"ranks": comm.size, "numpy_loss": np_loss, "mtensor_loss": ref_loss,
                       "grids": rows, "passed": ok}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", required=True,
                        help="compare with lm_model on every (dp, tp) grid of the launch")
    parser.add_argument("--json", help="also write the table and its numbers here (rank 0)")
    args = parser.parse_args()
    ok, lines, numbers = check(MPI.COMM_WORLD)
    if MPI.COMM_WORLD.rank == 0:
        emit(args.json, lines, numbers)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
