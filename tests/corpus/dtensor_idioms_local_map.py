"""``local_map`` idioms: its docstring example and PyTorch's test_local_map.py, translated to
numpy + mtensor (``funcol.all_reduce(t, "sum", device_mesh)`` -> the mesh's mpi4py
communicator ``mesh.get_group().allreduce``; ``loss.backward()`` -> ``mt.value_and_grad``).
The registry and the translation rules are in dtensor_idioms.py; README.md cites each."""
import numpy as np
from dtensor_idioms import randn, registry

import mtensor as mt
from mtensor import Partial, Replicate, Shard

IDIOMS, idiom = registry()
DOC = "pytorch/pytorch torch/distributed/tensor/experimental/_func_map.py local_map docstring "
LM = "pytorch/pytorch test/distributed/tensor/experimental/test_local_map.py "

row_wise = [Shard(0)]   # row-wise sharding placements on 1-d mesh
col_wise = [Shard(1)]   # col-wise sharding placements on 1-d mesh
replicate = [Replicate()]   # replicate placements on 1-d mesh


def mm_allreduce_forward(device_mesh, W, X):
    partial_sum_tensor = np.matmul(W, X)
    reduced_tensor = device_mesh.get_group().allreduce(partial_sum_tensor)
    return reduced_tensor


def mm_forward(A, B):   # no device mesh needed since we don't do collective
    return np.matmul(A, B)


def mul_forward(X, scalar):
    return np.multiply(X, scalar)


def equal_allgather_forward(device_mesh, X, Y):
    eq = np.array([np.array_equal(X, Y)])
    eq_gather = np.concatenate(device_mesh.get_group().allgather(eq))
    return bool(np.all(eq_gather))


@idiom("local_map_docstring_example", DOC + "(W col_wise @ X row_wise, mm_allreduce_forward, "
       "out Replicate); W 13 x 7, X 7 x 16", lambda: (randn(13, 7), randn(7, 16, seed=1)),
       lambda world, W, X: W @ X)
def local_map_docstring_example(mesh, W, X):
    local_mm_allreduce_forward = mt.local_map(
        mm_allreduce_forward, out_placements=[Replicate()],
        in_placements=(None, col_wise, row_wise), device_mesh=mesh)
    W_dt = mt.distribute_tensor(W, mesh, col_wise)
    X_dt = mt.distribute_tensor(X, mesh, row_wise)
    Y_dt = local_mm_allreduce_forward(mesh, W_dt, X_dt)
    return Y_dt.to_local()


@idiom("local_map_correctness_decorated", LM + "test_local_map_correctness (the decorator "
       "form); X 16 x 7 col-wise, W 7 x 12 row-wise",
       lambda: (randn(16, 7), randn(7, 12, seed=1)), lambda world, X, W: (X @ W, (1,)))
def local_map_correctness(mesh, X, W):
    @mt.local_map(out_placements=replicate, in_placements=(None, col_wise, row_wise))
    def mm_allreduce_forward_decorated(device_mesh, A, B):
        partial_sum_tensor = np.matmul(A, B)
        return device_mesh.get_group().allreduce(partial_sum_tensor)
    X_dt = mt.distribute_tensor(X, mesh, col_wise)
    W_dt = mt.distribute_tensor(W, mesh, row_wise)
    Y_dt = mm_allreduce_forward_decorated(mesh, X_dt, W_dt)
    return Y_dt.to_local(), tuple(int(p == Replicate()) for p in Y_dt.placements)


@idiom("local_map_in_placements", LM + "test_local_map_in_placements (tests 1-3: explicit "
       "in_placements, in_placements=None, None for a scalar); X 13 x 8, W 8 x 12",
       lambda: (randn(13, 8), randn(8, 12, seed=1)), lambda world, X, W: (X @ W, X @ W, X * 2.0))
def local_map_in_placements(mesh, X, W):
    X_dt = mt.distribute_tensor(X, mesh, row_wise)
    W_dt = mt.distribute_tensor(W, mesh, replicate)
    explicit = mt.local_map(mm_forward, out_placements=row_wise,
                            in_placements=(row_wise, replicate), device_mesh=mesh)
    implicit = mt.local_map(mm_forward, out_placements=row_wise, device_mesh=mesh)
    scaled = mt.local_map(mul_forward, in_placements=(row_wise, None),
                          out_placements=row_wise, device_mesh=mesh)
    return (explicit(X_dt, W_dt).full_tensor(), implicit(X_dt, W_dt).full_tensor(),
            scaled(X_dt, 2.0).full_tensor())


NO_OUT = ((TypeError, "out_placements is required"),)


@idiom("local_map_plain_tensors", LM + "test_local_map_in_placements (tests 4-5: plain tensors "
       "in, out_placements=None: the result comes back as fn returns it)",
       lambda: (randn(13, 8), randn(8, 12, seed=1)), lambda world, X, W: X @ W, refuses=NO_OUT)
