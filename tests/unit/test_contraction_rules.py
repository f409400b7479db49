"""Contraction rules (matmul, dot, tensordot, einsum): the einsum form of each op, the listed
choices (free labels split like the output; a contracted label split on every operand that
has it gives P(sum); partial terms times whole operands stay terms), every listed choice
simulated on ranks against numpy, and the errors naming op, shapes and placements."""
import numpy as np
import pytest
from test_pointwise_rules import PA, PS, R, arr, as_set, run_choice

from mtensor.cost.model import CostModel
from mtensor.ops import RULES, OpCall, Operand, choose
from mtensor.ops.contraction import _big, contraction, einsum_form, label_sizes
from mtensor.placement import Partial, Shard

S = {d: Shard(d) for d in range(4)}
S0, S1 = S[0], S[1]


def call_of(name, shapes, params=(), dtypes=None, mesh=(3,)):
    dtypes = dtypes or [float] * len(shapes)
    ops = tuple(Operand(tuple(s), np.dtype(t), (R,)) for s, t in zip(shapes, dtypes))
    return OpCall(name, ops, tuple(params), tuple(mesh))


def listed(name, shapes, params=(), dtypes=None):
    return as_set(RULES[name](call_of(name, shapes, params, dtypes)).choices)


def expected(nin, free=(), contracted=(), terms=("sum", "avg")):
    """Replicated, each free split ((input dims or None), output dim), each contracted split
    (input dims or None) -> P(sum), and one operand's terms times whole others."""
    def want(dims):
        return tuple(R if d is None else S[d] for d in dims)
    out = {((R,) * nin, R)}
    out |= {(want(dims), S[k]) for dims, k in free}
    out |= {(want(dims), PS) for dims in contracted}
    op = {"sum": PS, "avg": PA}
    out |= {(tuple(op[t] if i == j else R for i in range(nin)), op[t])
            for t in terms for j in range(nin)}
    return out


def numpy_of(name, params):
    if name == "tensordot":
        return lambda *v: np.tensordot(*v, axes=params)
    if name == "einsum":
        return lambda *v: np.einsum(params[0], *v)
    return getattr(np, name)


def check_all(name, values, params=()):
    ref = numpy_of(name, params)
    strategy = RULES[name](call_of(name, [v.shape for v in values], params,
                                   [v.dtype for v in values]))
    for c in strategy.choices:
        assert run_choice(name, values, c, params, expected=lambda: ref(*values)), c
    return strategy


def test_matmul_2d():
    # i free on a, k free on b, j contracted on both
    assert listed("matmul", [(4, 6), (6, 5)]) == expected(
        2, free=[((0, None), 0), ((None, 1), 1)], contracted=[(1, 0)])


def test_matmul_batch_broadcast_and_1d():
    # label a lives on a only; batch label b is 1 on a: a is used whole along it
    assert listed("matmul", [(2, 1, 5, 6), (3, 6, 4)]) == expected(
        2, free=[((0, None), 0), ((None, 0), 1), ((2, None), 2), ((None, 2), 3)],
        contracted=[(3, 1)])
    # a 1-D left operand loses its dim: output (batch, k)
    assert listed("matmul", [(6,), (2, 6, 4)]) == expected(
        2, free=[((None, 0), 0), ((None, 2), 1)], contracted=[(0, 1)])
    assert listed("matmul", [(4, 6), (6,)]) == expected(
        2, free=[((0, None), 0)], contracted=[(1, 0)])
    assert listed("matmul", [(6,), (6,)]) == expected(2, contracted=[(0, 0)])


def test_repeated_labels_are_never_split():
    # the diagonal needs both of its dims whole; its terms still add up (linear)
    assert listed("einsum", [(5, 5)], ("ii->i",)) == expected(1)
    assert listed("einsum", [(5, 5)], ("ii",)) == expected(1)
    # a trace against a free label: j may split, i may not
    assert listed("einsum", [(4, 4, 3)], ("iij->j",)) == expected(1, free=[((2,), 0)])
    # diag(A) * b: b split on i while A stays whole would multiply a block by the whole diagonal
    assert listed("einsum", [(4, 4), (4,)], ("ii,i->i",)) == expected(2)


