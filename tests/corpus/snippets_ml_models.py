"""Textbook models and solvers written with numpy: ML-From-Scratch (eriklindernoren) PCA,
k-means, regression, naive Bayes, kNN; CS231n's neural network case study; Karpathy's
min-char-rnn; Gaussian elimination and power iteration (README.md cites each)."""
import numpy as np
from snippet import randint, randn, registry, uniform
from snippets_ml import MLFS, _sigmoid, _x, euclidean_distance

SNIPPETS, snippet = registry()
CS231N = "cs231n.github.io/neural-networks-case-study/ "
RNN = ("gist.github.com/karpathy/d4dee566867f8291f086 (min-char-rnn.py, as copied in "
       "carpedm20/nn-study rnn-py/char-rnn.py) ")


@snippet("mlfs_pca_transform", MLFS + "mlfromscratch/unsupervised_learning/"
         "principal_component_analysis.py PCA.transform", _x)
def pca_transform(X, n_components=2):
    covariance = (1 / (np.shape(X)[0] - 1)) * (X - X.mean(axis=0)).T.dot(X - X.mean(axis=0))
    eigenvalues, eigenvectors = np.linalg.eig(covariance)
    idx = eigenvalues.argsort()[::-1]
    eigenvalues = eigenvalues[idx][:n_components]
    eigenvectors = np.atleast_1d(eigenvectors[:, idx])[:, :n_components]
    X_transformed = X.dot(eigenvectors)
    return np.abs(X_transformed)


@snippet("mlfs_kmeans_step", MLFS + "mlfromscratch/unsupervised_learning/k_means.py "
         "KMeans._create_clusters, _calculate_centroids",
         lambda: (randn(7, 2), np.array([[0.0, 0.0], [1.0, 1.0]])))
def kmeans_step(X, centroids):
    k = len(centroids)
    clusters = [[] for _ in range(k)]
    for sample_i, sample in enumerate(X):
        closest_i, closest_dist = 0, float('inf')
        for i, centroid in enumerate(centroids):
            distance = euclidean_distance(sample, centroid)
            if distance < closest_dist:
                closest_i, closest_dist = i, distance
        clusters[closest_i].append(sample_i)
    new = np.zeros((k, np.shape(X)[1]))
    for i, cluster in enumerate(clusters):
        new[i] = np.mean(X[cluster], axis=0)
    return new


@snippet("mlfs_linear_regression_gd", MLFS + "mlfromscratch/supervised_learning/regression.py "
         "Regression.fit, predict (3 iterations)",
         lambda: (randn(13, 3, seed=1), randn(13, seed=2), uniform(-0.5, 0.5, 4, seed=3)))
def linear_regression(X, y, w):
    X = np.insert(X, 0, 1, axis=1)
    for i in range(3):
        y_pred = X.dot(w)
        mse = np.mean(0.5 * (y - y_pred)**2 + 0)
        grad_w = -(y - y_pred).dot(X) + 0
        w -= 0.001 * grad_w
    return w, mse, X.dot(w)


@snippet("mlfs_least_squares", MLFS + "mlfromscratch/supervised_learning/regression.py "
         "LinearRegression.fit (gradient_descent=False)",
         lambda: (randn(13, 3, seed=1), randn(13, seed=2)))
def least_squares(X, y):
    X = np.insert(X, 0, 1, axis=1)
    U, S, V = np.linalg.svd(X.T.dot(X))
    S = np.diag(S)
    X_sq_reg_inv = V.T.dot(np.linalg.pinv(S)).dot(U.T)
    w = X_sq_reg_inv.dot(X.T).dot(y)
    return w


@snippet("mlfs_logistic_regression", MLFS + "mlfromscratch/supervised_learning/"
         "logistic_regression.py LogisticRegression.fit, predict (3 iterations)",
         lambda: (randn(13, 3, seed=1), randint(0, 2, 13, seed=2).astype(float),
                  uniform(-0.5, 0.5, 4, seed=3)))
def logistic_regression(X, y, param):
    X = np.insert(X, 0, 1, axis=1)
    for i in range(3):
        y_pred = _sigmoid(X.dot(param))
        param -= 0.1 * -(y - y_pred).dot(X)
    dot = X.dot(param)
    return param, np.round(_sigmoid(dot)).astype(int)


