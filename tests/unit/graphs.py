"""Hand-made traced graphs for the tests of the overlap passes (pure planning: no MPI)."""
from types import SimpleNamespace

import numpy as np
from hypothesis import strategies as st

from mtensor.trace_compile.graph import Node

MESH = object()
KIB = 1024


def coll(kind="all_reduce", nbytes=4 * KIB, mesh_dim=0, dtype=np.float64, op="sum"):
    """What a collective node's ``fn`` tells the passes: its kind, link, dtype, op, bytes
    and (for the cost model) its ranks and result shape."""
    return SimpleNamespace(kind=kind, mesh=MESH, mesh_dim=mesh_dim, dtype=np.dtype(dtype),
                           op=op, bucket_bytes=nbytes, nbytes=nbytes, n=2,
                           out_shape=(2 * nbytes // np.dtype(dtype).itemsize,))


class G:
    """A graph under construction: slots are numbered as nodes make them, after the
    ``ninputs`` inputs; collectives move ``nbytes`` unless told otherwise."""

    def __init__(self, ninputs=1, nbytes=4 * KIB):
        self.nodes, self.next, self.nbytes = [], ninputs, nbytes

    def _out(self):
        self.next += 1
        return self.next - 1

    def compute(self, *ins, phase="forward", seconds=0.0):
        out = self._out()
        self.nodes.append(Node("compute", "f", None, ins, (out,), seconds,
                               where=("", phase)))
        return out

    def effect(self, *ins):
        self.nodes.append(Node("effect", "update", None, ins, (), 0.0))

    def collective(self, src, nbytes=None, phase="forward", **kw):
        out = self._out()
        fn = coll(nbytes=self.nbytes if nbytes is None else nbytes, **kw)
        self.nodes.append(Node("collective", fn.kind, fn, (src,), (out,), 0.0,
                               where=("", phase)))
        return out


@st.composite
def random_graphs(draw, nodes=30, kinds=("all_reduce", "all_gather", "all_to_all"),
                  kib=64, cap_kib=256):
    """Random step-like graphs (compute, collectives of ``kinds`` moving 1..``kib`` KiB, and
    effects, over earlier slots), with a cap of 1..``cap_kib`` KiB and an overlap flag."""
    g = G(ninputs=2)
    for _ in range(draw(st.integers(1, nodes))):
        what = draw(st.sampled_from(["compute", "compute", "collective", "effect"]))
        src = draw(st.integers(0, g.next - 1))
        if what == "compute":
            g.compute(src, draw(st.integers(0, g.next - 1)))
        elif what == "effect":
            g.effect(src)
        else:
            g.collective(src, draw(st.integers(1, kib)) * KIB, kind=draw(st.sampled_from(kinds)))
    return g.nodes, draw(st.integers(1, cap_kib)) * KIB, draw(st.booleans())