def test_contracted_label_of_one_operand():
    # summing out i of a alone: split i gives partial sums; b is used whole for it
    assert listed("einsum", [(3, 4), (4, 5)], ("ij,jk->k",)) == expected(
        2, free=[((None, 1), 0)], contracted=[(0, None), (1, 0)])


def test_a_label_broadcast_on_one_operand_splits_the_other_only():
    got = listed("einsum", [(1, 4), (3, 4)], ("...i,...i->...i",))
    assert got == expected(2, free=[((None, 0), 0), ((1, 1), 1)])


def test_terms_need_numbers_of_one_dtype():
    ints = listed("matmul", [(4, 6), (6, 5)], dtypes=["i8", "i8"])
    assert ints == expected(2, free=[((0, None), 0), ((None, 1), 1)], contracted=[(1, 0)],
                            terms=("sum",))
    mixed = listed("matmul", [(4, 6), (6, 5)], dtypes=["f4", "f8"])
    assert mixed == expected(2, free=[((0, None), 0), ((None, 1), 1)], contracted=[(1, 0)],
                             terms=())
    flags = listed("matmul", [(4, 6), (6, 5)], dtypes=["?", "?"])
    assert not any(isinstance(p, Partial) for ins, _ in flags for p in ins)


SOUND = [
    ("matmul", [arr(4, 6), arr(6, 5, seed=1)], ()),
    ("matmul", [arr(2, 1, 5, 6), arr(3, 6, 4, seed=1)], ()),
    ("matmul", [arr(6), arr(2, 6, 4, seed=1)], ()),
    ("matmul", [arr(4, 6), arr(6, seed=1)], ()),
    ("matmul", [arr(7), arr(7, seed=1)], ()),
    ("matmul", [arr(4, 6, dtype="i8"), arr(6, 5, seed=1, dtype="i8")], ()),
    ("matmul", [arr(4, 6, dtype="f4"), arr(6, 5, seed=1)], ()),
    ("dot", [arr(4, 6), arr(2, 6, 3, seed=1)], ()),
    ("dot", [arr(6), arr(6, 3, seed=1)], ()),
    ("dot", [arr(3, 5), arr(5, seed=1)], ()),
    ("dot", [arr(5), arr(5, seed=1)], ()),
    ("tensordot", [arr(3, 4, 5), arr(4, 3, 2, seed=1)], ((0, 1), (1, 0))),
    ("tensordot", [arr(3, 4, 5), arr(5, 2, seed=1)], ((2,), (0,))),
    ("einsum", [arr(5, 5)], ("ii->i",)),
    ("einsum", [arr(4, 4, 3)], ("iij->j",)),
    ("einsum", [arr(3, 4), arr(4, 5, seed=1)], ("ij,jk->k",)),
    ("einsum", [arr(1, 4), arr(3, 4, seed=1)], ("...i,...i->...i",)),
    ("einsum", [arr(2, 3, 4), arr(4, 5, seed=1)], ("...j,jk",)),
    ("einsum", [arr(3, 4), arr(4, 5, seed=1), arr(5, 2, seed=2)], ("ij,jk,kl->il",)),
    ("einsum", [arr(3, 4)], ("ba",)),
    ("einsum", [arr(4, 3)], ("ij->",)),
    ("einsum", [arr(4, 4), arr(4, seed=1)], ("ii,i->i",)),
    ("einsum", [arr(2, 3), arr(3, 4, seed=1)], ("Xi,ij",)),
    ("einsum", [arr(2, 3), arr(3, seed=1)], ("...a,a",)),
    ("tensordot", [arr(3, 4), arr(4, 5, 2, seed=1)], ((1,), (0,))),
    ("matmul", [arr(*(1,) * 9 + (2, 3)), arr(3, 4, seed=1)], ()),
]


