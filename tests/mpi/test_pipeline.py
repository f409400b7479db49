"""mt.pipeline at every size: a residual tanh MLP with Megatron's tp splits, its layers stacked
and split over pp, its embedding and head shared; the pipelined loss and every stage's
gradients against the unpipelined value_and_grad on the same ranks (GPipe, 1F1B and
interleaved 1F1B, eager and compiled), the messages counted, the (dp, tp) sub-mesh, pp laid
across nodes, and bad calls refused on every rank before any message moves."""
import numpy as np
import pytest
from mpi_helpers import WORLD, assert_all_ranks, assert_each_raises, host

import mtensor as mt
from mtensor import Partial, Replicate, Shard

L, D, C, BATCH = 4, 6, 3, 48


def pipeline_meshes():
    """(pp, dp, tp) shapes of this world: every pp that divides it, tp 2 where it fits."""
    n, out = WORLD.size, []
    for pp in [p for p in (1, 2, 3, 4, 8) if n % p == 0]:
        rest = n // pp
        out.append((pp, rest, 1))
        if rest % 2 == 0 and pp > 1:
            out.append((pp, rest // 2, 2))
    return [(2, 2, 2), (4, 1, 2)] if n == 8 else out   # 8 ranks on 2 cores: the two richest


def make_mesh(shape):
    return mt.init_device_mesh(shape, mesh_dim_names=("pp", "dp", "tp"))


def arrays(seed=0):
    rng = np.random.default_rng(seed)
    return {"a": rng.normal(size=(L, D, 2 * D)) / D, "b": rng.normal(size=(L, 2 * D, D)) / D,
            "emb": rng.normal(size=(D, D)), "head": rng.normal(size=(D, C))}


def params_on(mesh, virtual=1, seed=0):
    """The stacks split over pp (with ``virtual`` chunks first: (virtual, L/virtual, ...))."""
    full = arrays(seed)
    if virtual > 1:
        full = {k: v.reshape((virtual, L // virtual) + v.shape[1:]) if k in "ab" else v
                for k, v in full.items()}
    a, s = (1, 1) if virtual > 1 else (0, 0)
    place = {"a": [Shard(a), Replicate(), Shard(2 + s)], "b": [Shard(a), Replicate(), Shard(1 + s)],
             "emb": [Replicate()] * 3, "head": [Replicate()] * 3}
    return {k: mt.distribute_tensor(v, mesh, place[k]) for k, v in full.items()}


def stage(p, x, where):
    h = x @ p["emb"] if where.first else x
    for a, b in zip(p["a"], p["b"]):
        h = h + np.tanh(h @ a) @ b
    return h


def loss(p, h, y):
    r = h @ p["head"] - y
    return (r * r).mean()


def unpipelined(p, x, y):
    """The same model on stacks every rank holds whole."""
    h = x @ p["emb"]
    a, b = p["a"], p["b"]
    if a.ndim == 4:
        a, b = a.reshape((L,) + a.shape[2:]), b.reshape((L,) + b.shape[2:])
    for i in range(L):
        h = h + np.tanh(h @ a[i]) @ b[i]
    return loss(p, h, y)


def batches(mesh, m, seed=1):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(BATCH, D)), rng.normal(size=(BATCH, C))
    put = lambda v: mt.distribute_tensor(v, mesh, [Replicate(), Shard(0), Replicate()])  # noqa
    return [put(v) for v in np.split(x, m)], [put(v) for v in np.split(y, m)], put(x), put(y)


def reference(params, x, y):
    whole = {k: v.redistribute(v.device_mesh, [Replicate(), *v.placements[1:]])
             for k, v in params.items()}
    return mt.value_and_grad(unpipelined)(whole, x, y)


def assert_same(value, grads, want_value, want_grads, params, exact=False):
    close = (lambda a, b: np.array_equal(a, b)) if exact else (
        lambda a, b: np.allclose(a, b, rtol=1e-10, atol=1e-13))
    assert_all_ranks(close(float(value), float(want_value)), f"loss {float(value)} "
                                                              f"{float(want_value)}")
    for k, g in grads.items():
        assert g.placements == params[k].placements, (k, g.placements)
        assert_all_ranks(close(host(g.full_tensor()), host(want_grads[k].full_tensor())),
                         f"gradient of {k}")


@pytest.mark.parametrize("schedule,m", [("gpipe", 3), ("1f1b", 4), ("1f1b", 1),
                                        ("interleaved_1f1b", None)])
def test_every_stage_gets_the_unpipelined_gradients(schedule, m):
    for shape in pipeline_meshes():
        mesh = make_mesh(shape)
        virtual = 2 if schedule == "interleaved_1f1b" else 1
        m_here = 2 * shape[0] if m is None else m
        params = params_on(mesh, virtual)
        xs, ys, x, y = batches(mesh, m_here)
        pipe = mt.pipeline.value_and_grad(stage, loss, mesh, schedule=schedule, virtual=virtual)
        value, grads = pipe(params, xs, ys)
        assert value.placements[0] == Partial("sum") and value.dtype == np.float64
        want_value, want_grads = reference(params, x, y)
        assert_same(value, grads, want_value, want_grads, params)


def test_a_compiled_pipelined_training_step_replays_the_eager_one_bit_for_bit():
    for shape in pipeline_meshes():
        mesh = make_mesh(shape)
        pipe = mt.pipeline.value_and_grad(stage, loss, mesh, schedule="1f1b")

        def train(params, xs, ys):
            value, grads = pipe(params, xs, ys)
            mt.optim.sgd(params, grads, 0.1)
            return value

        eager, compiled = params_on(mesh), params_on(mesh)
        step = mt.compile(train)
        for i in range(3):
            xs, ys, _, _ = batches(mesh, 2 * shape[0], seed=10 + i)
            want, got = float(train(eager, xs, ys)), float(step(compiled, xs, ys))
            assert_all_ranks(want == got, f"{shape} step {i}: {got} != {want}")
        for k in eager:
            assert_all_ranks(np.array_equal(host(eager[k].full_tensor()),
                                            host(compiled[k].full_tensor())), k)
        assert step.trace_count() == 1


def test_stage_functions_may_be_a_list_and_the_messages_are_counted():
    pp = WORLD.size if WORLD.size <= 4 else 4
    mesh = make_mesh((pp, WORLD.size // pp, 1))

    def first(p, x):
        return stage(p, x, mt.pipeline.Stage(0, pp, range(0)))

    def later(p, x):
        return stage(p, x, mt.pipeline.Stage(1, pp, range(0)))
    params = params_on(mesh)
    m = 3
    xs, ys, x, y = batches(mesh, m)
    pipe = mt.pipeline.value_and_grad([first] + [later] * (pp - 1), loss, mesh)
    with mt.CommDebugMode() as comm:
        value, grads = pipe(params, xs, ys)
    r = mesh.get_coordinate()[0]
    counts = comm.get_comm_counts()
    sends = m * ((r < pp - 1) + (r > 0))
    assert counts.get("send", 0) == sends and counts.get("recv", 0) == sends, counts
    inside = [rec for rec in comm.log if rec.collective == "all_reduce" and rec.region]
    assert not inside, inside        # the dp sums wait for the end: once per gradient
    assert counts.get("all_reduce", 0) <= 2 * len(params) + 1, counts   # dp and pp, the loss
    assert_same(value, grads, *reference(params, x, y), params)


def test_the_stage_mesh_is_the_dp_tp_sub_mesh():
    for shape in pipeline_meshes():
        mesh = make_mesh(shape)
        sub = mesh["dp", "tp"]
        assert sub.shape == shape[1:] and sub.mesh_dim_names == ("dp", "tp")
        assert sub.get_coordinate() == mesh.get_coordinate()[1:] and sub is mesh["dp", "tp"]
        members = sub.comm.allgather(mesh.get_coordinate()[0])
        assert members == [mesh.get_coordinate()[0]] * sub.size()
        assert sub.communicator("tp") is mesh.communicator("tp")
        x = mt.distribute_tensor(np.arange(8.0), sub, [Shard(0), Replicate()])
        assert_all_ranks(np.array_equal(host(x.full_tensor()), np.arange(8.0)), "sub-mesh")


def test_pp_is_laid_across_nodes_and_each_stage_inside_one(monkeypatch):
    if WORLD.size != 8:
        pytest.skip("two fake nodes of 4 ranks")
    monkeypatch.setenv("MTENSOR_NODE_OF_RANK", ",".join(str(r % 2) for r in range(8)))
    mesh = mt.init_device_mesh((2, 2, 2), mesh_dim_names=("pp", "dp", "tp"), comm=WORLD.Dup())
    assert mesh.intra_node == (False, True, True)
    assert mesh["dp", "tp"].intra_node == (True, True)
    assert len(set(mesh["dp", "tp"].nodes)) == 1


def test_bad_calls_are_refused_on_every_rank():
    mesh = make_mesh((WORLD.size, 1, 1))
    params = params_on(mesh)
    xs, ys, x, _ = batches(mesh, 2)
    pipe = mt.pipeline.value_and_grad(stage, loss, mesh)
    flat = mt.init_device_mesh((WORLD.size,), mesh_dim_names=("pp",))
    split = mt.distribute_tensor(np.zeros((6, D)), mesh, [Shard(0), Replicate(), Replicate()]) \
        if WORLD.size > 1 else None
    cases = {
        "no pp dim": (lambda: mt.pipeline.value_and_grad(stage, loss, mesh, dim="stages"),
                      ValueError, "has no dim named 'stages'"),
        "pp only": (lambda: mt.pipeline.value_and_grad(stage, loss, flat), ValueError,
                    "has only the pipeline dim"),
        "schedule": (lambda: mt.pipeline.value_and_grad(stage, loss, mesh, schedule="zb"),
                     ValueError, "unknown schedule 'zb'"),
        "counts": (lambda: pipe(params, xs, ys[:1]), ValueError, "one target per micro-batch"),
        "partial param": (lambda: pipe({**params, "emb": mt.DTensor.from_local(
            np.zeros((D, D)), mesh, [Partial(), Replicate(), Replicate()], shape=(D, D))},
            xs, ys), ValueError, "is Partial"),
        "stacks differ": (lambda: pipe({**params, "a": mt.distribute_tensor(
            np.zeros((L + 1, D, 2 * D)), mesh, [Shard(0), Replicate(), Replicate()])}, xs, ys),
            ValueError, "stack different numbers of layers"),
        "stage count": (lambda: mt.pipeline.value_and_grad([stage] * (WORLD.size + 1), loss,
                                                           mesh), ValueError, "stage functions"),
        "under a tape": (lambda: mt.value_and_grad(lambda p: pipe(p, xs, ys)[0])(params),
                         TypeError, "takes its own gradients"),
    }
    if split is not None:
        cases["batch split over pp"] = (lambda: pipe(params, [split, split], ys), ValueError,
                                        "replicated over its pipeline dim")
    assert_each_raises(cases)


def test_a_one_stage_pipeline_raises_what_its_stage_raises():
    mesh = make_mesh((1, WORLD.size, 1))
    xs, ys, _, _ = batches(mesh, 2)
    pipe = mt.pipeline.value_and_grad(lambda p, x, where: 3.0, loss, mesh)
    assert_each_raises({"not a DTensor": (lambda: pipe(params_on(mesh), xs, ys), TypeError,
                                          "must return one DTensor")})


def test_each_stage_timeline_and_the_bubble_eager_and_compiled():
    pp = WORLD.size if WORLD.size <= 4 else 4
    mesh = make_mesh((pp, WORLD.size // pp, 1))
    pipe = mt.pipeline.value_and_grad(stage, loss, mesh, schedule="gpipe")
    params = params_on(mesh)
    m = 4
    xs, ys, _, _ = batches(mesh, m)

    def train(p, xs, ys):
        value, grads = pipe(p, xs, ys)
        mt.optim.sgd(p, grads, 0.0)
        return value
    float(train(params, xs, ys))
    step = mt.compile(train)
    for _ in range(2):
        float(step(params, xs, ys))
    for source in (pipe, step):
        report = mt.pipeline.timelines(source)
        assert [t.rank for t in report.stages] == list(range(pp))
        for t in report.stages:
            labels = {label for label, kind, _, _ in t.spans if kind in ("forward", "backward")}
            assert len(labels) == 2 * m, labels          # every action of the stage, once
            assert 0 <= t.idle_share < 1 and t.busy > 0
        assert 0 <= report.measured_bubble < 1
        want = (pp - 1) / (m + pp - 1)
        assert 0 <= report.predicted_bubble() < 1
        assert set(report.durations()) == {a for row in report.schedule.actions for a in row}
        text = str(report)
        assert text.count("|") == 2 * pp and f"= {100 * want:.1f}%" in text
    bill = str(step.explain())
    assert "pipeline stage timeline: rank" in bill and "the schedule predicts" in bill
    with pytest.raises(TypeError, match="neither a Pipeline"):
        mt.pipeline.timelines(mt.compile(lambda x: x + 1))


def test_a_partial_tensors_reduced_twin_is_copied_inside_a_compiled_step():
    """relayout of a Partial tensor an op already reduced copies the reduced twin: while
    tracing that copy is a node of the graph, not a constant (a pipeline stage's Partial
    cotangent, read by two products, hit this)."""
    mesh = mt.init_device_mesh((WORLD.size,))

    def f(x):
        x = x * 2.0                                       # still Partial, made by the step
        y = np.exp(x)                                     # reads x whole: its twin
        return y + x.redistribute(x.device_mesh, [Replicate()])

    step = mt.compile(f)
    for seed in range(3):
        terms = np.random.default_rng([seed, WORLD.rank]).normal(size=(4, 3))
        x = mt.DTensor.from_local(terms, mesh, [Partial()], shape=(4, 3))
        want, got = host(f(x).full_tensor()), host(step(x).full_tensor())
        assert_all_ranks(np.array_equal(want, got), f"call {seed}")
