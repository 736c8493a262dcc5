"""Bad input: one-line errors that name the problem and the fix."""

from __future__ import annotations

import numpy as np
import pytest

from streamridge import StreamRidgeClassifierCV, StreamRidgeCV
from streamridge.errors import FoldError, InputError, NonFiniteError, ParameterError
from streamridge.folds.schemes import FoldScheme
from streamridge.stats.kernel import from_chunk


def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_nonfinite_rows_named_and_skippable(rng):
    X = rng.standard_normal((500, 4))
    y = X.sum(1) + rng.standard_normal(500)
    X[123, 2] = np.nan
    y[321] = np.inf
    with pytest.raises(NonFiniteError) as e:
        StreamRidgeCV(chunk_rows=100).fit(X, y)
    msg = one_line(e)
    assert "rows 100-199" in msg and "123" in msg and "skip_nonfinite" in msg
    est = StreamRidgeCV(chunk_rows=100, skip_nonfinite=True).fit(X, y)
    keep = np.ones(500, bool)
    keep[[123, 321]] = False
    folds = FoldScheme("hash", 5).assign(0, 500)  # skipped rows keep their index: other folds unchanged
    ref = from_chunk(X[keep], y[keep, None], folds[keep], None, 5, 1)
    np.testing.assert_allclose(est.stats_.sxx, ref.sxx, rtol=1e-12)
    assert est.stats_.n_rows == 498


@pytest.mark.parametrize(
    ("make", "exc", "words"),
    [
        (
            lambda r: (r.standard_normal((10, 3)), r.standard_normal(9)),
            ValueError,
            "inconsistent numbers of samples",
        ),
        (
            lambda r: (np.array([["a", "b"], ["c", "d"]] * 5), np.ones(10)),
            ValueError,
            "Convert your data to numeric",
        ),
        (lambda r: (np.zeros((0, 3)), np.zeros(0)), ValueError, "0 sample"),
        (lambda r: (r.standard_normal((3, 3)), r.standard_normal(3)), FoldError, "3 sample(s) but cv=5"),
    ],
)
def test_shape_and_dtype_errors(rng, make, exc, words):
    X, y = make(rng)
    with pytest.raises(exc) as e:
        StreamRidgeCV().fit(X, y)
    assert words in one_line(e)


def test_fewer_groups_than_folds_and_empty_fold(rng):
    X, y = rng.standard_normal((40, 3)), rng.standard_normal(40)
    with pytest.raises(FoldError, match="3 distinct groups but cv=5"):
        StreamRidgeCV(cv=5).fit(X, y, groups=np.repeat([1, 2, 3], [10, 10, 20]))
    with pytest.raises(FoldError, match="at least 2 distinct groups"):
        StreamRidgeCV(cv="groups").fit(X, y, groups=np.zeros(40))
    with pytest.raises(ParameterError, match="needs groups"):
        StreamRidgeCV(cv="groups").fit(X, y)
    w = np.ones(40)
    w[FoldScheme("hash", 4).assign(0, 40) == 2] = 0.0  # fold 2 keeps its rows but has no weight
    with pytest.raises(FoldError, match=r"fold\(s\) \[2\] have zero total sample weight"):
        StreamRidgeCV(cv=4).fit(X, y, sample_weight=w)


@pytest.mark.parametrize("alphas", [[-1.0], [0.0, 1.0], [np.nan], [np.inf], []])
def test_bad_alphas(rng, alphas):
    with pytest.raises(ParameterError) as e:
        StreamRidgeCV(alphas).fit(rng.standard_normal((30, 2)), rng.standard_normal(30))
    assert "alphas must be" in one_line(e)


def test_negative_weights_and_bad_params(rng):
    X, y = rng.standard_normal((30, 2)), rng.standard_normal(30)
    w = np.ones(30)
    w[7] = -1
    with pytest.raises(InputError, match="non-negative; got a negative weight at row 7"):
        StreamRidgeCV().fit(X, y, sample_weight=w)
    for params, word in [
        ({"cv": 1}, "cv must be"),
        ({"solver": "qr"}, "solver must be"),
        ({"alpha_rule": "x"}, "alpha_rule"),
        ({"selection": "sideways"}, "selection must be"),
    ]:
        with pytest.raises(ParameterError, match=word):
            StreamRidgeCV(**params).fit(X, y)


def test_classifier_errors(rng):
    X = rng.standard_normal((30, 2))
    with pytest.raises(InputError, match="only one class"):
        StreamRidgeClassifierCV().fit(X, np.ones(30))
    with pytest.raises(ParameterError, match="classes must be passed on the first call"):
        StreamRidgeClassifierCV().partial_fit(X, np.arange(30) % 2)
    c = StreamRidgeClassifierCV().partial_fit(X, np.arange(30) % 2, classes=[0, 1])
    with pytest.raises(InputError, match=r"labels \[2\] are not among classes"):
        c.partial_fit(X, np.full(30, 2))
    with pytest.raises(ValueError, match="Unknown label type"):
        StreamRidgeClassifierCV().fit(X, rng.standard_normal(30))


def test_predict_with_wrong_number_of_features(rng):
    X, y = rng.standard_normal((30, 3)), rng.standard_normal(30)
    m = StreamRidgeCV().fit(X, y)
    with pytest.raises(ValueError, match="X has 2 features, but StreamRidgeCV is expecting 3 features"):
        m.predict(X[:, :2])
    import dask.array as da

    with pytest.raises(InputError, match="X has 2 features"):
        m.predict(da.from_array(X[:, :2]))
    with pytest.raises(ValueError, match="expecting 3 features"):
        m.partial_fit(X[:, :2], y)