@snippet("mlfs_naive_bayes_fit", MLFS + "mlfromscratch/supervised_learning/naive_bayes.py "
         "NaiveBayes.fit, _calculate_prior",
         lambda: (randn(13, 3, seed=1), randint(0, 3, 13, seed=2)))
def naive_bayes_fit(X, y):
    classes = np.unique(y)
    parameters = []
    for i, c in enumerate(classes):
        x_where_c = X[np.where(y == c)]
        parameters.append([])
        for j in range(len(x_where_c[0, :])):
            col = x_where_c[:, j]
            parameters[i].append({"mean": col.mean(), "var": col.var()})
    priors = [np.shape(X[np.where(y == c)])[0] / np.shape(X)[0] for c in classes]
    return parameters, priors


@snippet("mlfs_knn_predict", MLFS + "mlfromscratch/supervised_learning/k_nearest_neighbors.py "
         "KNN.predict (k=3)", lambda: (randn(2, 2, seed=1), randn(7, 2, seed=2),
                                       randint(0, 2, 7, seed=3)))
def knn_predict(X_test, X_train, y_train, k=3):
    y_pred = np.empty(X_test.shape[0])
    for i, test_sample in enumerate(X_test):
        neighbors = np.empty((X_train.shape[0], 2))
        for j, observed_sample in enumerate(X_train):
            distance = euclidean_distance(test_sample, observed_sample)
            label = y_train[j]
            neighbors[j] = [distance, label]
        k_nearest_neighbors = neighbors[neighbors[:, 0].argsort()][:k]
        counts = np.bincount(k_nearest_neighbors[:, 1].astype('int'))
        y_pred[i] = counts.argmax()
    return y_pred


def _spiral():
    X = randn(13, 2, seed=1)
    y = randint(0, 3, 13, seed=2)
    return X, y, 0.01 * randn(2, 3, seed=3), np.zeros((1, 3))


@snippet("cs231n_softmax_classifier", CS231N + "'Training a Softmax Linear Classifier'", _spiral)
def softmax_classifier(X, y, W, b, reg=1e-3):
    num_examples = X.shape[0]
    scores = np.dot(X, W) + b
    exp_scores = np.exp(scores)
    probs = exp_scores / np.sum(exp_scores, axis=1, keepdims=True)
    correct_logprobs = -np.log(probs[range(num_examples), y])
    data_loss = np.sum(correct_logprobs) / num_examples
    reg_loss = 0.5 * reg * np.sum(W * W)
    loss = data_loss + reg_loss
    dscores = probs
    dscores[range(num_examples), y] -= 1
    dscores /= num_examples
    dW = np.dot(X.T, dscores)
    db = np.sum(dscores, axis=0, keepdims=True)
    dW += reg * W
    return loss, dW, db


def _two_layer():
    X, y, _, _ = _spiral()
    return (X, y, 0.01 * randn(2, 10, seed=4), np.zeros((1, 10)), 0.01 * randn(10, 3, seed=5),
            np.zeros((1, 3)))


@snippet("cs231n_two_layer_net", CS231N + "'Training a Neural Network' (forward, backward, update)",
         _two_layer)
def two_layer_net(X, y, W, b, W2, b2, reg=1e-3, step_size=1e-0):
    num_examples = X.shape[0]
    hidden_layer = np.maximum(0, np.dot(X, W) + b)
    scores = np.dot(hidden_layer, W2) + b2
    exp_scores = np.exp(scores)
    probs = exp_scores / np.sum(exp_scores, axis=1, keepdims=True)
    correct_logprobs = -np.log(probs[range(num_examples), y])
    data_loss = np.sum(correct_logprobs) / num_examples
    reg_loss = 0.5 * reg * np.sum(W * W) + 0.5 * reg * np.sum(W2 * W2)
    loss = data_loss + reg_loss
    dscores = probs
    dscores[range(num_examples), y] -= 1
    dscores /= num_examples
    dW2 = np.dot(hidden_layer.T, dscores)
    db2 = np.sum(dscores, axis=0, keepdims=True)
    dhidden = np.dot(dscores, W2.T)
    dhidden[hidden_layer <= 0] = 0
    dW = np.dot(X.T, dhidden)
    db = np.sum(dhidden, axis=0, keepdims=True)
    dW2 += reg * W2
    dW += reg * W
    W += -step_size * dW
    b += -step_size * db
    W2 += -step_size * dW2
    b2 += -step_size * db2
    predicted_class = np.argmax(scores, axis=1)
    return loss, W, b, W2, b2, np.mean(predicted_class == y)


