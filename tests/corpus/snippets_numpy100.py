"""rougier/numpy-100, 100_Numpy_exercises_with_solutions.md: the exercises' solutions with their
inputs passed in, exercises 4 to 59 (exercise number in each name; README.md cites them)."""
import numpy as np
from snippet import randint, registry, uniform

SNIPPETS, snippet = registry()
SRC = "rougier/numpy-100 100_Numpy_exercises_with_solutions.md #"


@snippet("n100_04_memory_size", SRC + "4", lambda: (np.zeros((10, 10)),))
def ex04(Z):
    return "%d bytes" % (Z.size * Z.itemsize)


@snippet("n100_08_reverse", SRC + "8", lambda: (np.arange(13),))
def ex08(Z):
    Z = Z[::-1]
    return Z


@snippet("n100_09_reshape_3x3", SRC + "9", lambda: (np.arange(9),))
def ex09(Z):
    return Z.reshape(3, 3)


@snippet("n100_10_nonzero", SRC + "10", lambda: (np.array([1, 2, 0, 0, 4, 0, 3]),))
def ex10(Z):
    nz = np.nonzero(Z)
    return nz


@snippet("n100_13_min_max", SRC + "13", lambda: (uniform(0, 1, (13, 10)),), second="last")
def ex13(Z):
    Zmin, Zmax = Z.min(), Z.max()
    return Zmin, Zmax


@snippet("n100_14_mean", SRC + "14", lambda: (uniform(0, 1, 30),))
def ex14(Z):
    m = Z.mean()
    return m


@snippet("n100_15_border", SRC + "15", lambda: (np.ones((10, 7)),), second="last")
def ex15(Z):
    Z[1:-1, 1:-1] = 0
    return Z


@snippet("n100_16_pad", SRC + "16", lambda: (np.ones((5, 5)),))
def ex16(Z):
    Z = np.pad(Z, pad_width=1, mode='constant', constant_values=0)
    return Z


@snippet("n100_18_diag_below", SRC + "18", lambda: (np.arange(4),))
def ex18(a):
    Z = np.diag(1 + a, k=-1)
    return Z


@snippet("n100_19_checkerboard", SRC + "19", lambda: (np.zeros((8, 8), dtype=int),), second="last")
def ex19(Z):
    Z[1::2, ::2] = 1
    Z[::2, 1::2] = 1
    return Z


@snippet("n100_21_tile", SRC + "21", lambda: (np.array([[0, 1], [1, 0]]),))
def ex21(A):
    Z = np.tile(A, (4, 4))
    return Z


@snippet("n100_22_normalize", SRC + "22", lambda: (uniform(0, 1, (5, 5)),), second="last")
def ex22(Z):
    Z = (Z - np.mean(Z)) / (np.std(Z))
    return Z


@snippet("n100_24_matrix_product", SRC + "24", lambda: (np.ones((5, 3)), np.ones((3, 2))))
def ex24(A, B):
    Z = np.dot(A, B)
    Z2 = A @ B
    return Z, Z2


@snippet("n100_25_negate_between", SRC + "25", lambda: (np.arange(11),))
def ex25(Z):
    Z[(3 < Z) & (Z <= 8)] *= -1
    return Z


@snippet("n100_29_round_away", SRC + "29", lambda: (uniform(-10, 10, 10),))
def ex29(Z):
    return np.copysign(np.ceil(np.abs(Z)), Z)


@snippet("n100_30_intersect", SRC + "30",
         lambda: (randint(0, 10, 10, seed=1), randint(0, 10, 10, seed=2)))
def ex30(Z1, Z2):
    return np.intersect1d(Z1, Z2)


@snippet("n100_35_inplace_out", SRC + "35", lambda: (np.ones(7) * 1, np.ones(7) * 2))
def ex35(A, B):
    np.add(A, B, out=B)
    np.divide(A, 2, out=A)
    np.negative(A, out=A)
    np.multiply(A, B, out=A)
    return A


@snippet("n100_36_integer_part", SRC + "36", lambda: (uniform(0, 10, 10),))
def ex36(Z):
    return Z - Z % 1, np.floor(Z), Z.astype(int), np.trunc(Z)


@snippet("n100_37_row_values", SRC + "37", lambda: (np.zeros((7, 5)), np.arange(5)))
def ex37(Z, r):
    Z += r
    return Z


@snippet("n100_40_sort", SRC + "40", lambda: (uniform(0, 1, 10),))
def ex40(Z):
    Z.sort()
    return Z


@snippet("n100_41_add_reduce", SRC + "41", lambda: (np.arange(10),))
def ex41(Z):
    return np.add.reduce(Z)


@snippet("n100_42_equal", SRC + "42", lambda: (randint(0, 2, 5, seed=1), randint(0, 2, 5, seed=2)))
def ex42(A, B):
    equal = np.allclose(A, B)
    equal2 = np.array_equal(A, B)
    return equal, equal2


@snippet("n100_44_polar", SRC + "44", lambda: (uniform(0, 1, (10, 2)),), second="last")
def ex44(Z):
    X, Y = Z[:, 0], Z[:, 1]
    R = np.sqrt(X**2 + Y**2)
    T = np.arctan2(Y, X)
    return R, T


@snippet("n100_45_replace_max", SRC + "45", lambda: (uniform(0, 1, 10),))
def ex45(Z):
    Z[Z.argmax()] = 0
    return Z


@snippet("n100_47_cauchy_det", SRC + "47", lambda: (np.arange(8),))
def ex47(X):
    Y = X + 0.5
    C = 1.0 / np.subtract.outer(X, Y)
    return np.linalg.det(C)


@snippet("n100_50_closest_value", SRC + "50", lambda: (np.arange(100), np.array(37.3)))
def ex50(Z, v):
    index = (np.abs(Z - v)).argmin()
    return Z[index]


@snippet("n100_52_point_distances", SRC + "52", lambda: (uniform(0, 1, (10, 2)),), second="last")
def ex52(Z):
    X, Y = np.atleast_2d(Z[:, 0], Z[:, 1])
    D = np.sqrt((X - X.T)**2 + (Y - Y.T)**2)
    return D


@snippet("n100_56_gaussian", SRC + "56", lambda: (np.linspace(-1, 1, 10), np.linspace(-1, 1, 10)))
def ex56(x, y):
    X, Y = np.meshgrid(x, y)
    D = np.sqrt(X * X + Y * Y)
    sigma, mu = 1.0, 0.0
    G = np.exp(-((D - mu)**2 / (2.0 * sigma**2)))
    return G


@snippet("n100_57_put", SRC + "57", lambda: (np.zeros((10, 10)), np.array([3, 47, 91])))
def ex57(Z, idx):
    np.put(Z, idx, 1)
    return Z


@snippet("n100_58_subtract_row_mean", SRC + "58", lambda: (uniform(0, 1, (5, 10)),), second="last")
def ex58(X):
    Y = X - X.mean(axis=1, keepdims=True)
    Y2 = X - X.mean(axis=1).reshape(-1, 1)
    return Y, Y2


@snippet("n100_59_sort_by_column", SRC + "59", lambda: (randint(0, 10, (7, 3)),))
def ex59(Z):
    return Z[Z[:, 1].argsort()]
