"""Random hidden layers: extreme learning machines (ELM) and random-vector functional links (RVFL)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from streamridge.features._base import FeatureMap, Footprint, uniform
from streamridge.features._params import COUNT, SEED, Boolean, Choice, Constraints, Real

ACTIVATIONS = ("tanh", "sigmoid", "relu", "rbf")


class RandomHidden(FeatureMap):
    """One random hidden layer: the features of an extreme learning machine (ELM).

    .. code-block:: text

        tanh, sigmoid, relu:  h_j(x) = g(w_j . x + b_j)
        rbf:                  h_j(x) = exp(-||x - w_j||^2 / s_j^2),  s_j = sqrt(n_in) (0.5 + |b_j|)

    with ``w_j ~ U(-input_scaling, input_scaling)^n_in`` and ``b_j ~ U(-bias_scaling, bias_scaling)``
    drawn from ``seed``.  With ``direct=True`` the inputs come first, then the hidden
    units (random-vector functional link, RVFL).  The unit order is fixed, so the first
    n features are a smaller network of the same family (``feature_prefixes``).

    Parameters
    ----------
    n_units : int
    activation : {"tanh", "sigmoid", "relu", "rbf"}
    input_scaling : float
    bias_scaling : float
    direct : bool
        Prepend the raw inputs (RVFL).
    seed : int
    """

    name = "random_hidden"
    _arrays = ("weights_", "bias_")
    _param_constraints: ClassVar[Constraints] = {
        "n_units": (COUNT,),
        "activation": (Choice(ACTIVATIONS),),
        "input_scaling": (Real(0, low_open=True),),
        "bias_scaling": (Real(0),),
        "direct": (Boolean(),),
        "seed": (SEED,),
    }

    def __init__(
        self,
        n_units: int = 100,
        *,
        activation: str = "tanh",
        input_scaling: float = 1.0,
        bias_scaling: float = 1.0,
        direct: bool = False,
        seed: int = 0,
    ) -> None:
        self.n_units = n_units
        self.activation = activation
        self.input_scaling = input_scaling
        self.bias_scaling = bias_scaling
        self.direct = direct
        self.seed = seed

    def footprint(self, n_features_in: int) -> Footprint:
        """Weights ``n_units x n_features_in`` and biases; width ``n_units`` (+ ``n_features_in`` with ``direct``)."""
        u, n = int(self.n_units), int(n_features_in)
        held = 8 * (u * n + u)
        width = u + (n if self.direct else 0)
        return Footprint(
            width, held, held, f"{u} x {n} input weights", f"random_hidden(n_units={u})", "n_units"
        )

    def _fit_arrays(self, n_in: int, sample: np.ndarray | None) -> None:
        rng = np.random.default_rng(int(self.seed))
        self.weights_ = uniform(rng, (int(self.n_units), n_in), self.input_scaling)
        self.bias_ = uniform(rng, (int(self.n_units),), self.bias_scaling)

    def _n_out(self) -> int:
        return int(self.n_units) + (self.n_features_in_ if self.direct else 0)

    def _fitted_shape(self, name: str) -> tuple[int, ...]:
        return {"weights_": (int(self.n_units), self.n_features_in_), "bias_": (int(self.n_units),)}[name]

    def apply_chunk(self, X: np.ndarray, row_start: int, groups: Any, state: Any) -> tuple[np.ndarray, Any]:
        """See :meth:`FeatureMap.apply_chunk` (stateless)."""
        X = np.asarray(X, dtype=np.float64)
        W, b = self.weights_, self.bias_
        if self.activation == "rbf":
            width2 = (np.sqrt(W.shape[1]) * (0.5 + np.abs(b))) ** 2
            d2 = (X * X).sum(axis=1)[:, None] - 2.0 * X @ W.T + (W * W).sum(axis=1)[None, :]
            H = np.exp(-np.maximum(d2, 0.0) / width2)
        else:
            H = X @ W.T
            H += b  # in place: a chunk's features are the largest array of the pass
            if self.activation == "tanh":
                np.tanh(H, out=H)
            elif self.activation == "sigmoid":
                H *= 0.5
                np.tanh(H, out=H)
                H += 1.0
                H *= 0.5
            else:
                np.maximum(H, 0.0, out=H)
        if self.direct:
            H = np.concatenate([X, H], axis=1)
        return H, None

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """``x0..`` for direct inputs, then ``h0..`` for hidden units."""
        units = [f"h{i}" for i in range(int(self.n_units))]
        direct = [f"x{i}" for i in range(self.n_features_in_)] if self.direct else []
        return np.asarray(direct + units, dtype=object)
