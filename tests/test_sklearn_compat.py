"""scikit-learn estimator conventions, checked by sklearn's own suite."""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from streamridge import StreamRidgeClassifierCV, StreamRidgeCV

# Folds are a function of the global row index: removing zero-weight rows or
# repeating rows shifts later rows into other folds, so the CV choice of
# lambda (not the ridge solution for a given lambda) can change.
_FOLDS_BY_ROW = "folds are assigned by global row index, so adding/removing rows changes the CV split"
EXPECTED = {
    "check_sample_weight_equivalence_on_dense_data": _FOLDS_BY_ROW,
    "check_sample_weights_invariance": _FOLDS_BY_ROW,
}


@parametrize_with_checks(
    [StreamRidgeCV(), StreamRidgeClassifierCV(), StreamRidgeClassifierCV(class_weight="balanced")],
    expected_failed_checks=lambda est: EXPECTED,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
