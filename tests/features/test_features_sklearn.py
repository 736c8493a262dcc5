"""The feature maps pass scikit-learn's estimator checks (transformer API)."""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from streamridge.features import Concat, Delays, Distances, EchoStateNetwork, Nystroem, Pipeline, RandomHidden

# rows are time steps for stateful maps: their output depends on row order by design
STATEFUL = {
    "check_methods_sample_order_invariance": "rows are time steps of a series: the output depends on their order",
    "check_methods_subset_invariance": "rows are time steps of a series: a subset is another series",
}


def expected_failed_checks(est):
    return STATEFUL if est.stateful else {}


@parametrize_with_checks(
    [
        RandomHidden(5),
        RandomHidden(4, activation="rbf", direct=True),
        EchoStateNetwork(5),
        Nystroem(3),
        Distances(2),
        Delays(2),
        Concat([RandomHidden(2), Nystroem(2)]),
        Pipeline([Delays(1), RandomHidden(3)]),
    ],
    expected_failed_checks=expected_failed_checks,
)
def test_sklearn_transformer_checks(estimator, check):
    check(estimator)
