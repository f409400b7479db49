"""rougier/numpy-100, 100_Numpy_exercises_with_solutions.md, exercises 60 to 100 (the first
half is in snippets_numpy100.py; README.md cites each)."""
import numpy as np
from numpy.lib import stride_tricks
from snippet import randint, randn, registry, uniform

SNIPPETS, snippet = registry()
SRC = "rougier/numpy-100 100_Numpy_exercises_with_solutions.md #"


@snippet("n100_60_null_columns", SRC + "60", lambda: (randint(0, 3, (3, 10)),), second="last")
def ex60(Z):
    return (~Z.any(axis=0)).any()


@snippet("n100_61_nearest_flat", SRC + "61", lambda: (uniform(0, 1, 10),))
def ex61(Z):
    z = 0.5
    m = Z.flat[np.abs(Z - z).argmin()]
    return m


@snippet("n100_64_bincount_add", SRC + "64", lambda: (np.ones(10), randint(0, 10, 20)))
def ex64(Z, I):
    Z += np.bincount(I, minlength=len(Z))
    return Z


@snippet("n100_64_add_at", SRC + "64 (second solution)", lambda: (np.ones(10), randint(0, 10, 20)))
def ex64b(Z, I):
    np.add.at(Z, I, 1)
    return Z


@snippet("n100_65_bincount_weights", SRC + "65",
         lambda: (np.array([1, 2, 3, 4, 5, 6]), np.array([1, 3, 9, 3, 4, 1])))
def ex65(X, I):
    F = np.bincount(I, X)
    return F


@snippet("n100_66_unique_colors", SRC + "66",
         lambda: (randint(0, 2, (13, 16, 3)),))   # int64: NumPy 2 refuses 256 as uint8
def ex66(I):
    F = I[..., 0] * 256 * 256 + I[..., 1] * 256 + I[..., 2]
    n = len(np.unique(F))
    return n, np.unique(I)


@snippet("n100_67_sum_last_two", SRC + "67", lambda: (randint(0, 10, (3, 4, 3, 4)),))
def ex67(A):
    sum1 = A.sum(axis=(-2, -1))
    sum2 = A.reshape(A.shape[:-2] + (-1,)).sum(axis=-1)
    return sum1, sum2


@snippet("n100_68_subset_means", SRC + "68", lambda: (uniform(0, 1, 100), randint(0, 10, 100)))
def ex68(D, S):
    D_sums = np.bincount(S, weights=D)
    D_counts = np.bincount(S)
    D_means = D_sums / D_counts
    return D_means


@snippet("n100_69_diag_of_dot", SRC + "69",
         lambda: (uniform(0, 1, (5, 5), seed=1), uniform(0, 1, (5, 5), seed=2)), second="last")
def ex69(A, B):
    return np.diag(np.dot(A, B)), np.sum(A * B.T, axis=1), np.einsum("ij,ji->i", A, B)


@snippet("n100_70_interleave_zeros", SRC + "70", lambda: (np.array([1, 2, 3, 4, 5]),))
def ex70(Z):
    nz = 3
    Z0 = np.zeros(len(Z) + (len(Z) - 1) * (nz))
    Z0[::nz + 1] = Z
    return Z0


@snippet("n100_71_broadcast_3d", SRC + "71", lambda: (np.ones((5, 5, 3)), 2 * np.ones((5, 5))))
def ex71(A, B):
    return A * B[:, :, None]


@snippet("n100_72_swap_rows", SRC + "72", lambda: (np.arange(25).reshape(5, 5),), second="last")
def ex72(A):
    A[[0, 1]] = A[[1, 0]]
    return A


@snippet("n100_74_inverse_bincount", SRC + "74", lambda: (np.array([1, 1, 2, 3, 4, 4, 6]),))
def ex74(a):
    C = np.bincount(a)
    A = np.repeat(np.arange(len(C)), C)
    return A


@snippet("n100_75_moving_average", SRC + "75", lambda: (np.arange(20),))
def ex75(a, n=3):
    ret = np.cumsum(a, dtype=float)
    ret[n:] = ret[n:] - ret[:-n]
    return ret[n - 1:] / n


@snippet("n100_76_rolling_strides", SRC + "76", lambda: (np.arange(10),))
def ex76(a, window=3):
    shape = (a.size - window + 1, window)
    strides = (a.itemsize, a.itemsize)
    return stride_tricks.as_strided(a, shape=shape, strides=strides)


@snippet("n100_77_negate_inplace", SRC + "77",
         lambda: (randint(0, 2, 100), uniform(-1.0, 1.0, 100)))
def ex77(Z, W):
    np.logical_not(Z, out=Z)
    np.negative(W, out=W)
    return Z, W


def _distance(P0, P1, p):
    T = P1 - P0
    L = (T**2).sum(axis=1)
    U = -((P0[:, 0] - p[..., 0]) * T[:, 0] + (P0[:, 1] - p[..., 1]) * T[:, 1]) / L
    U = U.reshape(len(U), 1)
    D = P0 + U * T - p
    return np.sqrt((D**2).sum(axis=1))


@snippet("n100_78_point_line_distance", SRC + "78",
         lambda: (uniform(-10, 10, (10, 2), 1), uniform(-10, 10, (10, 2), 2),
                  uniform(-10, 10, (1, 2), 3)))
