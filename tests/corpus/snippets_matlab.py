"""NumPy for MATLAB users (numpy.org/doc/stable/user/numpy-for-matlab-users.html), the table
"Linear algebra equivalents": one snippet per row or small group of rows, on input arrays."""
import numpy as np
from snippet import randn, registry, uniform

SNIPPETS, snippet = registry()
SRC = "numpy.org/doc/stable/user/numpy-for-matlab-users.html, 'Linear algebra equivalents': "


def _a():
    return (randn(13, 10),)


@snippet("matlab_size_ndim", SRC + "ndim(a), a.size, a.shape, a.shape[n-1]", _a, second="last")
def size_ndim(a):
    return np.ndim(a), a.ndim, np.size(a), a.size, np.shape(a), a.shape, a.shape[1]


@snippet("matlab_block_matrix", SRC + "np.block([[a, b], [c, d]])",
         lambda: (randn(7, 3, seed=1), randn(7, 2, seed=2), randn(2, 3, seed=3),
                  randn(2, 2, seed=4)))
def block(a, b, c, d):
    return np.block([[a, b], [c, d]])


@snippet("matlab_last_element", SRC + "a[-1], a[1, 4], a[1], a[1, :]", _a, second="last")
def elements(a):
    return a[-1], a[1, 4], a[1], a[1, :]


@snippet("matlab_slices", SRC + "a[0:5], a[:5], a[-5:], a[0:3, 4:9]", _a, second="last")
def slices(a):
    return a[0:5], a[:5], a[-5:], a[0:3, 4:9]


@snippet("matlab_ix", SRC + "a[np.ix_([1, 3, 4], [0, 2])]", _a, second="last")
def ix(a):
    return a[np.ix_([1, 3, 4], [0, 2])]


@snippet("matlab_strided_rows", SRC + "a[2:21:2,:], a[::2, :], a[::-1,:]", _a, second="last")
def strided(a):
    return a[2:21:2, :], a[::2, :], a[::-1, :]


@snippet("matlab_wraparound", SRC + "a[np.r_[:len(a),0]]", _a, second="last")
def wraparound(a):
    return a[np.r_[:len(a), 0]]


@snippet("matlab_transpose", SRC + "a.transpose() or a.T, a.conj().transpose()", _a, second="last")
def transpose(a):
    return a.transpose(), a.T, a.conj().transpose(), a.conj().T


@snippet("matlab_products", SRC + "a @ b, a * b, a/b, a**3",
         lambda: (randn(7, 7, seed=1), randn(7, 7, seed=2)), second="last")
def products(a, b):
    return a @ b, a * b, a / b, a**3


@snippet("matlab_compare", SRC + "(a > 0.5)", _a, second="last")
def compare(a):
    return (a > 0.5)


@snippet("matlab_find", SRC + "np.nonzero(a > 0.5)", _a, second="last")
def find(a):
    return np.nonzero(a > 0.5)


@snippet("matlab_columns_where_v", SRC + "a[:,np.nonzero(v > 0.5)[0]]",
         lambda: (randn(13, 10), uniform(0, 1, 10, seed=1)))
def columns_nonzero(a, v):
    return a[:, np.nonzero(v > 0.5)[0]]


@snippet("matlab_columns_mask", SRC + "a[:,v.T > 0.5]",
         lambda: (randn(13, 10), uniform(0, 1, 10, seed=1)))
def columns_mask(a, v):
    return a[:, v.T > 0.5]


@snippet("matlab_zero_small", SRC + "a[a < 0.5]=0", _a, second="last")
def zero_small(a):
    a[a < 0.5] = 0
    return a


@snippet("matlab_mask_multiply", SRC + "a * (a > 0.5)", _a, second="last")
def mask_multiply(a):
    return a * (a > 0.5)


@snippet("matlab_fill", SRC + "a[:] = 3", _a, second="last")
def fill(a):
    a[:] = 3
    return a


@snippet("matlab_copies", SRC + "y = x.copy(), y = x[1, :].copy(), y = x.flatten()", _a,
         second="last")
def copies(x):
    y = x.copy()
    y2 = x[1, :].copy()
    y3 = x.flatten()
    y[0, 0] = 99.0
    return x, y, y2, y3