@pytest.mark.parametrize("name, values, params", SOUND)
def test_every_listed_choice_simulates(name, values, params):
    strategy = check_all(name, values, params)
    assert strategy.out_shape == np.shape(numpy_of(name, params)(*values))


@pytest.mark.parametrize("name, shapes, params, form", [
    ("matmul", [(2, 1, 5, 6), (3, 6, 4)], (), (("abij", "bjk"), "abik", "ab")),
    ("matmul", [(6,), (2, 6, 4)], (), (("j", "ajk"), "ak", "a")),
    ("matmul", [(5, 6), (6, 4)], (), (("ij", "jk"), "ik", "")),
    ("matmul", [(5, 6), (6,)], (), (("ij", "j"), "i", "")),
    ("dot", [(4, 6), (2, 6, 3)], (), (("ab", "cbe"), "ace", "")),
    ("dot", [(6,), (6,)], (), (("a", "a"), "", "")),
    ("dot", [(6,), (6, 3)], (), (("a", "ac"), "c", "")),
    ("tensordot", [(3, 4, 5), (4, 3, 2)], ((0, 1), (1, 0)), (("abc", "baf"), "cf", "")),
    ("einsum", [(2, 3, 4), (4, 5)], ("...j,jk",), (("abj", "jk"), "abk", "ab")),
    ("einsum", [(2, 3, 4), (3, 4, 5)], ("...j, ...jk ->...k",),
     (("abj", "bjk"), "abk", "ab")),
    ("einsum", [(3, 4)], ("ba",), (("ba",), "ab", "")),
    ("einsum", [(3, 4), (4, 2)], ("ij,jk",), (("ij", "jk"), "ik", "")),
    ("einsum", [(3, 3)], ("ii",), (("ii",), "", "")),
    # nine batch dims: labels a..h, then l (i, j and k name the matrix dims)
    ("matmul", [(1,) * 9 + (2, 3), (3, 4)], (), (("abcdefghlij", "jk"), "abcdefghlik",
                                                 "abcdefghl")),
    # the ellipsis takes labels the subscripts do not use
    ("einsum", [(2, 3), (3,)], ("...a,a",), (("ba", "a"), "b", "b")),
    # implicit output: labels seen once, in ASCII order (uppercase first)
    ("einsum", [(2, 3), (3, 4)], ("Xi,ij",), (("Xi", "ij"), "Xj", "")),
    ("tensordot", [(3, 4), (4, 5, 2)], ((1,), (0,)), (("ab", "bde"), "ade", "")),
])
def test_einsum_forms(name, shapes, params, form):
    """Hand-worked: matmul labels batch dims from "a" skipping i, j, k and right-aligns them;
    dot contracts a's last dim with b's second to last; implicit einsum output is the
    ellipsis, then the labels seen once, sorted."""
    inputs, output, broadcast = einsum_form(call_of(name, shapes, params))
    assert (tuple(inputs), output, broadcast) == form


def test_kernels_are_numpys():
    a, b = arr(4, 6), arr(6, 5, seed=1)
    assert RULES["matmul"](call_of("matmul", [(4, 6), (6, 5)])).kernel is np.matmul
    assert RULES["dot"](call_of("dot", [(4, 6), (6, 5)])).kernel is np.dot
    k = RULES["tensordot"](call_of("tensordot", [(4, 6), (6, 5)], ((1,), (0,)))).kernel
    assert np.array_equal(k(a, b), a @ b)
    k = RULES["einsum"](call_of("einsum", [(4, 6), (6, 5)], ("ij,jk->ki",))).kernel
    assert np.array_equal(k(a, b), (a @ b).T)
    big = arr(200, 100), arr(100, 90, seed=1)
    assert np.allclose(k(*big), (big[0] @ big[1]).T)


def test_big_einsums_go_through_blas():
    """Over 16384 elements in all, with at least two operands (see ``_big``)."""
    assert not _big([np.zeros(16000), np.zeros(384)])
    assert _big([np.zeros(16000), np.zeros(385)])
    assert not _big([np.zeros(20000)])
    assert _big([np.zeros(1), np.zeros(16384)])


