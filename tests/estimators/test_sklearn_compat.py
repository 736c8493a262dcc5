"""scikit-learn estimator conventions, checked by sklearn's own suite (no expected failures).

The sample-weight equivalence check passes ``cv=`` as (train, test) index
arrays (leave-one-group-out), so the folds follow the rows rather than their
global index; ``class_weight="balanced"`` counts a row of weight w as w rows.
"""

from __future__ import annotations

from sklearn.utils.estimator_checks import (
    check_sample_weight_equivalence_on_dense_data,
    parametrize_with_checks,
)

from streamridge import StreamRidgeClassifierCV, StreamRidgeCV

ESTIMATORS = [StreamRidgeCV(), StreamRidgeClassifierCV(), StreamRidgeClassifierCV(class_weight="balanced")]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_sample_weight_equivalence_is_run_and_strict():
    """The sample-weight check is among the checks and passes (no xfail list hides it)."""
    for est in ESTIMATORS:
        check_sample_weight_equivalence_on_dense_data(type(est).__name__, est)
