"""scikit-learn's array API estimators and functions on row-split DTensors, unchanged, under
``sklearn.config_context(array_api_dispatch=True)`` (SCIPY_ARRAY_API=1 is set by conftest.py
before anything imports SciPy).  Each is fitted on numpy and on DTensors split by rows over
every rank; the fitted attributes, the row-wise outputs (transform, predict, predict_proba,
decision_function) and the metrics must match numpy's, and the row-wise outputs must stay
split by rows.  The estimators are the ones scikit-learn tags ``array_api_support``
(``test_the_list_is_sklearn_s`` fails when a release adds one).  Host meshes only: the GPU
legs run the op families, which these reach through the namespace.
"""
import warnings

import numpy as np
import pytest
import sklearn
from conftest import SWEEP_DEVICE
from mpi_helpers import WORLD, assert_all_ranks, host
from sklearn import metrics
from sklearn.base import clone
from sklearn.decomposition import PCA
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import (
    LogisticRegression,
    PoissonRegressor,
    Ridge,
    RidgeClassifierCV,
    RidgeCV,
)
from sklearn.metrics import pairwise
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.preprocessing import (
    Binarizer,
    KernelCenterer,
    LabelEncoder,
    MinMaxScaler,
    Normalizer,
    PolynomialFeatures,
    StandardScaler,
)

import mtensor as mt

pytestmark = [pytest.mark.mpi, pytest.mark.skipif(
    SWEEP_DEVICE is not None, reason="scikit-learn runs on host meshes (the GPU legs run the "
                                     "op families it reaches)")]

ROWS_SPLIT = mt.Shard(0)
RNG = np.random.default_rng(0)
X = RNG.standard_normal((61, 5))
Y_REG = X @ RNG.standard_normal(5) + 0.1
Y_CLS = (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0.5)
Y_POS = np.exp(0.3 * X[:, 0])
KERNEL = X @ X.T

# name -> (estimator, input, target, attributes compared up to the sign of each column)
ESTIMATORS = {
    "PCA(covariance_eigh)": (PCA(3, svd_solver="covariance_eigh"), X, None, ()),
    "PCA(full)": (PCA(3, svd_solver="full"), X, None, ()),
    "PCA(randomized)": (PCA(3, svd_solver="randomized", random_state=0), X, None, ()),
    "StandardScaler": (StandardScaler(), X, None, ()),
    "MinMaxScaler": (MinMaxScaler(), X, None, ()),
    "Normalizer": (Normalizer(), X, None, ()),
    "Binarizer": (Binarizer(), X, None, ()),
    "KernelCenterer": (KernelCenterer(), KERNEL, None, ()),
    "PolynomialFeatures": (PolynomialFeatures(2), X, None, ()),
    "GaussianNB": (GaussianNB(), X, Y_CLS, ()),
    "LinearDiscriminantAnalysis": (LinearDiscriminantAnalysis(), X, Y_CLS,
                                   ("scalings_", "transform")),
    "LogisticRegression": (LogisticRegression(), X, Y_CLS, ()),
    "PoissonRegressor": (PoissonRegressor(), X, Y_POS, ()),
    "Ridge": (Ridge(solver="svd"), X, Y_REG, ()),
    "RidgeCV": (RidgeCV(), X, Y_REG, ()),
    "RidgeClassifierCV": (RidgeClassifierCV(), X, Y_CLS, ()),
    "Nystroem": (Nystroem(n_components=10, random_state=0), X, None, ()),
}
ROW_OUTPUTS = ("transform", "predict", "predict_proba", "decision_function")


@pytest.fixture(scope="module")
def rows():
    """Row-split DTensors on the 1-D mesh of every rank; arrays of a kilobyte and more made
    by the namespace are split by rows too (the default is a megabyte), so scikit-learn's
    ``xp.empty((n_samples, k))`` outputs are split on this small data as on large data."""
    mesh = mt.init_device_mesh((WORLD.size,))
    old = mt.array_api.split_bytes(1024)
    yield lambda a: mt.distribute_tensor(a, mesh, [ROWS_SPLIT])
    mt.array_api.split_bytes(old)


def up_to_sign(a, b):
    """Columns equal up to their sign (an SVD's vectors are defined up to it)."""
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    signs = np.sign(np.sum(a * b, axis=0))
    return np.allclose(a * np.where(signs == 0, 1, signs), b, atol=1e-8)