def local_map_plain_tensors(mesh, X, W):
    X_dt = mt.distribute_tensor(X, mesh, row_wise)
    W_dt = mt.distribute_tensor(W, mesh, replicate)
    local_mm_forward = mt.local_map(mm_forward, out_placements=None,
                                    in_placements=(replicate, row_wise), device_mesh=mesh)
    Y_dt_local = local_mm_forward(X_dt.to_local(), W_dt.to_local())
    return mt.DTensor.from_local(Y_dt_local, mesh, row_wise).full_tensor()


@idiom("local_map_out_placements_none", LM + "test_local_map_out_placements (test 1: "
       "X.equal(Y) with out_placements=None returns a bool)",
       lambda: (randn(8, 8), randn(8, 8, seed=1)), lambda world, X, Y: (False, True),
       refuses=NO_OUT)
def local_map_out_placements(mesh, X, Y):
    X_dt = mt.distribute_tensor(X, mesh, row_wise)
    Y_dt = mt.distribute_tensor(Y, mesh, row_wise)
    local_equal_allgather_forward = mt.local_map(equal_allgather_forward, out_placements=None)
    return (local_equal_allgather_forward(mesh, X_dt, Y_dt),
            local_equal_allgather_forward(mesh, X_dt, X_dt))


def mm_all_gather_forward(device_mesh, A, B):
    local_mm_result = np.matmul(A, B)
    return np.concatenate(device_mesh.get_group().allgather(local_mm_result))


@idiom("local_map_no_dtensor_args", LM + "test_local_map_out_placements (test 2: 'directly "
       "return out if no argument is DTensor': matmul in DDP, mm_all_gather_forward, "
       "out_placements=row_wise)", lambda: (randn(4, 4, seed=2),),
       lambda world, W: np.concatenate([randn(4, 4, seed=3)] * world) @ W)
def local_map_no_dtensor_args(mesh, W):
    X = randn(4, 4, seed=3)
    local_mm_all_gather_forward = mt.local_map(
        mm_all_gather_forward, out_placements=row_wise, in_placements=(None, row_wise, replicate),
        device_mesh=mesh)
    Y = local_mm_all_gather_forward(mesh, X, W)
    return Y


def _redistribute_ref(world, X, W):
    return X @ W, "ValueError"


@idiom("local_map_redistribute_inputs", LM + "test_local_map_redistribute (X row-wise and W "
       "col-wise redistributed to in_placements; without redistribute_inputs=True a ValueError)",
       lambda: (randn(16, 7), randn(7, 13, seed=1)), _redistribute_ref)
def local_map_redistribute(mesh, X, W):
    X_dt = mt.distribute_tensor(X, mesh, row_wise)
    W_dt = mt.distribute_tensor(W, mesh, col_wise)
    allowed = mt.local_map(mm_allreduce_forward, out_placements=replicate,
                           in_placements=(None, col_wise, row_wise), device_mesh=mesh,
                           redistribute_inputs=True)
    Y_dt = allowed(mesh, X_dt, W_dt)
    refused = mt.local_map(mm_allreduce_forward, out_placements=replicate,
                           in_placements=(None, col_wise, row_wise), device_mesh=mesh,
                           redistribute_inputs=False)
    try:
        refused(mesh, X_dt, W_dt)
        raised = "no error"
    except ValueError:
        raised = "ValueError"
    return Y_dt.to_local(), raised


def _grad_placement_ref(world, X, W):
    ones = np.ones((X.shape[0], W.shape[1]))
    return [X @ W, ones @ W.T, X.T @ ones] * 2


@idiom("local_map_with_grad_placement", LM + "test_local_map_with_grad_placement (in_grad_"
       "placements ([Shard(0)], [Partial()]), loss = Y_dt.to_local().sum() as DDP; X 7 x 2 "
       "row-wise and replicated with redistribute_inputs)",
       lambda: (randn(7, 2, seed=12), randn(2, 4, seed=13)), _grad_placement_ref)
def local_map_with_grad_placement(mesh, X, W):
    out = []
    for is_in_placement_mismatch in (False, True):
        X_dt = mt.distribute_tensor(X, mesh, replicate if is_in_placement_mismatch else row_wise)
        W_dt = mt.distribute_tensor(W, mesh, replicate)
        local_mm_forward = mt.local_map(
            mm_forward, out_placements=[Shard(0)], in_placements=(row_wise, replicate),
            in_grad_placements=([Shard(0)], [Partial()]), device_mesh=mesh,
            redistribute_inputs=True)
        Y_dt = local_mm_forward(X_dt, W_dt)

        def loss(X_dt, W_dt):
            return local_mm_forward(X_dt, W_dt).to_local().sum()
        _, (gx, gw) = mt.value_and_grad(loss, argnums=(0, 1))(X_dt, W_dt)
        out += [Y_dt.full_tensor(), gx.full_tensor(), gw.full_tensor()]
    return out


