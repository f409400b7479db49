"""Statistics as users write it with numpy: the Python Data Science Handbook's NumPy chapter
(jakevdp/PythonDataScienceHandbook notebooks/02.0x), numpy's own documentation examples and
scipy's z-score (README.md cites each)."""
import numpy as np
from snippet import randint, randn, registry, uniform

SNIPPETS, snippet = registry()
PDSH = "jakevdp/PythonDataScienceHandbook notebooks/"
DOCS = "numpy.org/doc/stable/reference/generated/"


def _heights():
    return (np.round(uniform(150, 195, 13), 1),)


@snippet("pdsh_height_summary", PDSH + "02.04-Computation-on-arrays-aggregates.ipynb "
         "('What is the Average Height of US Presidents?')", _heights)
def height_summary(heights):
    return (heights.mean(), heights.std(), heights.min(), heights.max(),
            np.percentile(heights, 25), np.median(heights), np.percentile(heights, 75))


@snippet("pdsh_aggregates_axis", PDSH + "02.04-Computation-on-arrays-aggregates.ipynb "
         "('Multi dimensional aggregates')", lambda: (uniform(0, 1, (13, 4)),), second="last")
def aggregates_axis(M):
    return M.sum(), M.min(axis=0), M.max(axis=1), np.nansum(M), np.argmin(M), np.any(M > 0.9)


@snippet("pdsh_centering", PDSH + "02.05-Computation-on-arrays-broadcasting.ipynb "
         "('Centering an array')", lambda: (uniform(0, 1, (10, 3)),), second="last")
def centering(X):
    Xmean = X.mean(0)
    X_centered = X - Xmean
    return X_centered, X_centered.mean(0)


@snippet("pdsh_2d_function", PDSH + "02.05-Computation-on-arrays-broadcasting.ipynb "
         "('Plotting a two-dimensional function')", lambda: (np.linspace(0, 5, 13),
                                                              np.linspace(0, 5, 10)))
def two_d_function(x, y):
    y = y[:, np.newaxis]
    z = np.sin(x) ** 10 + np.cos(10 + y * x) * np.cos(x)
    return z


def _rain():
    return (np.maximum(randn(13, seed=3) * 0.5, 0),)


@snippet("pdsh_rainy_days", PDSH + "02.06-Boolean-Arrays-and-Masks.ipynb "
         "('Example: Counting Rainy Days')", _rain)
def rainy_days(inches):
    rainy = (inches > 0)
    days = np.arange(len(inches))
    summer = (days > 4) & (days < 10)
    return (np.median(inches[rainy]), np.median(inches[summer]), np.max(inches[summer]),
            np.median(inches[rainy & ~summer]), np.sum((inches > 0.5) & (inches < 1)),
            np.sum(~((inches <= 0.5) | (inches >= 1))))


@snippet("pdsh_counting_entries", PDSH + "02.06-Boolean-Arrays-and-Masks.ipynb "
         "('Counting entries')", lambda: (randint(0, 10, (13, 4)),), second="last")
def counting_entries(x):
    return (np.count_nonzero(x < 6), np.sum(x < 6), np.sum(x < 6, axis=1), np.any(x > 8),
            np.all(x < 10), np.all(x < 8, axis=1), x[x < 5])


@snippet("pdsh_binning_add_at", PDSH + "02.07-Fancy-Indexing.ipynb ('Example: Binning Data')",
         lambda: (randn(100),))
def binning(x):
    bins = np.linspace(-5, 5, 20)
    counts = np.zeros_like(bins)
    i = np.searchsorted(bins, x)
    np.add.at(counts, i, 1)
    return counts, np.histogram(x, bins)[0]


@snippet("pdsh_fancy_select", PDSH + "02.07-Fancy-Indexing.ipynb ('Example: Selecting Random "
         "Points')", lambda: (randn(13, 2), np.array([1, 5, 7, 12, 0])), second="last")
def fancy_select(X, indices):
    selection = X[indices]
    return selection


@snippet("pdsh_knn_argsort", PDSH + "02.08-Sorting.ipynb ('Example: k-Nearest Neighbors')",
         lambda: (uniform(0, 1, (10, 2)),), second="last")
def knn_argsort(X):
    dist_sq = np.sum((X[:, np.newaxis, :] - X[np.newaxis, :, :]) ** 2, axis=-1)
    nearest = np.argsort(dist_sq, axis=1)
    return dist_sq.diagonal(), nearest[:, 0], dist_sq


@snippet("pdsh_sort_axis", PDSH + "02.08-Sorting.ipynb ('Sorting along rows or columns')",
         lambda: (randint(0, 10, (7, 6)),), second="last")
def sort_axis(X):
    return np.sort(X, axis=0), np.sort(X, axis=1), np.argsort(X[:, 0])


@snippet("zscore_scipy", "scipy/scipy scipy/stats/_stats_py.py zscore/zmap (the numpy body: "
         "(a - mn) / std)", lambda: (randn(13, 4),), second="last")
def zscore(a, axis=0, ddof=0):
    mn = a.mean(axis=axis, keepdims=True)
    std = a.std(axis=axis, ddof=ddof, keepdims=True)
    return (a - mn) / std


@snippet("standardize_columns", "cs231n.github.io/neural-networks-2/ ('Data Preprocessing': "
         "X -= np.mean(X, axis=0); X /= np.std(X, axis=0))", lambda: (randn(13, 4),),
         second="last")
