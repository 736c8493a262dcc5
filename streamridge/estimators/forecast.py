"""Closed-loop forecasting with a fitted model whose targets are its next inputs.

A model fitted on ``u(t) -> u(t+1)`` (one-step-ahead prediction, through its feature map:
an echo state network, delays, a pipeline of maps, or none) generates a series by itself:

.. code-block:: text

    warm-up:      x(t) = map(u(0..t)),            t = 0 .. W-1   (the given inputs, state carried)
    forecast 0:   y(0) = coef x(W-1) + b                          (the model's prediction of u(W))
    forecast k:   x = map step on input y(k-1),   y(k) = coef x + b

:func:`forecast` runs one warm-up and ``n_steps`` forecasts.  :func:`multistep_forecasts` is the
teacher-forced multi-step evaluation: the map runs over a true series, and from every ``every``-th
step (an *origin*) on, the model forecasts ``horizon`` steps in closed loop from the state the true
inputs left; all origins step together (one call of the map per step).  Its error per horizon is the
standard way of reporting how far ahead a model forecasts a chaotic series.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from streamridge.errors import InputError, ParameterError


@dataclass(frozen=True)
class MultiStepForecasts:
    """Closed-loop forecasts from many origins of one series (:func:`multistep_forecasts`).

    Attributes
    ----------
    origins : array of int of shape (n_origins,)
        Row of the series that the first forecast of each origin predicts.
    predictions : array of shape (n_origins, horizon, n_outputs)
        ``predictions[i, k]`` forecasts ``series[origins[i] + k]``.
    truth : array of shape (n_origins, horizon, n_outputs)
        ``series[origins[i] + k]``.
    scale : array of shape (n_outputs,)
        Standard deviation of the series (ddof=0), per output: the NRMSE's denominator.
    """

    origins: np.ndarray
    predictions: np.ndarray
    truth: np.ndarray
    scale: np.ndarray

    def nrmse(self) -> np.ndarray:
        """Root mean squared error over the origins divided by ``scale``, per horizon and output.

        Returns
        -------
        array of shape (horizon, n_outputs)
            Row k: the forecasts k + 1 steps ahead.
        """
        rmse = np.sqrt(np.mean((self.predictions - self.truth) ** 2, axis=0))
        return rmse / self.scale


def forecast(model: Any, n_steps: int, *, warmup: Any) -> np.ndarray:
    """Run ``model`` on the warm-up inputs, then feed each prediction back as the next input.

    Parameters
    ----------
    model : fitted StreamRidgeCV
        Its targets are its next inputs (as many outputs as inputs); its feature map (``features_``),
        if any, is stepped with its state carried.
    n_steps : int
        Forecasts to make (>= 1).
    warmup : array of shape (n_warmup, n_features_in) (or (n_warmup,) for one input)
        The inputs that drive the map from rest before the forecast (one series).

    Returns
    -------
    array of shape (n_steps, n_outputs)
        Row k forecasts the input ``n_warmup + k`` steps after the warm-up's first; 1-D targets give
        shape (n_steps,).

    Raises
    ------
    ParameterError
        ``n_steps`` not an integer >= 1, or a classifier.
    InputError
        A model whose outputs cannot be its inputs, or a warm-up of another width, with no rows or not finite.
    """
    _check_count("n_steps", n_steps)
    loop = _ClosedLoop(model)
    u = loop.inputs(warmup, "warmup")
    F, state = loop.run(u, 0, loop.fmap_state())
    paths = loop.close(F[-1:], [state], int(n_steps), u.shape[0])
    return paths[0, :, 0] if _one_target(model) else paths[0]


def multistep_forecasts(
    model: Any, series: Any, *, horizon: int, warmup: int, every: int = 1
) -> MultiStepForecasts:
    """Teacher-forced multi-step evaluation: closed-loop forecasts of ``horizon`` steps from many origins.

    The map runs over ``series`` (its true inputs, from rest); at every origin
    ``t = warmup, warmup + every, ...`` (while ``t + horizon <= len(series)``) the model forecasts
    ``series[t : t + horizon]`` in closed loop from the state that ``series[:t]`` left.
    Each origin's forecasts equal :func:`forecast` with ``warmup=series[:t]``.

    Parameters
    ----------
    model : fitted StreamRidgeCV
        See :func:`forecast`.
    series : array of shape (n_steps, n_features_in) (or (n_steps,) for one input)
    horizon : int
        Steps forecast from each origin (>= 1).
    warmup : int
        The first origin: steps of true input before any forecast (>= 1).
    every : int
        Steps between origins (>= 1).

    Returns
    -------
    MultiStepForecasts
        Forecasts and truth per origin and horizon; ``.nrmse()`` per horizon.

    Raises
    ------
    ParameterError
        A count that is not an integer >= 1, or a classifier.
    InputError
        As :func:`forecast`, or a series too short for one origin (``warmup + horizon`` rows).
    """
    for name, v in (("horizon", horizon), ("warmup", warmup), ("every", every)):
        _check_count(name, v)
    loop = _ClosedLoop(model)
    u = loop.inputs(series, "series")
    origins = np.arange(int(warmup), u.shape[0] - int(horizon) + 1, int(every))
    if origins.size == 0:
        raise InputError(
            f"the series has {u.shape[0]} steps, fewer than warmup + horizon = {int(warmup) + int(horizon)}; "
            "give a longer series or a shorter warmup or horizon"
        )
    lasts, states, state, start = [], [], loop.fmap_state(), 0
    for t in origins.tolist():
        F, state = loop.run(u[start:t], start, state)
        lasts.append(F[-1])
        states.append(state)
        start = t
    paths = loop.close(np.asarray(lasts), states, int(horizon), int(origins[0]))
    truth = u[origins[:, None] + np.arange(int(horizon))[None, :]]
    return MultiStepForecasts(origins, paths, truth, u.std(axis=0))


class _ClosedLoop:
    """A fitted model's map and linear read-out, stepped on its own outputs."""

    def __init__(self, model: Any) -> None:
        if not hasattr(model, "coef_"):
            from sklearn.utils.validation import check_is_fitted

            check_is_fitted(model, "coef_")  # scikit-learn's NotFittedError, as predict raises
        if hasattr(model, "classes_"):
            raise ParameterError(
                "forecast needs a regression model; a classifier's outputs are classes, not inputs"
            )
        self.coef = np.atleast_2d(np.asarray(model.coef_, dtype=np.float64))
        self.intercept = np.atleast_1d(np.asarray(model.intercept_, dtype=np.float64))
        self.fmap = getattr(model, "features_", None)
        self.n_in = int(model.n_features_in_)
        if self.coef.shape[0] != self.n_in:
            raise InputError(
                f"forecast feeds the model's {self.coef.shape[0]} output(s) back as its next inputs, but it takes "
                f"{self.n_in} input(s); fit it with targets that are its next inputs (y[t] = u[t + 1])"
            )

    def inputs(self, a: Any, name: str) -> np.ndarray:
        """``a`` as float64 rows of the model's input width (1-D: one input)."""
        u = np.asarray(a, dtype=np.float64)
        if u.ndim == 1 and self.n_in == 1:
            u = u[:, None]
        if u.ndim != 2 or u.shape[1] != self.n_in or u.shape[0] < 1:
            raise InputError(
                f"{name} must have shape (n_steps, {self.n_in}) with at least one step (the model's inputs); "
                f"got shape {u.shape}"
            )
        if not np.isfinite(u).all():
            raise InputError(
                f"{name} holds NaN or inf (first at step {int(np.flatnonzero(~np.isfinite(u).all(axis=1))[0])})"
            )
        return u

    def fmap_state(self) -> Any:
        return None if self.fmap is None else self.fmap.init_state()

    def run(self, u: np.ndarray, row_start: int, state: Any) -> tuple[np.ndarray, Any]:
        """Features of the rows ``u`` of one series, continuing from ``state``."""
        if self.fmap is None:
            return u, None
        return self.fmap.apply_chunk(u, row_start, None, state)

    def close(self, F_last: np.ndarray, states: list[Any], n_steps: int, row_start: int) -> np.ndarray:
        """``n_steps`` closed-loop forecasts from each of ``len(states)`` starts together.

        ``F_last[i]`` are the features of start i's last input, ``states[i]`` the map's state after it.

        Returns
        -------
        array of shape (n_starts, n_steps, n_outputs)
        """
        out = np.empty((len(states), n_steps, self.coef.shape[0]))
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging forecast goes to inf / NaN
            y = F_last @ self.coef.T + self.intercept
            for k in range(n_steps):
                out[:, k] = y
                if k + 1 == n_steps:
                    break
                F, states = self._step(y, states, row_start + k)
                y = F @ self.coef.T + self.intercept
        return out

    def _step(self, y: np.ndarray, states: list[Any], row: int) -> tuple[np.ndarray, list[Any]]:
        """The map on one input row per start (all starts in one call: the reservoir steps them together)."""
        if self.fmap is None:
            return y, states
        mapped = self.fmap.apply_chunks([(y[i : i + 1], row, None, s) for i, s in enumerate(states)])
        return np.vstack([F for F, _ in mapped]), [s for _, s in mapped]


def _check_count(name: str, v: Any) -> None:
    ok = isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and int(v) >= 1
    if not ok:
        raise ParameterError(f"{name} must be an integer >= 1; got {name}={v!r}")


def _one_target(model: Any) -> bool:
    """Targets given as a 1-D y (coef_ 1-D): forecasts are returned 1-D too."""
    return np.ndim(model.coef_) == 1