def _rnn():
    H, V = 10, 7
    return (0.01 * randn(H, V, seed=1), 0.01 * randn(H, H, seed=2), 0.01 * randn(V, H, seed=3),
            np.zeros((H, 1)), np.zeros((V, 1)), randn(H, 1, seed=4) * 0.1)


@snippet("rnn_char_loss_fun", RNN + "lossFun (3 steps)", _rnn, second="last")
def char_rnn_loss(Wxh, Whh, Why, bh, by, hprev, inputs=(1, 4, 2), targets=(4, 2, 6)):
    vocab_size = Why.shape[0]
    xs, hs, ys, ps = {}, {}, {}, {}
    hs[-1] = np.copy(hprev)
    loss = 0
    for t in range(len(inputs)):
        xs[t] = np.zeros((vocab_size, 1))
        xs[t][inputs[t]] = 1
        hs[t] = np.tanh(np.dot(Wxh, xs[t]) + np.dot(Whh, hs[t-1]) + bh)
        ys[t] = np.dot(Why, hs[t]) + by
        ps[t] = np.exp(ys[t]) / np.sum(np.exp(ys[t]))
        loss += -np.log(ps[t][targets[t], 0])
    dWxh, dWhh, dWhy = np.zeros_like(Wxh), np.zeros_like(Whh), np.zeros_like(Why)
    dbh, dby = np.zeros_like(bh), np.zeros_like(by)
    dhnext = np.zeros_like(hs[0])
    for t in reversed(range(len(inputs))):
        dy = np.copy(ps[t])
        dy[targets[t]] -= 1
        dWhy += np.dot(dy, hs[t].T)
        dby += dy
        dh = np.dot(Why.T, dy) + dhnext
        dhraw = (1 - hs[t] * hs[t]) * dh
        dbh += dhraw
        dWxh += np.dot(dhraw, xs[t].T)
        dWhh += np.dot(dhraw, hs[t-1].T)
        dhnext = np.dot(Whh.T, dhraw)
    for dparam in [dWxh, dWhh, dWhy, dbh, dby]:
        np.clip(dparam, -5, 5, out=dparam)
    return loss, dWxh, dWhh, dWhy, dbh, dby, hs[len(inputs)-1]


def _system():
    return randn(7, 7, seed=1) + 7 * np.eye(7), randn(7, seed=2)


@snippet("gauss_elimination_rows", "rikazry/compy linsys.py Elimin_Gauss", _system)
def elimin_gauss(A, b):
    n = len(b)
    for i in range(0, n-1):
        for j in range(i+1, n):
            if A[j, i] != 0.0:
                lam = A[j, i]/A[i, i]
                A[j, i+1:n] = A[j, i+1:n] - lam*A[i, i+1:n]
                b[j] = b[j] - lam*b[i]
    for i in range(n-1, -1, -1):
        b[i] = (b[i] - np.dot(A[i, i+1:n], b[i+1: n]))/A[i, i]
    return b


@snippet("gauss_jordan",
         "yipeichan/Numerical_Ananlysis_and_Programming l9-example-04.py solve_gau1",
         lambda: (randn(7, 7, seed=1) + 7 * np.eye(7), randn(7, 1, seed=2)))
def solve_gau1(A, b):
    tmp = A.copy()
    out = b.copy()
    for i in range(A.shape[0]):
        for j in range(A.shape[0]):
            if j == i:
                continue
            scale = tmp[j, i]/tmp[i, i]
            tmp[j, :] -= tmp[i, :]*scale
            out[j, :] -= out[i, :]*scale
    for i in range(A.shape[0]):
        out[i, :] /= tmp[i, i]
    return out


@snippet("power_iteration", "en.wikipedia.org/wiki/Power_iteration (Python example)",
         lambda: (randn(7, 7) @ randn(7, 7).T, uniform(0, 1, 7)))
def power_iteration(A, b_k, num_iterations=10):
    for _ in range(num_iterations):
        b_k1 = np.dot(A, b_k)
        b_k1_norm = np.linalg.norm(b_k1)
        b_k = b_k1 / b_k1_norm
    return b_k