def standardize(X):
    X -= np.mean(X, axis=0)
    X /= np.std(X, axis=0)
    return X


@snippet("pca_whitening_cs231n", "cs231n.github.io/neural-networks-2/ ('PCA and Whitening')",
         lambda: (randn(13, 4),))
def pca_whitening(X):
    X -= np.mean(X, axis=0)
    cov = np.dot(X.T, X) / X.shape[0]
    U, S, V = np.linalg.svd(cov)
    Xrot = np.dot(X, U)
    Xwhite = Xrot / np.sqrt(S + 1e-5)
    return S, np.abs(Xwhite)


@snippet("histogram_docs", DOCS + "numpy.histogram.html (Examples)", lambda: (randn(100),))
def histogram(a):
    hist, bin_edges = np.histogram(a, density=True)
    counts, edges = np.histogram(a, bins=5, range=(-2, 2))
    return hist, bin_edges, counts, edges, np.sum(hist * np.diff(bin_edges))


@snippet("percentile_docs", DOCS + "numpy.percentile.html (Examples)",
         lambda: (randn(13, 3),), second="last")
def percentile(a):
    return (np.percentile(a, 50), np.percentile(a, 50, axis=0), np.percentile(a, 50, axis=1),
            np.percentile(a, 50, axis=1, keepdims=True), np.quantile(a, [0.25, 0.75]))


@snippet("iqr_outliers", "scipy-lectures.org / common IQR rule: q1, q3 = np.percentile(x, "
         "[25, 75]); x[(x < q1 - 1.5 iqr) | (x > q3 + 1.5 iqr)]", lambda: (randn(100) ** 3,))
def iqr_outliers(x):
    q1, q3 = np.percentile(x, [25, 75])
    iqr = q3 - q1
    return x[(x < q1 - 1.5 * iqr) | (x > q3 + 1.5 * iqr)]


@snippet("moving_average_convolve", "stackoverflow.com/a/54628145 (np.convolve(x, np.ones(w), "
         "'valid') / w)", lambda: (uniform(0, 1, 13),))
def moving_average(x, w=3):
    return np.convolve(x, np.ones(w), 'valid') / w


@snippet("running_mean_cumsum", "stackoverflow.com/a/27681394 (running_mean via cumsum)",
         lambda: (uniform(0, 1, 13),))
def running_mean(x, N=3):
    cumsum = np.cumsum(np.insert(x, 0, 0))
    return (cumsum[N:] - cumsum[:-N]) / float(N)


@snippet("weighted_average_docs", DOCS + "numpy.average.html (Examples)",
         lambda: (np.arange(1, 14, dtype=float), uniform(0, 1, 13)))
def weighted_average(data, weights):
    return (np.average(data), np.average(data, weights=weights),
            np.average(data, weights=weights, returned=True))


@snippet("cov_corrcoef_docs", DOCS + "numpy.cov.html, numpy.corrcoef.html (Examples)",
         lambda: (randn(3, 13),), second="last")
def cov_corrcoef(x):
    return np.cov(x), np.corrcoef(x), np.cov(x[0], x[1]), np.ptp(x, axis=1)


@snippet("pearson_manual", "en.wikipedia.org/wiki/Pearson_correlation_coefficient "
         "(sample formula, as commonly written with numpy)",
         lambda: (randn(13, seed=1), randn(13, seed=2)))
def pearson(x, y):
    mx, my = x.mean(), y.mean()
    return np.sum((x - mx) * (y - my)) / np.sqrt(np.sum((x - mx) ** 2) * np.sum((y - my) ** 2))


@snippet("min_max_scale", "scikit-learn MinMaxScaler docs formula (X - X.min(axis=0)) / "
         "(X.max(axis=0) - X.min(axis=0))", lambda: (randn(13, 4),), second="last")
def min_max_scale(X):
    X_std = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0))
    return X_std


@snippet("ecdf", "stackoverflow.com/q/10640759 (ECDF: x = np.sort(data); "
         "y = np.arange(1, len(x)+1) / len(x))", lambda: (randn(13),))
def ecdf(data):
    x = np.sort(data)
    y = np.arange(1, len(x) + 1) / len(x)
    return x, y


@snippet("digitize_docs", DOCS + "numpy.digitize.html (Examples)",
         lambda: (np.array([0.2, 6.4, 3.0, 1.6, 9.9, 4.4, 0.0]),))
def digitize(x):
    bins = np.array([0.0, 1.0, 2.5, 4.0, 10.0])
    inds = np.digitize(x, bins)
    return inds, np.digitize(x, bins, right=True)


@snippet("nan_statistics_docs", DOCS + "numpy.nanmean.html, numpy.nanstd.html, "
         "numpy.nanmedian.html (Examples)",
         lambda: (np.where(uniform(0, 1, (13, 3)) > 0.8, np.nan, randn(13, 3)),), second="last")
def nan_statistics(a):
    return (np.nanmean(a), np.nanmean(a, axis=0), np.nanstd(a, axis=1), np.nanmedian(a),
            np.isnan(a).sum(), np.nanmax(a, axis=0))


@snippet("fraction_above", PDSH + "02.06-Boolean-Arrays-and-Masks.ipynb "
         "(np.mean of a boolean: the fraction that is True)", lambda: (randn(13, 4),),
         second="last")
def fraction_above(x):
    return np.mean(x > 0.5), np.mean(x > 0.5, axis=0), (x > 0).sum(axis=1)
