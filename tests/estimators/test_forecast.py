"""Closed-loop forecasting: equal to an explicit predict-then-feed-back loop; the teacher-forced evaluation."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import streamridge as sr
from streamridge.errors import InputError, ParameterError
from streamridge.estimators.forecast import MultiStepForecasts, forecast, multistep_forecasts
from streamridge.features import Delays, EchoStateNetwork, Pipeline, RandomHidden


def mackey_glass(n, tau=17, seed=0):
    """Mackey-Glass (tau = 17) sampled every time unit, centred and scaled: a chaotic series that stays
    predictable for tens of steps (rounding differences of 1e-16 grow slowly, unlike the logistic map's)."""
    lag = tau * 10
    x = np.full(lag + 1 + 10 * n, 1.2) + 0.05 * np.random.default_rng(seed).standard_normal(lag + 1 + 10 * n)
    for t in range(lag, len(x) - 1):
        x[t + 1] = x[t] + 0.1 * (0.2 * x[t - lag] / (1 + x[t - lag] ** 10) - 0.1 * x[t])
    x = x[lag + 1 :: 10][:n]
    return (x - 0.9) * 4


def explicit_loop(model, warm, n_steps):
    """Predict on the whole history, append the last prediction, repeat (obviously correct, quadratic)."""
    hist = np.asarray(warm, dtype=np.float64).reshape(len(warm), -1)
    out = []
    for _ in range(n_steps):
        y = np.atleast_1d(model.predict(hist)[-1])
        out.append(y)
        hist = np.vstack([hist, y[None, :]])
    return np.asarray(out)


MAPS = {
    "esn-leaky": lambda: EchoStateNetwork(
        40, leak_rate=0.5, input_scaling=0.8, bias_scaling=0.3, washout=10, seed=2
    ),
    "esn-sigmoid": lambda: EchoStateNetwork(30, activation="sigmoid", spectral_radius=0.7, seed=5),
    "delays-elm": lambda: Pipeline([Delays(3), RandomHidden(40, seed=1)]),
    "none": lambda: None,
}


@pytest.mark.parametrize("name", sorted(MAPS))
def test_forecast_equals_predict_then_feed_back(name):
    x = mackey_glass(1300)
    u, y = x[:-1, None], x[1:]
    model = sr.StreamRidgeCV(alphas=np.logspace(-8, 1, 10), cv=4, features=MAPS[name]()).fit(
        u[:1000], y[:1000]
    )
    got = forecast(model, 40, warmup=u[1000:1100])
    assert got.shape == (40,)
    np.testing.assert_allclose(got, explicit_loop(model, u[1000:1100], 40)[:, 0], rtol=0, atol=1e-10)
    np.testing.assert_allclose(forecast(model, 40, warmup=x[1000:1100]), got, rtol=0, atol=0)  # 1-D warm-up


def test_forecast_of_two_inputs_and_prefixes():
    """Two inputs and two outputs (x(t) and x(t - 8) of Mackey-Glass), the number of units chosen by prefixes."""
    x = mackey_glass(2008)
    z = np.c_[x[8:], x[:-8]]
    esn = EchoStateNetwork(60, leak_rate=0.8, input_scaling=0.5, washout=20, seed=3)
    model = sr.StreamRidgeCV(alphas=np.logspace(-10, 0, 11), cv=5, features=esn, feature_prefixes=[20, 60])
    model.fit(z[:1499], z[1:1500])
    got = forecast(model, 25, warmup=z[1500:1600])
    assert got.shape == (25, 2)
    np.testing.assert_allclose(got, explicit_loop(model, z[1500:1600], 25), rtol=0, atol=1e-10)
    assert np.abs(got[:10] - z[1600:1610]).max() < 0.05  # it does forecast the series ahead


def test_multistep_forecasts_equal_one_forecast_per_origin():
    x = mackey_glass(1600)
    model = sr.StreamRidgeCV(alphas=np.logspace(-8, 1, 10), cv=4, features=MAPS["esn-leaky"]())
    model.fit(x[:999, None], x[1:1000])
    series = x[1000:1300]
    res = multistep_forecasts(model, series, horizon=30, warmup=100, every=17)
    assert isinstance(res, MultiStepForecasts)
    np.testing.assert_array_equal(res.origins, np.arange(100, 271, 17))
    assert res.predictions.shape == res.truth.shape == (len(res.origins), 30, 1)
    for i, t in enumerate(res.origins):
        one = forecast(model, 30, warmup=series[:t])
        np.testing.assert_allclose(res.predictions[i, :, 0], one, rtol=0, atol=1e-10)
        np.testing.assert_array_equal(res.truth[i, :, 0], series[t : t + 30])
    err = np.sqrt(((res.predictions - res.truth) ** 2).mean(axis=0)) / series.std()
    np.testing.assert_allclose(res.nrmse(), err, rtol=1e-15, atol=0)
    assert res.nrmse()[0, 0] < res.nrmse()[-1, 0] < 1.0  # further ahead is harder


def test_nrmse_of_known_forecasts():
    res = MultiStepForecasts(
        origins=np.array([3, 5]),
        predictions=np.array([[[1.0], [2.0]], [[3.0], [6.0]]]),
        truth=np.array([[[1.0], [0.0]], [[2.0], [2.0]]]),
        scale=np.array([2.0]),
    )
    np.testing.assert_allclose(res.nrmse(), [[np.sqrt(0.5) / 2], [np.sqrt(10.0) / 2]], rtol=1e-15)


@pytest.fixture(scope="module")
def fitted():
    x = mackey_glass(600)
    return sr.StreamRidgeCV(cv=3, features=EchoStateNetwork(10, seed=1)).fit(x[:-1, None], x[1:]), x


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda m, x: forecast(m, 0, warmup=x[:50]),
            ParameterError,
            "n_steps must be an integer >= 1; got n_steps=0",
        ),
        (
            lambda m, x: forecast(m, 2.0, warmup=x[:50]),
            ParameterError,
            "n_steps must be an integer >= 1; got n_steps=2.0",
        ),
        (
            lambda m, x: forecast(m, True, warmup=x[:50]),
            ParameterError,
            "n_steps must be an integer >= 1; got n_steps=True",
        ),
        (
            lambda m, x: forecast(m, 5, warmup=np.zeros((50, 2))),
            InputError,
            "warmup must have shape (n_steps, 1) with at least one step (the model's inputs); got shape (50, 2)",
        ),
        (
            lambda m, x: forecast(m, 5, warmup=np.zeros((0, 1))),
            InputError,
            "warmup must have shape (n_steps, 1) with at least one step (the model's inputs); got shape (0, 1)",
        ),
        (
            lambda m, x: forecast(m, 5, warmup=np.r_[x[:9], np.nan]),
            InputError,
            "warmup holds NaN or inf (first at step 9)",
        ),
        (
            lambda m, x: multistep_forecasts(m, x[:60], horizon=20, warmup=50),
            InputError,
            "the series has 60 steps, fewer than warmup + horizon = 70; give a longer series or a shorter warmup or horizon",
        ),
        (
            lambda m, x: multistep_forecasts(m, x, horizon=20, warmup=50, every=0),
            ParameterError,
            "every must be an integer >= 1; got every=0",
        ),
    ],
)
def test_refusals(fitted, call, error, message):
    model, x = fitted
    with pytest.raises(error) as info:
        call(model, x)
    assert str(info.value) == message


def test_models_that_cannot_forecast(rng):
    u = rng.standard_normal((200, 2))
    with pytest.raises(InputError) as info:
        forecast(sr.StreamRidgeCV(cv=3).fit(u, u[:, 0]), 5, warmup=u[:10])
    assert str(info.value) == (
        "forecast feeds the model's 1 output(s) back as its next inputs, but it takes 2 input(s); "
        "fit it with targets that are its next inputs (y[t] = u[t + 1])"
    )
    clf = sr.StreamRidgeClassifierCV(cv=3).fit(u[:, :1], u[:, 0] > 0)
    with pytest.raises(
        ParameterError, match=r"^forecast needs a regression model; a classifier's outputs are classes"
    ):
        forecast(clf, 5, warmup=u[:10, :1])
    with pytest.raises(NotFittedError):
        forecast(sr.StreamRidgeCV(), 5, warmup=u[:10, :1])
