"""Two-operand contractions as one GEMM on 2-D views (``ops.gemm``): which subscripts take
it, and that it gives numpy's einsum on contiguous and strided blocks (no MPI)."""
import numpy as np
import pytest

from mtensor.ops.gemm import gemm_kernel, gemm_plan

GEMM = ["btd,dhk->bhtk", "aik,jk->aij", "aik,aij->jk", "ij,kj->ik", "i,i->", "ij,j->i",
        "bik,k->bi", "kb,kc->bc", "btd,dhk->btkh", "ijk,jk->i", "ij,kl->ijkl",
        # interleaved or reordered contracted labels: an operand copied into GEMM order
        "bhtk,btd->dhk", "bhtk,dhk->btd", "btd,bhtk->hkd", "ijk,ikl->jl", "ijk,kj->i"]
NUMPY = ["ij,jk->ik", "abik,abjk->abij", "ii,ij->j", "ij,jk->k"]
STACKED = ["abik,abjk->abij", "abik,abij->abjk", "abki,abjk->abji", "bik,bkj->bij",
           "abik,abkj->abji"]
NOT_STACKED = ["abik,bajk->abij", "abik,abjk->abik", "abik,abjk->baij", "abii,abjk->abij",
               "abik,abjl->abij"]


def _einsum(spec):
    return lambda a, b: np.einsum(spec, a, b)


def _shapes(spec, rng):
    ins, _ = spec.split("->")
    size = {c: int(rng.integers(1, 5)) for c in set(ins.replace(",", ""))}
    return [tuple(size[c] for c in s) for s in ins.split(",")]


@pytest.mark.parametrize("spec", GEMM)
def test_gemm_subscripts_give_numpys_einsum(spec):
    rng = np.random.default_rng(0)
    ins, out = spec.split("->")
    assert gemm_plan(ins.split(","), out) is not None
    kernel = gemm_kernel(ins.split(","), out, _einsum(spec))
    for _ in range(5):
        a, b = (rng.standard_normal(s) for s in _shapes(spec, rng))
        got, want = kernel(a, b), np.einsum(spec, a, b)
        assert got.shape == want.shape and np.allclose(got, want, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("spec", NUMPY)
def test_batched_repeated_or_interleaved_labels_stay_numpys(spec):
    ins, out = spec.split("->")
    assert gemm_plan(ins.split(","), out) is None


def test_blocks_that_do_not_view_in_2d_fall_back():
    calls = []

    def fallback(a, b):
        calls.append(1)
        return np.einsum("aik,kj->aij", a, b)

    kernel = gemm_kernel(["aik", "kj"], "aij", fallback)
    rng = np.random.default_rng(1)
    strided = rng.standard_normal((4, 3, 3))[:, :2, :]      # (a, i) cannot merge
    b = rng.standard_normal((3, 5))
    assert np.allclose(kernel(strided, b), np.einsum("aik,kj->aij", strided, b))
    assert calls == [1]
    transposed = rng.standard_normal((3, 2 * 4)).T.reshape(2, 4, 3)   # merges: a view
    assert np.allclose(kernel(transposed, b), np.einsum("aik,kj->aij", transposed, b))
    assert np.allclose(kernel(np.zeros((0, 4, 3)), b), np.zeros((0, 4, 5)))


def test_the_output_comes_in_its_own_order_when_swapping_the_operands_gives_it():
    kernel = gemm_kernel(["aik", "aij"], "jk", _einsum("aik,aij->jk"))
    rng = np.random.default_rng(2)
    out = kernel(rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 5)))
    assert out.shape == (5, 4) and out.flags.c_contiguous


def test_an_interleaved_operand_is_copied_once_and_the_output_comes_contiguous():
    """``bhtk,btd->dhk`` (attention's weight gradient): the cotangent copied into
    (b, t, h, k) order, the other operand viewed as it is, the product in ``dhk`` order."""
    plan = gemm_plan(["btd", "bhtk"], "dhk")
    assert (plan.a_perm, plan.b_perm, plan.perm) == (None, (0, 2, 1, 3), None)
    kernel = gemm_kernel(["bhtk", "btd"], "dhk", _einsum("bhtk,btd->dhk"))
    rng = np.random.default_rng(3)
    g = rng.standard_normal((2, 4, 3, 5)).transpose(0, 2, 1, 3)     # strided, as a cotangent
    x = rng.standard_normal((2, 4, 6))
    out = kernel(g, x)
    assert out.flags.c_contiguous and np.allclose(out, np.einsum("bhtk,btd->dhk", g, x))


@pytest.mark.parametrize("spec", STACKED)
def test_products_of_matrix_stacks_run_as_matmul_and_give_numpys_einsum(spec):
    ins, out = spec.split("->")
    rng = np.random.default_rng(4)
    calls = []

    def fallback(a, b):
        calls.append(1)
        return np.einsum(spec, a, b)
    kernel = gemm_kernel(ins.split(","), out, fallback)
    for _ in range(3):
        a, b = (rng.standard_normal(s) for s in _shapes(spec, rng))
        got = kernel(a, b)
        assert got.shape == np.einsum(spec, a, b).shape
        assert np.allclose(got, np.einsum(spec, a, b), rtol=1e-13, atol=1e-13)
    assert not calls


@pytest.mark.parametrize("spec", NOT_STACKED)
def test_other_batched_subscripts_are_not_taken_for_matrix_stacks(spec):
    ins, out = spec.split("->")
    sentinel = object()
    kernel = gemm_kernel(ins.split(","), out, lambda a, b: sentinel)
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal(s) for s in _shapes(spec, rng))
    assert kernel(a, b) is sentinel


@pytest.mark.parametrize("spec, copies", [("ji,kj->ik", False), ("ji,ik->kj", False),
                                          ("bhtk,dhk->btd", True), ("bhtk,btd->dhk", True),
                                          ("btd,dhk->bhtk", False), ("abik,abjk->abij", False),
                                          ("ij,jk->ik", False)])
def test_copies_first_tells_when_the_product_copies_its_first_operand(spec, copies):
    """What the gradient of a product asks before laying its cotangent out once for both
    operands (``autodiff.vjps``): only where the product would copy it anyway."""
    from mtensor.ops.gemm import copies_first

    ins, out = spec.split("->")
    assert copies_first(ins.split(","), out) is copies


def test_the_contiguous_kernel_always_copies_in_c_order_and_keeps_0d():
    from mtensor.ops.pointwise import _c_ordered

    a = np.arange(6.0).reshape(2, 3)
    for block in (a, a.T, np.float64(3.0) * np.ones(())):
        out = _c_ordered(block)
        assert out.flags.c_contiguous and out.shape == block.shape
        assert not np.shares_memory(out, block) and np.array_equal(out, block)
