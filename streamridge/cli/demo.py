"""A built-in, locally generated data set: echo state network states driven by NARMA-10.

The reservoir-computing benchmark of Buteneers et al. (2013): a random
recurrent network of ``tanh`` units (an echo state network) is driven by an
i.i.d. input ``u(t) ~ U(0, 0.5)``; its states are the features and the output
of the NARMA-10 system driven by the same input is the target

.. code-block:: text

    y(t+1) = 0.3 y(t) + 0.05 y(t) sum_{i=0..9} y(t-i) + 1.5 u(t-9) u(t) + 0.1

Several independent time series share one reservoir (``reservoir_seed``) and
differ in their input (``seed``); ``groups`` holds the series id, so that
leave-one-series-out cross-validation (``cv="groups"``) is possible.  All
series are simulated in parallel as one batch matrix, so 100 000 rows of 200
states take about a second.
"""

from __future__ import annotations

import os

import numpy as np

NARMA_ORDER = 10
DEMO_ALPHAS = np.logspace(-10, 2, 25)
"""Lambda grid of the demo fit: reservoir readouts with many rows need very little ridge."""


def make_reservoir(
    n_reservoir: int = 200,
    *,
    spectral_radius: float = 0.9,
    input_scaling: float = 0.2,
    bias_scaling: float = 0.2,
    density: float = 0.2,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random echo state network weights.

    Parameters
    ----------
    n_reservoir : int
        Number of ``tanh`` units.
    spectral_radius : float
        Largest absolute eigenvalue of the recurrent weights after scaling.
    input_scaling, bias_scaling : float
        Input and bias weights are uniform on ``[-scaling, scaling]``.
    density : float
        Fraction of nonzero recurrent weights.
    seed : int

    Returns
    -------
    W : array of shape (n_reservoir, n_reservoir)
        Recurrent weights.
    w_in : array of shape (n_reservoir,)
        Input weights.
    bias : array of shape (n_reservoir,)
    """
    rng = np.random.default_rng([seed, 0x5EED])
    W = rng.standard_normal((n_reservoir, n_reservoir)) * (rng.random((n_reservoir, n_reservoir)) < density)
    radius = float(np.max(np.abs(np.linalg.eigvals(W))))
    W *= spectral_radius / (radius if radius > 0 else 1.0)
    w_in = rng.uniform(-input_scaling, input_scaling, n_reservoir)
    bias = rng.uniform(-bias_scaling, bias_scaling, n_reservoir)
    return W, w_in, bias


def narma10(u: np.ndarray) -> np.ndarray:
    """NARMA-10 output for a batch of input series.

    Parameters
    ----------
    u : array of shape (n_series, n_steps)
        Inputs, usually ``U(0, 0.5)``.

    Returns
    -------
    y : array of shape (n_series, n_steps + 1)
        ``y[:, t + 1]`` is the output after input ``u[:, t]``; ``y[:, :10] = 0``.
    """
    S, T = u.shape
    y = np.zeros((S, T + 1))
    window = np.zeros(S)  # sum_{i=0..9} y(t-i)
    with np.errstate(over="ignore", invalid="ignore"):  # diverging series are redrawn by the caller
        _narma_steps(u, y, window)
    return y


def _narma_steps(u: np.ndarray, y: np.ndarray, window: np.ndarray) -> None:
    for t in range(u.shape[1]):
        window += y[:, t]
        if t >= NARMA_ORDER:
            window -= y[:, t - NARMA_ORDER]
        if t < NARMA_ORDER - 1:
            continue
        y[:, t + 1] = 0.3 * y[:, t] + 0.05 * y[:, t] * window + 1.5 * u[:, t - 9] * u[:, t] + 0.1


def _stable_inputs(rng: np.random.Generator, n_series: int, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and NARMA-10 outputs, redrawing the (rare) series whose output diverges."""
    u = rng.uniform(0.0, 0.5, (n_series, n_steps))
    y = narma10(u)
    for _ in range(100):
        bad = ~np.all(np.isfinite(y) & (np.abs(y) < 1.0), axis=1)
        if not bad.any():
            return u, y
        u[bad] = rng.uniform(0.0, 0.5, (int(bad.sum()), n_steps))
        y[bad] = narma10(u[bad])
    raise RuntimeError("NARMA-10 diverged for 100 input draws in a row")  # pragma: no cover


def run_reservoir(
    u: np.ndarray, W: np.ndarray, w_in: np.ndarray, bias: np.ndarray, *, washout: int = 0
) -> np.ndarray:
    """States ``x(t) = tanh(W x(t-1) + w_in u(t) + bias)`` of a batch of series.

    Parameters
    ----------
    u : array of shape (n_series, n_steps)
    W, w_in, bias : reservoir weights, see :func:`make_reservoir`
    washout : int
        Leading steps whose states are discarded (the initial transient).

    Returns
    -------
    states : array of float32 of shape (n_series, n_steps - washout, n_reservoir)
    """
    S, T = u.shape
    N = W.shape[0]
    states = np.empty((S, T - washout, N), dtype=np.float32)
    x = np.zeros((S, N))
    Wt = np.ascontiguousarray(W.T)
    for t in range(T):
        x = np.tanh(x @ Wt + u[:, t, None] * w_in + bias)
        if t >= washout:
            states[:, t - washout] = x
    return states


def make_esn_narma(
    *,
    n_series: int = 20,
    series_length: int = 5000,
    n_reservoir: int = 200,
    washout: int = 100,
    seed: int = 0,
    reservoir_seed: int = 0,
    spectral_radius: float = 0.9,
    input_scaling: float = 0.2,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Echo state network states (features) and NARMA-10 outputs (target) of several series.

    Parameters
    ----------
    n_series : int
        Independent time series (inputs drawn from ``seed``), one group each.
    series_length : int
        Rows kept per series (after the washout).
    n_reservoir : int
        Features: reservoir units (no bias column; the estimator fits the intercept).
    washout : int
        Initial steps simulated and discarded per series.
    seed : int
        Seed of the inputs.  Use another seed for a held-out test series.
    reservoir_seed : int
        Seed of the reservoir weights; keep it fixed between training and test data.
    spectral_radius, input_scaling : float
        See :func:`make_reservoir`.

    Returns
    -------
    X : array of float32 of shape (n_series * series_length, n_reservoir)
        State ``x(t)`` after input ``u(t)``; rows ordered series by series.
    y : array of float64 of shape (n_series * series_length,)
        NARMA-10 output ``y(t + 1)``.
    groups : array of int32 of shape (n_series * series_length,)
        Series id of every row.
    """
    if n_series < 1 or series_length < 1 or n_reservoir < 1 or washout < 0:
        raise ValueError(
            "n_series, series_length and n_reservoir must be >= 1 and washout >= 0; got "
            f"n_series={n_series}, series_length={series_length}, n_reservoir={n_reservoir}, washout={washout}"
        )
    W, w_in, bias = make_reservoir(
        n_reservoir, spectral_radius=spectral_radius, input_scaling=input_scaling, seed=reservoir_seed
    )
    n_steps = washout + series_length
    u, y_all = _stable_inputs(np.random.default_rng([seed, 0x1A7A]), n_series, n_steps)
    states = run_reservoir(u, W, w_in, bias, washout=washout)
    X = states.reshape(n_series * series_length, n_reservoir)
    y = y_all[:, washout + 1 :].reshape(-1)
    groups = np.repeat(np.arange(n_series, dtype=np.int32), series_length)
    return X, y, groups


def feature_names(n_reservoir: int) -> list[str]:
    """Names ``r0 .. r{n-1}`` of the reservoir states."""
    return [f"r{i}" for i in range(n_reservoir)]


def nrmse(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Normalised root mean squared error ``sqrt(mean((y - yhat)^2) / var(y))``."""
    y_true = np.asarray(y_true, dtype=np.float64)
    err = np.mean((y_true - np.asarray(y_pred, dtype=np.float64)) ** 2)
    return float(np.sqrt(err / np.var(y_true)))


def write_demo(
    path: str | os.PathLike[str],
    *,
    n_series: int = 20,
    series_length: int = 5000,
    n_reservoir: int = 200,
    washout: int = 100,
    seed: int = 0,
    reservoir_seed: int = 0,
    chunk_rows: int | None = None,
) -> str:
    """Generate the ESN/NARMA-10 data set and write it to a zarr store.

    The store holds arrays ``X`` (with ``feature_names`` ``r0 ..``), ``y`` and
    ``groups``; see :func:`make_esn_narma` for the parameters.

    Returns
    -------
    str
        Absolute path of the store.
    """
    from streamridge.io.outputs import MARKER
    from streamridge.sources import write_zarr

    X, y, groups = make_esn_narma(
        n_series=n_series,
        series_length=series_length,
        n_reservoir=n_reservoir,
        washout=washout,
        seed=seed,
        reservoir_seed=reservoir_seed,
    )
    return write_zarr(
        path,
        X,
        y,
        groups,
        chunk_rows=chunk_rows or series_length,
        feature_names=feature_names(n_reservoir),
        target_names=["narma10"],
        root_attrs={MARKER: "demo-data"},
    )