def test_label_sizes_broadcast_only_where_allowed():
    c = call_of("einsum", [(1, 4), (3, 4)], ("...i,...i->i",))
    assert label_sizes(c, ("ai", "ai"), "a") == {"a": 3, "i": 4}
    assert label_sizes(call_of("einsum", [(3, 4), (1, 4)]), ("ai", "ai"), "a") == {
        "a": 3, "i": 4}
    with pytest.raises(ValueError, match=r"dim 'a' has size 1 on one operand and 3 on another"):
        label_sizes(c, ("ai", "ai"))
    # without broadcast labels, a size-1 dim is a mismatch like any other
    x = call_of("einsum", [(1, 4), (3, 4)])
    with pytest.raises(ValueError, match=r"dim 'X' has size 1 on one operand and 3"):
        label_sizes(x, ("Xi", "Xi"))
    with pytest.raises(ValueError, match=r"dim 'X' has size 1 on one operand and 3"):
        contraction(x, ("Xi", "Xi"), "i", np.einsum)
    with pytest.raises(ValueError, match=r"dim 'i' has size 4 on one operand and 5"):
        label_sizes(call_of("einsum", [(2, 4), (2, 5)]), ("ai", "ai"), "a")


@pytest.mark.parametrize("name, shapes, params, message", [
    ("matmul", [(8, 6), (5, 4)], (),
     r"^matmul of \(8, 6\) \[R\], \(5, 4\) \[R\]: inner dims differ \(6 != 5\); make the last "
     r"dim of the first operand equal the contracted dim of the second$"),
    ("matmul", [(3, 6), (4,)], (), r"^matmul of \(3, 6\) \[R\], \(4,\) \[R\]: inner dims "
                                   r"differ \(6 != 4\)"),
    ("matmul", [(3, 6, 2), (5, 4)], (), r"inner dims differ \(2 != 5\)"),
    ("matmul", [(), (4,)], (), r"^matmul of \(\) \[R\], \(4,\) \[R\]: matmul does not take "
                               r"0-d operands; use multiply \(\*\) instead$"),
    ("matmul", [(4,), ()], (), r"0-d operands"),
    ("matmul", [(2, 5, 6), (3, 6, 4)], (), r"^matmul of .*: dim 'a' has size 2 on one operand "
                                           r"and 3 on another; make the contracted and shared "
                                           r"dims agree$"),
    ("einsum", [(3, 4), (4, 5)], ("ij,jk,kl->il",),
     r"^einsum of \(3, 4\) \[R\], \(4, 5\) \[R\]: subscripts 'ij,jk,kl->il' name 3 "
     r"operands; give one subscript per operand$"),
    ("einsum", [(3, 4, 2), (4, 5)], ("ij,jk->ik",),
     r"^einsum of \(3, 4, 2\) \[R\], \(4, 5\) \[R\]: subscripts ij,jk give 2 labels for an "
     r"operand with 3 dims; give one label per dim$"),
    ("einsum", [(3, 4), (5, 6)], ("ij,jk->ik",), r"dim 'j' has size 4 on one operand and 5"),
    ("dot", [(3, 4), (5, 6)], (), r"^dot of .*dim 'b' has size 4 on one operand and 5"),
    ("tensordot", [(3, 4), (5, 6)], ((1,), (0,)), r"dim 'b' has size 4 on one operand and 5"),
])
def test_errors_name_op_shapes_placements(name, shapes, params, message):
    with pytest.raises(ValueError, match=message):
        RULES[name](call_of(name, shapes, params))


def test_megatron_choices_cost_nothing():
    """Column-parallel then row-parallel: S(1) @ S(0) leaves partial sums without moving
    data, so the chooser takes P(sum) over gathering either operand."""
    ops = (Operand((8, 16), np.dtype(float), (S1,)), Operand((16, 4), np.dtype(float), (S0,)))
    call = OpCall("matmul", ops, (), (4,))
    assert choose(call, RULES["matmul"](call).choices, CostModel())[1:] == ((PS,), 0)