def matches(got, want, signed) -> bool:
    g = host(got) if isinstance(got, mt.DTensor) else np.asarray(got)
    if g.shape != want.shape:
        return False
    return up_to_sign(g, want) if signed else np.allclose(g, want, atol=1e-8)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_estimator_matches_numpy(name, rows):
    estimator, a, y, signed = ESTIMATORS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = clone(estimator).fit(a, y)
        with sklearn.config_context(array_api_dispatch=True):
            split = clone(estimator).fit(rows(a), None if y is None else rows(y))
            outputs = {m: getattr(split, m)(rows(a)) for m in ROW_OUTPUTS if hasattr(plain, m)}
    bad = [k for k, v in vars(plain).items()
           if k.endswith("_") and isinstance(v, np.ndarray) and v.dtype.kind in "fiub"
           and not matches(getattr(split, k), v, k in signed)]
    for method, got in outputs.items():
        if not matches(got, getattr(plain, method)(a), method in signed):
            bad.append(method)
        if not (isinstance(got, mt.DTensor) and got.placements[0] == ROWS_SPLIT):
            bad.append(f"{method} laid out {getattr(got, 'placements', type(got).__name__)}")
    assert_all_ranks(not bad, f"{name}: differs from numpy in {bad}")


def test_label_encoder_and_train_test_split(rows):
    labels = np.array([3, 1, 3, 7, 1, 1, 9])
    with sklearn.config_context(array_api_dispatch=True):
        enc = LabelEncoder().fit(rows(labels))
        codes = enc.transform(rows(labels))
        parts = train_test_split(rows(X), rows(Y_REG), test_size=0.25, random_state=0)
    want = train_test_split(X, Y_REG, test_size=0.25, random_state=0)
    ok = np.array_equal(host(enc.classes_), [1, 3, 7, 9])
    ok = ok and np.array_equal(host(codes), LabelEncoder().fit_transform(labels))
    ok = ok and all(np.array_equal(host(g), w) for g, w in zip(parts, want))
    assert_all_ranks(ok, "LabelEncoder / train_test_split differ from numpy")


METRICS = {
    "accuracy_score": lambda m, t, p, s: m.accuracy_score(t, p),
    "r2_score": lambda m, t, p, s: m.r2_score(s, s * 0.9 + 0.1),
    "mean_squared_error": lambda m, t, p, s: m.mean_squared_error(s, s * 0.9 + 0.1),
    "mean_absolute_error": lambda m, t, p, s: m.mean_absolute_error(s, s * 0.9),
    "zero_one_loss": lambda m, t, p, s: m.zero_one_loss(t, p),
    "confusion_matrix": lambda m, t, p, s: m.confusion_matrix(t, p),
    "f1_score": lambda m, t, p, s: m.f1_score(t, p, average="macro"),
}


@pytest.mark.parametrize("name", sorted(METRICS))
def test_metrics_match_numpy(name, rows):
    truth, pred = Y_CLS, np.roll(Y_CLS, 3)
    want = METRICS[name](metrics, truth, pred, Y_REG)
    with sklearn.config_context(array_api_dispatch=True):
        got = METRICS[name](metrics, rows(truth), rows(pred), rows(Y_REG))
    got = host(got) if isinstance(got, mt.DTensor) else np.asarray(got)
    assert_all_ranks(np.shape(got) == np.shape(want) and np.allclose(got, want),
                     f"{name}: {got} vs {want}")


@pytest.mark.parametrize("name", ["euclidean_distances", "rbf_kernel", "linear_kernel",
                                  "cosine_similarity", "polynomial_kernel"])
def test_pairwise_rows_stay_split(name, rows):
    fn = getattr(pairwise, name)
    want = fn(X, X[:7])
    with sklearn.config_context(array_api_dispatch=True):
        got = fn(rows(X), mt.distribute_tensor(X[:7], rows(X).device_mesh, [mt.Replicate()]))
    assert_all_ranks(np.allclose(host(got), want, atol=1e-8) and got.placements[0] == ROWS_SPLIT,
                     f"{name}: {got.placements}")


def test_the_list_is_sklearn_s():
    """Every estimator scikit-learn tags as supporting the array API is tested above."""
    from sklearn.utils import all_estimators, get_tags
    tagged = set()
    for name, cls in all_estimators():
        try:
            supported = get_tags(cls()).array_api_support
        except (TypeError, AttributeError):   # needs arguments (meta-estimators, mixins)
            continue
        if supported:
            tagged.add(name)
    tested = {type(e).__name__ for e, *_ in ESTIMATORS.values()} | {"LabelEncoder"}
    assert tagged <= tested, f"untested array API estimators: {sorted(tagged - tested)}"