def ex78(P0, P1, p):
    return _distance(P0, P1, p)


@snippet("n100_79_points_lines_distances", SRC + "79",
         lambda: (uniform(-10, 10, (10, 2), 1), uniform(-10, 10, (10, 2), 2),
                  uniform(-10, 10, (7, 2), 3)))
def ex79(P0, P1, p):
    return np.array([_distance(P0, P1, p_i) for p_i in p])


@snippet("n100_82_matrix_rank", SRC + "82", lambda: (uniform(0, 1, (10, 10)),))
def ex82(Z):
    U, S, V = np.linalg.svd(Z)
    rank = np.sum(S > 1e-10)
    return rank


@snippet("n100_83_most_frequent", SRC + "83", lambda: (randint(0, 10, 50),))
def ex83(Z):
    return np.bincount(Z).argmax()


@snippet("n100_86_tensordot", SRC + "86", lambda: (np.ones((10, 20, 20)), np.ones((10, 20, 1))),
         second="last")
def ex86(M, V):
    S = np.tensordot(M, V, axes=[[0, 2], [0, 1]])
    return S


@snippet("n100_87_block_sum", SRC + "87", lambda: (np.ones((16, 16)),))
def ex87(Z):
    k = 4
    S = np.add.reduceat(np.add.reduceat(Z, np.arange(0, Z.shape[0], k), axis=0),
                        np.arange(0, Z.shape[1], k), axis=1)
    return S


@snippet("n100_88_game_of_life", SRC + "88", lambda: (randint(0, 2, (13, 10)),), second="last")
def ex88(Z):
    for i in range(3):
        N = (Z[0:-2, 0:-2] + Z[0:-2, 1:-1] + Z[0:-2, 2:] +
             Z[1:-1, 0:-2] + Z[1:-1, 2:] +
             Z[2:, 0:-2] + Z[2:, 1:-1] + Z[2:, 2:])
        birth = (N == 3) & (Z[1:-1, 1:-1] == 0)
        survive = ((N == 2) | (N == 3)) & (Z[1:-1, 1:-1] == 1)
        Z[...] = 0
        Z[1:-1, 1:-1][birth | survive] = 1
    return Z


@snippet("n100_89_n_largest", SRC + "89", lambda: (np.random.default_rng(0).permutation(1000),))
def ex89(Z):
    n = 5
    return Z[np.argsort(Z)[-n:]]


@snippet("n100_93_rows_containing", SRC + "93",
         lambda: (randint(0, 5, (8, 3), 1), randint(0, 5, (2, 2), 2)))
def ex93(A, B):
    C = (A[..., np.newaxis, np.newaxis] == B)
    rows = np.where(C.any((3, 1)).all(1))[0]
    return rows


@snippet("n100_94_unequal_rows", SRC + "94", lambda: (randint(0, 5, (10, 3)),))
def ex94(Z):
    E = np.all(Z[:, 1:] == Z[:, :-1], axis=1)
    U = Z[~E]
    U2 = Z[Z.max(axis=1) != Z.min(axis=1), :]
    return U, U2


@snippet("n100_95_binary_repr", SRC + "95", lambda: (np.array([0, 1, 2, 3, 15, 16, 32, 64, 128]),))
def ex95(I):
    B = ((I.reshape(-1, 1) & (2**np.arange(8))) != 0).astype(int)
    return B[:, ::-1]


@snippet("n100_96_unique_rows", SRC + "96", lambda: (randint(0, 2, (6, 3)),))
def ex96(Z):
    uZ = np.unique(Z, axis=0)
    return uZ


@snippet("n100_97_einsum", SRC + "97",
         lambda: (uniform(0, 1, 10, 1), uniform(0, 1, 10, 2)))
def ex97(A, B):
    return (np.einsum('i->', A), np.einsum('i,i->i', A, B), np.einsum('i,i', A, B),
            np.einsum('i,j->ij', A, B))


@snippet("n100_98_equidistant_path", SRC + "98", lambda: (np.arange(0, 10 * np.pi, 0.1),))
def ex98(phi):
    a = 1
    x = a * phi * np.cos(phi)
    y = a * phi * np.sin(phi)
    dr = (np.diff(x)**2 + np.diff(y)**2)**.5
    r = np.zeros_like(x)
    r[1:] = np.cumsum(dr)
    r_int = np.linspace(0, r.max(), 200)
    x_int = np.interp(r_int, r, x)
    y_int = np.interp(r_int, r, y)
    return x_int, y_int


@snippet("n100_99_multinomial_rows", SRC + "99",
         lambda: (np.asarray([[1.0, 0.0, 3.0, 8.0], [2.0, 0.0, 1.0, 1.0], [1.5, 2.5, 1.0, 0.0]]),))
def ex99(X):
    n = 4
    M = np.logical_and.reduce(np.mod(X, 1) == 0, axis=-1)
    M &= (X.sum(axis=-1) == n)
    return X[M]


@snippet("n100_100_bootstrap", SRC + "100", lambda: (randn(100), randint(0, 100, (50, 100))))
def ex100(X, idx):
    means = X[idx].mean(axis=1)
    confint = np.percentile(means, [2.5, 97.5])
    return confint
