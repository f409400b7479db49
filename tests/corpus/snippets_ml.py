"""ML-From-Scratch (eriklindernoren) building blocks written with numpy: activations, losses,
data operations and manipulations; class methods are lifted to functions of the arrays they
use (the models are in snippets_ml_models.py; README.md cites each)."""
import math

import numpy as np
from snippet import randint, randn, registry

SNIPPETS, snippet = registry()
MLFS = "eriklindernoren/ML-From-Scratch "
ACT = MLFS + "mlfromscratch/deep_learning/activation_functions.py "
LOSS = MLFS + "mlfromscratch/deep_learning/loss_functions.py "
DATA_OP = MLFS + "mlfromscratch/utils/data_operation.py "
DATA_MAN = MLFS + "mlfromscratch/utils/data_manipulation.py "


def _x():
    return (randn(13, 4),)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


@snippet("mlfs_sigmoid", ACT + "Sigmoid", _x, second="last")
def sigmoid(x):
    return _sigmoid(x), _sigmoid(x) * (1 - _sigmoid(x))


def _softmax(x):
    e_x = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e_x / np.sum(e_x, axis=-1, keepdims=True)


@snippet("mlfs_softmax", ACT + "Softmax", _x, second="last")
def softmax(x):
    p = _softmax(x)
    return p, p * (1 - p)


@snippet("mlfs_tanh", ACT + "TanH", _x, second="last")
def tanh(x):
    f = 2 / (1 + np.exp(-2 * x)) - 1
    return f, 1 - np.power(f, 2)


@snippet("mlfs_relu_family", ACT + "ReLU, LeakyReLU, ELU", _x, second="last")
def relu_family(x):
    alpha = 0.2
    elu = np.where(x >= 0.0, x, 0.1 * (np.exp(x) - 1))
    return (np.where(x >= 0, x, 0), np.where(x >= 0, 1, 0), np.where(x >= 0, x, alpha * x),
            np.where(x >= 0, 1, alpha), elu, np.where(x >= 0.0, 1, elu + 0.1))


@snippet("mlfs_selu_softplus", ACT + "SELU, SoftPlus", _x, second="last")
def selu_softplus(x):
    alpha = 1.6732632423543772848170429916717
    scale = 1.0507009873554804934193349852946
    return (scale * np.where(x >= 0.0, x, alpha * (np.exp(x) - 1)),
            scale * np.where(x >= 0.0, 1, alpha * np.exp(x)),
            np.log(1 + np.exp(x)), 1 / (1 + np.exp(-x)))


@snippet("mlfs_square_loss", LOSS + "SquareLoss", lambda: (randn(13, seed=1), randn(13, seed=2)))
def square_loss(y, y_pred):
    return 0.5 * np.power((y - y_pred), 2), -(y - y_pred)


def _onehot_and_probs():
    y = np.eye(3)[randint(0, 3, 13)]
    return y, _softmax(randn(13, 3))


@snippet("mlfs_cross_entropy", LOSS + "CrossEntropy (loss, gradient, acc)", _onehot_and_probs,
         second="last")
def cross_entropy(y, p):
    p = np.clip(p, 1e-15, 1 - 1e-15)
    loss = - y * np.log(p) - (1 - y) * np.log(1 - p)
    grad = - (y / p) + (1 - y) / (1 - p)
    y_true, y_pred = np.argmax(y, axis=1), np.argmax(p, axis=1)
    accuracy = np.sum(y_true == y_pred, axis=0) / len(y_true)
    return loss, grad, accuracy


@snippet("mlfs_mean_squared_error", DATA_OP + "mean_squared_error",
         lambda: (randn(13, seed=1), randn(13, seed=2)))
def mean_squared_error(y_true, y_pred):
    mse = np.mean(np.power(y_true - y_pred, 2))
    return mse


def _variance(X):
    mean = np.ones(np.shape(X)) * X.mean(0)
    n_samples = np.shape(X)[0]
    variance = (1 / n_samples) * np.diag((X - mean).T.dot(X - mean))
    return variance


@snippet("mlfs_variance_std", DATA_OP + "calculate_variance, calculate_std_dev", _x,
         second="last")
def variance(X):
    return _variance(X), np.sqrt(_variance(X))


@snippet("mlfs_covariance_matrix", DATA_OP + "calculate_covariance_matrix", _x, second="last")
def covariance_matrix(X, Y=None):
    if Y is None:
        Y = X
    n_samples = np.shape(X)[0]
    covariance_matrix = (1 / (n_samples-1)) * (X - X.mean(axis=0)).T.dot(Y - Y.mean(axis=0))
    return np.array(covariance_matrix, dtype=float)


@snippet("mlfs_correlation_matrix", DATA_OP + "calculate_correlation_matrix", _x, second="last")
def correlation_matrix(X, Y=None):
    if Y is None:
        Y = X
    n_samples = np.shape(X)[0]
    covariance = (1 / n_samples) * (X - X.mean(0)).T.dot(Y - Y.mean(0))
    std_dev_X = np.expand_dims(np.sqrt(_variance(X)), 1)
    std_dev_y = np.expand_dims(np.sqrt(_variance(Y)), 1)
    correlation_matrix = np.divide(covariance, std_dev_X.dot(std_dev_y.T))
    return np.array(correlation_matrix, dtype=float)


@snippet("mlfs_euclidean_distance", DATA_OP + "euclidean_distance",
         lambda: (randn(7, seed=1), randn(7, seed=2)))
def euclidean_distance(x1, x2):
    distance = 0
    for i in range(len(x1)):
        distance += pow((x1[i] - x2[i]), 2)
    return math.sqrt(distance)


def _normalize(X, axis=-1, order=2):
    l2 = np.atleast_1d(np.linalg.norm(X, order, axis))
    l2[l2 == 0] = 1
    return X / np.expand_dims(l2, axis)


@snippet("mlfs_normalize", DATA_MAN + "normalize", _x, second="last")
def normalize(X):
    return _normalize(X)


@snippet("mlfs_standardize", DATA_MAN + "standardize", _x, second="last")
def standardize(X):
    X_std = X
    mean = X.mean(axis=0)
    std = X.std(axis=0)
    for col in range(np.shape(X)[1]):
        if std[col]:
            X_std[:, col] = (X_std[:, col] - mean[col]) / std[col]
    return X_std


@snippet("mlfs_to_categorical", DATA_MAN + "to_categorical, to_nominal",
         lambda: (randint(0, 4, 13),))
def to_categorical(x, n_col=None):
    if not n_col:
        n_col = np.amax(x) + 1
    one_hot = np.zeros((x.shape[0], n_col))
    one_hot[np.arange(x.shape[0]), x] = 1
    return one_hot, np.argmax(one_hot, axis=1)


@snippet("mlfs_make_diagonal", DATA_MAN + "make_diagonal", lambda: (randn(7),))
def make_diagonal(x):
    m = np.zeros((len(x), len(x)))
    for i in range(len(m[0])):
        m[i, i] = x[i]
    return m


@snippet("mlfs_polynomial_features", DATA_MAN + "polynomial_features (degree 2)",
         lambda: (randn(13, 3),))
def polynomial_features(X, degree=2):
    from itertools import combinations_with_replacement
    n_samples, n_features = np.shape(X)
    combs = [combinations_with_replacement(range(n_features), i) for i in range(0, degree + 1)]
    combinations = [item for sublist in combs for item in sublist]
    n_output_features = len(combinations)
    X_new = np.empty((n_samples, n_output_features))
    for i, index_combs in enumerate(combinations):
        X_new[:, i] = np.prod(X[:, index_combs], axis=1)
    return X_new
