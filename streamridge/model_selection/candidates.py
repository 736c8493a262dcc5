"""The candidate feature map chosen together with lambda, by the same cross-validation.

Every candidate map of a pass has statistics of its own.  :func:`choose_candidate` runs
the one model selection (:func:`streamridge.model_selection.choose.choose_model`: lambda,
and prefixes or feature selection where asked) on each candidate's forms and takes the
candidate of smallest CV error:

.. code-block:: text

    err_g = CV error of candidate g at its chosen lambda (summed over folds and targets)
    se_g  = sqrt(K) * std over folds of its fold errors (ddof=1)   (the standard error of err_g)
    best  = argmin_g err_g; ties (equal to 1e-12 relative) go to the first candidate given
    band  = the candidates with err_g <= err_best + se_best      (the 1-SE band)

:func:`candidates_table` is the fitted ``candidates_`` of a fit: one row per candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamridge.model_selection import choose as model_choice
from streamridge.model_selection.choose import Choice, SelectionConfig

#: a candidate's forms: (forms of its folds, training form of all its rows)
FormsOf = Callable[[Any], tuple[Any, Any]]


@dataclass
class CandidateResult:
    """The candidates' CV errors and the one chosen.

    Attributes
    ----------
    best : int
        Index of the chosen candidate.
    cv_errors, std_errors : array of shape (G,)
        CV error of each candidate at its chosen lambda, and its standard error over folds.
    choices : list of Choice
        Each candidate's own choice (lambda, set, fold errors).
    """

    best: int
    cv_errors: np.ndarray
    std_errors: np.ndarray
    choices: list[Choice]

    @property
    def within_1se(self) -> np.ndarray:
        """Candidates whose CV error is within one standard error of the chosen one's."""
        bound = self.cv_errors[self.best] + self.std_errors[self.best]
        return np.asarray(self.cv_errors <= bound + 1e-12 * abs(bound))


def fold_error_sums(choice: Choice, per_target: bool) -> np.ndarray:
    """Validation error per fold at the chosen lambda(s), summed over targets: shape (K,)."""
    E, index = choice.errors, choice.index
    if per_target and np.ndim(index) == 1:
        return np.asarray(sum(E[int(i), :, t] for t, i in enumerate(index)))
    return np.asarray(E[int(index)].sum(axis=1))


def choose_candidate(stats: Sequence[Any], forms_of: FormsOf, config: SelectionConfig) -> CandidateResult:
    """The candidate (and its lambda) of smallest CV error; see the module docstring.

    Parameters
    ----------
    stats : sequence of FoldStats
        One per candidate, of the same rows and folds.
    forms_of : callable
        ``forms_of(stats) -> (forms, full)``, as the estimator builds them.
    config : SelectionConfig
    """
    choices, errors, ses = [], [], []
    for s in stats:
        forms, full = forms_of(s)
        choice = model_choice.choose_model(forms, full, config)  # looked up when called: the one selection
        per_fold = fold_error_sums(choice, config.per_target)
        K = per_fold.shape[0]
        choices.append(choice)
        errors.append(float(per_fold.sum()))
        ses.append(float(np.sqrt(K) * np.std(per_fold, ddof=1)) if K > 1 else 0.0)
    err = np.asarray(errors)
    best = int(np.flatnonzero(err <= err.min() + 1e-12 * abs(err.min()))[0])
    return CandidateResult(best, err, np.asarray(ses), choices)


def candidates_table(result: CandidateResult, params: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``candidates_``: per candidate its map's ``params``, chosen ``alpha``, ``cv_error``, ``std_error``,
    ``within_1se`` and ``chosen`` (JSON-safe: a lambda per target is a list)."""
    band = result.within_1se
    rows = []
    for g, (choice, p) in enumerate(zip(result.choices, params)):
        alpha = choice.alpha
        rows.append(
            {
                "params": dict(p),
                "alpha": float(alpha) if np.ndim(alpha) == 0 else [float(a) for a in np.ravel(alpha)],
                "cv_error": float(result.cv_errors[g]),
                "std_error": float(result.std_errors[g]),
                "within_1se": bool(band[g]),
                "chosen": g == result.best,
            }
        )
    return rows


def varied_params(params: Sequence[dict[str, Any]]) -> list[str]:
    """The parameters whose values differ among the candidates, in the order of the first candidate's."""
    names = list(params[0]) if params else []
    return [n for n in names if len({repr(p.get(n)) for p in params}) > 1]


def per_parameter(table: Sequence[dict[str, Any]]) -> dict[str, list[tuple[Any, float]]]:
    """For every varied parameter, each of its values with the smallest CV error of the candidates having it."""
    params = [row["params"] for row in table]
    out: dict[str, list[tuple[Any, float]]] = {}
    for name in varied_params(params):
        best: dict[str, tuple[Any, float]] = {}
        for row in table:
            v = row["params"].get(name)
            key = repr(v)
            if key not in best or row["cv_error"] < best[key][1]:
                best[key] = (v, float(row["cv_error"]))
        out[name] = list(best.values())
    return out
