"""Features from basis rows: Nystroem kernel features and distances to reference points."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from streamridge.errors import InputError
from streamridge.features._base import FeatureMap, Footprint
from streamridge.features._params import COUNT, SEED, Boolean, Choice, Constraints, NoneValue, Real, Rows

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


def _n_rows(given: Any, n: int) -> int:
    """Rows of the given basis (a valid one: see :class:`~streamridge.features._params.Rows`), else ``n``."""
    return n if given is None else int(np.shape(given)[0])


def _basis(given: Any, sample: np.ndarray | None, n: int, n_in: int, who: str) -> np.ndarray:
    B = np.asarray(given if given is not None else sample, dtype=np.float64)
    if B.ndim != 2 or B.shape[1] != n_in:
        raise InputError(
            f"{who}: the basis must have shape (n, {n_in}) for inputs of {n_in} columns; got {B.shape}"
        )
    if given is None and B.shape[0] < n:
        raise InputError(
            f"{who}: asked for {n} basis rows but the data has only n_samples={B.shape[0]}; ask for fewer"
        )
    return B


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
    _param_constraints: ClassVar[Constraints] = {
        "n_components": (COUNT,),
        "kernel": (Choice(KERNELS),),
        "gamma": (Real(0, low_open=True), NoneValue()),
        "degree": (COUNT,),
        "coef0": (Real(),),
        "basis": (Rows(), NoneValue()),
        "whiten": (Boolean(),),
        "seed": (SEED,),
    }

    def __init__(
        self,
        n_components: int = 100,
        *,
        kernel: str = "rbf",
        gamma: float | None = None,
        degree: int = 3,
        coef0: float = 1.0,
        basis: Any = None,
        whiten: bool = True,
        seed: int = 0,
    ) -> None:
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

    def footprint(self, n_features_in: int) -> Footprint:
        """Basis rows, and with ``whiten`` a ``c x c`` whitening matrix found with three more of that size."""
        c, n = _n_rows(self.basis, int(self.n_components)), int(n_features_in)
        square = 8 * c * c if self.whiten else 0
        held = 8 * c * n + square
        what = f"{c} basis rows of {n} values" + (f" and a {c} x {c} whitening matrix" if self.whiten else "")
        param = "n_components" if self.basis is None else "basis"
        label = f"nystroem(n_components={c})" if self.basis is None else f"nystroem(basis of {c} rows)"
        return Footprint(c, held, held + 3 * square, what, label, param)

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
    _param_constraints: ClassVar[Constraints] = {
        "n_references": (COUNT,),
        "references": (Rows(), NoneValue()),
        "metric": (Choice(METRICS),),
        "seed": (SEED,),
    }

    def __init__(
        self, n_references: int = 100, *, references: Any = None, metric: str = "euclidean", seed: int = 0
    ) -> None:
        self.n_references = n_references
        self.references = references
        self.metric = metric
        self.seed = seed

    @property
    def n_sample(self) -> int:
        """Reference rows sampled from the data (0 when ``references`` is given)."""
        return 0 if self.references is not None else int(self.n_references)

    def footprint(self, n_features_in: int) -> Footprint:
        """The reference rows."""
        r, n = _n_rows(self.references, int(self.n_references)), int(n_features_in)
        param = "n_references" if self.references is None else "references"
        label = (
            f"distances(n_references={r})"
            if self.references is None
            else f"distances(references of {r} rows)"
        )
        return Footprint(r, 8 * r * n, 8 * r * n, f"{r} reference rows of {n} values", label, param)

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