def _default_grad_ref(world, X, W):
    g = 2 * (X @ W)
    return X @ W, g @ W.T, X.T @ g


@idiom("local_map_default_grad_placements", LM + "test_local_map_with_grad_placement, without "
       "in_grad_placements (mtensor's default: the forward's transposed, a replicated W's "
       "gradient Partial); X 13 x 3 row-wise, loss (Y ** 2).sum()",
       lambda: (randn(13, 3, seed=12), randn(3, 4, seed=13)), _default_grad_ref)
def local_map_default_grad_placements(mesh, X, W):
    local_mm_forward = mt.local_map(mm_forward, out_placements=[Shard(0)],
                                    in_placements=(row_wise, replicate), device_mesh=mesh)
    X_dt = mt.distribute_tensor(X, mesh, row_wise)
    W_dt = mt.distribute_tensor(W, mesh, replicate)
    _, (gx, gw) = mt.value_and_grad(
        lambda X_dt, W_dt: (local_mm_forward(X_dt, W_dt) ** 2).sum(), argnums=(0, 1))(X_dt, W_dt)
    return local_mm_forward(X_dt, W_dt).full_tensor(), gx.full_tensor(), gw.full_tensor()


def _dp_matmul_ref(world, X, W):
    ones = np.ones((X.shape[0], W.shape[1]))
    return ones @ W.T, X.T @ ones


@idiom("local_map_buggy_dp_matmul", LM + "TestLocalMapSpmdTypesMultiGPU.test_spmd_types_dp_"
       "matmul step 1 (BuggyDPMatmul: backward without the all-reduce of grad_W; torch asserts "
       "the W gradient is wrong; as mt.custom_vjp on the blocks, mtensor's transposed default "
       "reduces it); X 7 x 8 Shard(0), W 8 x 4 Replicate",
       lambda: (randn(7, 8, seed=42), randn(8, 4, seed=43)), _dp_matmul_ref)
def local_map_buggy_dp_matmul(mesh, X, W):
    @mt.custom_vjp
    def buggy_dp_matmul(X, W):
        return np.matmul(X, W)

    def forward(X, W):
        return np.matmul(X, W), (X, W)

    def backward(res, grad_output):
        X, W = res
        grad_X = np.matmul(grad_output, W.T)
        grad_W = np.matmul(X.T, grad_output)  # BUG: missing all-reduce
        return grad_X, grad_W
    buggy_dp_matmul.defvjp(forward, backward)
    buggy = mt.local_map(lambda X, W: buggy_dp_matmul(X, W), out_placements=[Shard(0)],
                         in_placements=([Shard(0)], [Replicate()]), device_mesh=mesh)
    X_dt = mt.distribute_tensor(X, mesh, [Shard(0)])
    W_dt = mt.distribute_tensor(W, mesh, [Replicate()])
    _, (gx, gw) = mt.value_and_grad(lambda X, W: buggy(X, W).to_local().sum(),
                                    argnums=(0, 1))(X_dt, W_dt)
    return gx.full_tensor(), gw.full_tensor()


def _log_softmax_ref(world, x):
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


@idiom("loss_parallel_log_softmax_local_map", "pytorch/pytorch torch/distributed/tensor/parallel/"
       "loss.py _log_softmax (the decomposition with all_reduce MAX and SUM inserted), as a "
       "local_map over class-sharded logits 5 x 13", lambda: (randn(5, 13),), _log_softmax_ref)
def loss_parallel_log_softmax(mesh, logits):
    from mpi4py import MPI

    def all_reduce(t, op, mesh):
        out = np.empty_like(t)
        mesh.get_group().Allreduce(np.ascontiguousarray(t), out, op=op)
        return out

    def _log_softmax(x, dim, mesh):
        x_max = np.amax(x, dim, keepdims=True) if x.shape[dim] else np.full(
            x.shape[:dim] + (1,), -np.inf)
        x_max = all_reduce(x_max, MPI.MAX, mesh)
        shifted = x - x_max
        shifted_sumexp = np.sum(np.exp(shifted), dim, keepdims=True)
        shifted_sumexp = all_reduce(shifted_sumexp, MPI.SUM, mesh)
        return shifted - np.log(shifted_sumexp)
    dist_input = mt.distribute_tensor(logits, mesh, placements=[Shard(1)])
    log_softmax = mt.local_map(_log_softmax, out_placements=[Shard(1)],
                               in_placements=([Shard(1)], None, None))
    return log_softmax(dist_input, 1, mesh).full_tensor()
