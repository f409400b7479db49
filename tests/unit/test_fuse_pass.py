"""The GPU fusion pass (``trace_compile.passes.fuse``) on hand-made graphs of the strict fake
CuPy's blocks (no MPI): elementwise trees become one generated kernel whose results equal
the separate ufuncs' bit for bit (the fake runs the kernel's source with numpy), in float64
and float32; values read twice, other dtypes, non-finite constants and host graphs stay as
they are.  That nvcc compiles the source, and what it saves, only a GPU run shows."""
import math
from types import SimpleNamespace

import numpy as np
import pytest
from test_graph_passes import B, run

from mtensor.device import arrays as device
from mtensor.testing import fakecupy
from mtensor.trace_compile.passes import fuse

GPU = SimpleNamespace(device_type="cuda")
C = math.sqrt(2 / math.pi)


def on_gpu(a):
    device.set_module("cuda", "mtensor.testing.fakecupy")
    return device.to_device(a, "cuda")


def gelu_graph(x):
    """GPT-2's tanh GELU as lm_model writes it: nine ufuncs on one input."""
    b = B(x)
    half = b.op("multiply", np.multiply, b.const(0.5), 0)
    cube = b.op("multiply", np.multiply, b.op("multiply", np.multiply, 0, 0), 0)
    inner = b.op("add", np.add, 0, b.op("multiply", np.multiply, b.const(0.044715), cube))
    t = b.op("tanh", np.tanh, b.op("multiply", np.multiply, b.const(C), inner))
    out = b.op("multiply", np.multiply, half, b.op("add", np.add, b.const(1), t))
    graph = b.graph(out)
    graph.mesh = GPU
    return graph


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_gelu_becomes_one_kernel_with_the_ufuncs_bits(dtype):
    x = on_gpu(np.linspace(-3, 3, 24, dtype=dtype).reshape(4, 6))
    graph = gelu_graph(x)
    fused, counts = fuse.run(graph)
    assert counts == {"kernels": 1, "ops_fused": 9} and len(fused.nodes) == 1
    node = fused.nodes[0]
    assert node.name.startswith("fused(multiply,") and node.fn.options == ("--fmad=false",)
    assert ("float x0" if dtype is np.float32 else "double x0") in node.fn.in_params
    launches = fakecupy.stats.kernels
    got = run(fused, x)[0]
    assert fakecupy.stats.kernels == launches + 1          # one launch, where nine were
    want = run(graph, x)[0]
    assert fakecupy.stats.kernels == launches + 10
    assert type(got) is fakecupy.ndarray and got.dtype == dtype
    assert np.array_equal(device.to_host(got), device.to_host(want))


def test_fast_fusion_lets_nvcc_contract():
    x = on_gpu(np.ones((2, 3)))
    fused, _ = fuse.run(gelu_graph(x), exact=False)
    assert fused.nodes[0].fn.options == ()


def test_a_value_read_twice_splits_the_chains():
    x = on_gpu(np.linspace(0.1, 2, 6))
    b = B(x)
    e = b.op("exp", np.exp, 0)
    shared = b.op("multiply", np.multiply, e, e)           # read by two nodes below
    left = b.op("add", np.add, b.op("sqrt", np.sqrt, shared), 0)
    right = b.op("negative", np.negative, b.op("tanh", np.tanh, shared))
    graph = b.graph(b.op("subtract", np.subtract, left, right))
    graph.mesh = GPU
    fused, counts = fuse.run(graph)
    assert counts["kernels"] == 2 and len(fused.nodes) == 2
    assert np.array_equal(device.to_host(run(fused, x)[0]), device.to_host(run(graph, x)[0]))


def test_what_stays_apart():
    x = on_gpu(np.linspace(0.1, 2, 6))
    b = B(x, on_gpu(np.arange(6, dtype=np.float32)))
    mixed = b.op("add", np.add, b.op("exp", np.exp, 0), 1)          # float64 + float32
    inf = b.op("maximum", np.maximum, b.op("exp", np.exp, 0), b.const(-np.inf))
    ninf = b.op("add", np.add, b.op("tanh", np.tanh, 0), b.const(-np.inf))
    graph = b.graph(mixed, inf, ninf)
    graph.mesh = GPU
    assert fuse.run(graph)[1] == {}
    host = B(np.linspace(0.1, 2, 6))
    host_graph = host.graph(host.op("tanh", np.tanh, host.op("exp", np.exp, 0)))
    host_graph.mesh = SimpleNamespace(device_type="cpu")
    assert fuse.run(host_graph) == (host_graph, {})


def test_the_fake_kernel_refuses_what_nvcc_would():
    with pytest.raises(ValueError, match="not declared"):
        fakecupy.ElementwiseKernel("double x0", "double out0", "out0 = pow(x0, 2.0);", "k")
    with pytest.raises(ValueError, match="cannot read"):
        fakecupy.ElementwiseKernel("double x0", "double out0", "out0 = x0 ? 1 : 2;", "k")
    k = fakecupy.ElementwiseKernel("double x0, double x1", "double out0",
                                   "double t0 = x0 * 0.5; out0 = t0 + x1;", "k")
    with pytest.raises(TypeError, match="Unsupported type"):
        k(np.ones(3), np.ones(3))


def test_the_kernel_lays_its_output_out_as_the_ops_did():
    """On a transposed block the ufuncs' results keep its axis order (numpy's and CuPy's
    order "K"), and so does the kernel's: a later reduction adds in the same order."""
    x = on_gpu(np.linspace(-1, 1, 12).reshape(3, 4)).T
    b = B(x)
    graph = b.graph(b.op("tanh", np.tanh, b.op("multiply", np.multiply, 0, b.const(2.0))))
    graph.mesh = GPU
    fused, counts = fuse.run(graph)
    got, want = run(fused, x)[0], run(graph, x)[0]
    assert counts["kernels"] == 1 and got.strides == want.strides != (32, 8)
    assert np.array_equal(device.to_host(got), device.to_host(want))