@snippet("matlab_diag_tile", SRC + "np.diag(a), np.diag(v, 0), np.tile(a, (m, n))",
         lambda: (randn(7, 7), randn(5, seed=1)))
def diag_tile(a, v):
    return np.diag(a), np.diag(v, 0), np.tile(a, (2, 3))


@snippet("matlab_concatenate", SRC + "np.concatenate((a,b),1), np.hstack, np.vstack, np.c_, np.r_",
         lambda: (randn(7, 3, seed=1), randn(7, 3, seed=2)))
def concatenate(a, b):
    return (np.concatenate((a, b), 1), np.hstack((a, b)), np.column_stack((a, b)),
            np.c_[a, b], np.concatenate((a, b)), np.vstack((a, b)), np.r_[a, b])


@snippet("matlab_max", SRC + "a.max(), a.max(0), a.max(1), np.maximum(a, b)",
         lambda: (randn(13, 10, seed=1), randn(13, 10, seed=2)), second="last")
def maxima(a, b):
    return a.max(), np.nanmax(a), a.max(0), a.max(1), np.maximum(a, b)


@snippet("matlab_norm", SRC + "np.sqrt(v @ v), np.linalg.norm(v)", lambda: (randn(13),))
def norm(v):
    return np.sqrt(v @ v), np.linalg.norm(v)


@snippet("matlab_logical", SRC + "logical_and(a,b), logical_or(a,b), a & b, a | b",
         lambda: (randn(13, 10, seed=1) > 0, randn(13, 10, seed=2) > 0), second="last")
def logical(a, b):
    return np.logical_and(a, b), np.logical_or(a, b), a & b, a | b


@snippet("matlab_inverse", SRC + "linalg.inv(a), linalg.pinv(a), np.linalg.matrix_rank(a)",
         lambda: (randn(7, 7),))
def inverse(a):
    return np.linalg.inv(a), np.linalg.pinv(a), np.linalg.matrix_rank(a)


@snippet("matlab_solve", SRC + "linalg.solve(a, b), linalg.lstsq(a, b)",
         lambda: (randn(7, 7, seed=1), randn(7, seed=2)))
def solve(a, b):
    return np.linalg.solve(a, b), np.linalg.lstsq(a, b, rcond=None)[0]


@snippet("matlab_svd", SRC + "U, S, Vh = linalg.svd(a); V = Vh.T", lambda: (randn(10, 7),))
def svd(a):
    U, S, Vh = np.linalg.svd(a)
    V = Vh.T
    return S, np.abs(U[:, :7] @ np.diag(S) @ V.T)


@snippet("matlab_cholesky_eig", SRC + "linalg.cholesky(a), D,V = linalg.eigh(a)",
         lambda: (randn(7, 7),))
def cholesky(a):
    a = a @ a.T + 7 * np.eye(7)
    D, V = np.linalg.eigh(a)
    return np.linalg.cholesky(a), D


@snippet("matlab_qr", SRC + "Q,R = linalg.qr(a)", lambda: (randn(10, 7),))
def qr(a):
    Q, R = np.linalg.qr(a)
    return np.abs(np.diag(R)), Q @ R


@snippet("matlab_sort", SRC + "np.sort(a), a.sort(axis=0), np.sort(a, axis=1)", _a,
         second="last")
def sort(a):
    b = np.sort(a)
    c = np.sort(a, axis=1)
    a.sort(axis=0)
    return b, c, a


@snippet("matlab_sortrows", SRC + "I = np.argsort(a[:, 0]); b = a[I,:]", _a, second="last")
def sortrows(a):
    I = np.argsort(a[:, 0])
    b = a[I, :]
    return b


@snippet("matlab_unique_squeeze", SRC + "np.unique(a), a.squeeze()",
         lambda: (np.random.default_rng(0).integers(0, 5, (13, 1)),))
def unique_squeeze(a):
    return np.unique(a), a.squeeze()


@snippet("matlab_fft", SRC + "np.fft.fft(a), np.fft.ifft(a)", lambda: (randn(16),))
def fft(a):
    return np.fft.fft(a), np.fft.ifft(a)
