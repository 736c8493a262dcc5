"""Features from basis rows: Nystroem kernel features and distances to reference points."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from ._base import FeatureMap, check_choice, check_count, check_positive

KERNELS = ("rbf", "laplacian", "polynomial")
METRICS = ("euclidean", "sqeuclidean", "cityblock")


def _sqdist(X: np.ndarray, B: np.ndarray) -> np.ndarray:
    d2 = (X * X).sum(axis=1)[:, None] - 2.0 * X @ B.T + (B * B).sum(axis=1)[None, :]
    return np.maximum(d2, 0.0)


def _cityblock(X: np.ndarray, B: np.ndarray) -> np.ndarray:
    out = np.empty((X.shape[0], B.shape[0]))
    for j in range(B.shape[0]):
        out[:, j] = np.abs(X - B[j]).sum(axis=1)
    return out


def _basis(given: Any, sample: np.ndarray | None, n: int, n_in: int, who: str) -> np.ndarray:
    B = np.asarray(given if given is not None else sample, dtype=np.float64)
    if B.ndim != 2 or B.shape[1] != n_in:
        raise InputError(f"{who}: the basis must have shape (n, {n_in}) for inputs of {n_in} columns; got {B.shape}")
    if given is None and B.shape[0] < n:
        raise InputError(f"{who}: asked for {n} basis rows but the data has only n_samples={B.shape[0]}; ask for fewer")
    return B


def _n_rows(given: Any, n: int) -> int:
    """Rows of the fitted basis: those of the basis given, else the ``n`` rows sampled."""
    return n if given is None else int(np.shape(given)[0])


class Nystroem(FeatureMap):
    """Kernel features from basis rows (Nystroem; sparse-basis kernel ridge regression).

    .. code-block:: text

        rbf:         k(x, b) = exp(-gamma ||x - b||^2)
        laplacian:   k(x, b) = exp(-gamma ||x - b||_1)
        polynomial:  k(x, b) = (gamma x . b + coef0)^degree
        features:    k(x, B) K_BB^(-1/2)   (whiten=True)    or    k(x, B)   (whiten=False)

    The basis is ``basis`` when given, otherwise ``n_components`` rows of the data
    chosen by a seeded reservoir sample (:func:`~streamridge.features.sample_rows`).
    With ``whiten=False`` feature j is the kernel column of basis row j, so removing
    feature j removes basis vector j (backward selection as in sparse-basis kernel RLS).

    Parameters
    ----------
    n_components : int
    kernel : {"rbf", "laplacian", "polynomial"}
    gamma : float or None
        None: 1 / n_features_in.
    degree : int
    coef0 : float
    basis : array of shape (n_components, n_features_in) or None
    whiten : bool
    seed : int
    """

    name = "nystroem"
    _arrays = ("basis_", "normalization_")
    _array_params = ("basis",)

    def __init__(self, n_components: int = 100, *, kernel: str = "rbf", gamma: float | None = None, degree: int = 3,
                 coef0: float = 1.0, basis: Any = None, whiten: bool = True, seed: int = 0) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.basis = basis
        self.whiten = whiten
        self.seed = seed

    @property
    def n_sample(self) -> int:
        """Basis rows sampled from the data (0 when ``basis`` is given)."""
        return 0 if self.basis is not None else int(self.n_components)

    def _check_params(self) -> None:
        check_count(self, "n_components")
        check_choice(self, "kernel", KERNELS)
        check_count(self, "degree")
        if self.gamma is not None:
            check_positive(self, "gamma")

    def _fit_arrays(self, n_in: int, sample: np.ndarray | None) -> None:
        B = _basis(self.basis, sample, int(self.n_components), n_in, "Nystroem")
        self.basis_ = B
        if self.whiten:
            s, U = np.linalg.eigh(self._kernel(B))
            s = np.maximum(s, 1e-12 * max(float(s.max()), 1e-300))
            self.normalization_ = (U / np.sqrt(s)) @ U.T
        else:
            self.normalization_ = np.zeros((0, 0))

    def _gamma(self) -> float:
        return 1.0 / self.n_features_in_ if self.gamma is None else float(self.gamma)

    def _kernel(self, X: np.ndarray) -> np.ndarray:
        B, g = self.basis_, self._gamma()
        if self.kernel == "rbf":
            return np.exp(-g * _sqdist(X, B))
        if self.kernel == "laplacian":
            return np.exp(-g * _cityblock(X, B))
        return (g * (X @ B.T) + float(self.coef0)) ** int(self.degree)

    def _n_out(self) -> int:
        return int(self.basis_.shape[0])

    def _fitted_shape(self, name: str) -> tuple[int, ...]:
        if name == "basis_":
            return (_n_rows(self.basis, int(self.n_components)), self.n_features_in_)
        r = int(self.basis_.shape[0])  # basis_ is checked first
        return (r, r) if self.whiten else (0, 0)

    def apply_chunk(self, X: np.ndarray, row_start: int, groups: Any, state: Any) -> tuple[np.ndarray, Any]:
        """See :meth:`FeatureMap.apply_chunk` (stateless)."""
        K = self._kernel(np.asarray(X, dtype=np.float64))
        return (K @ self.normalization_.T if self.whiten else K), None


class Distances(FeatureMap):
    """Distances to reference points (extreme minimal learning machine style features).

    Parameters
    ----------
    n_references : int
    references : array of shape (n_references, n_features_in) or None
        None: a seeded reservoir sample of the data's rows.
    metric : {"euclidean", "sqeuclidean", "cityblock"}
    seed : int
    """

    name = "distances"
    _arrays = ("references_",)
    _array_params = ("references",)

    def __init__(self, n_references: int = 100, *, references: Any = None, metric: str = "euclidean", seed: int = 0) -> None:
        self.n_references = n_references
        self.references = references
        self.metric = metric
        self.seed = seed

    @property
    def n_sample(self) -> int:
        """Reference rows sampled from the data (0 when ``references`` is given)."""
        return 0 if self.references is not None else int(self.n_references)

    def _check_params(self) -> None:
        check_count(self, "n_references")
        check_choice(self, "metric", METRICS)

    def _fit_arrays(self, n_in: int, sample: np.ndarray | None) -> None:
        self.references_ = _basis(self.references, sample, int(self.n_references), n_in, "Distances")

    def _n_out(self) -> int:
        return int(self.references_.shape[0])

    def _fitted_shape(self, name: str) -> tuple[int, ...]:
        return (_n_rows(self.references, int(self.n_references)), self.n_features_in_)

    def apply_chunk(self, X: np.ndarray, row_start: int, groups: Any, state: Any) -> tuple[np.ndarray, Any]:
        """See :meth:`FeatureMap.apply_chunk` (stateless)."""
        X = np.asarray(X, dtype=np.float64)
        if self.metric == "cityblock":
            return _cityblock(X, self.references_), None
        d2 = _sqdist(X, self.references_)
        return (d2 if self.metric == "sqeuclidean" else np.sqrt(d2)), None
