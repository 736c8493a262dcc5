"""The forms of many targets, batch by batch, and their fold scores (the model selection's memory).

Without a feature selection the targets are independent until lambda is
chosen, so :func:`selection_forms` gives :func:`~streamridge.model_selection.choose.choose_model`
the statistics' forms one batch of targets at a time
(:class:`~streamridge.forms.build.TargetBatches`) when the forms of all targets
(``Bt`` and ``Bv``, ``2 K N T`` numbers) do not fit ``solve_memory``, and
:func:`target_scores` scores them batch by batch, every fold decomposed once.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from streamridge.errors import ParameterError
from streamridge.forms.build import (
    Forms,
    FullForm,
    TargetBatches,
    build_forms,
    build_full_form,
    each_batch,
    n_targets_of,
    target_batch_width,
)
from streamridge.solvers import fold_errors
from streamridge.solvers.quadratics import ValidationFactor
from streamridge.solvers.target_scores import fold_score_set
from streamridge.stats.foldstats import FoldStats


class SelectionOptions(Protocol):
    """What these functions read of a :class:`~streamridge.model_selection.choose.SelectionConfig`."""

    @property
    def fit_intercept(self) -> bool: ...
    @property
    def standardize(self) -> bool: ...
    @property
    def balanced(self) -> bool | np.ndarray: ...
    @property
    def solver(self) -> str: ...
    @property
    def scoring(self) -> str | None: ...
    @property
    def bands(self) -> Any: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def batched(self) -> bool: ...


__all__ = ["DEFAULT_SOLVE_BYTES", "selection_forms", "solve_bytes", "target_scores"]

#: memory of one batch of targets' forms in the model selection and the final solve, when not given (bytes)
DEFAULT_SOLVE_BYTES = 1 << 30


def target_scores(
    forms: Forms | TargetBatches, alphas: np.ndarray, cfg: SelectionOptions
) -> tuple[np.ndarray, np.ndarray | None]:
    """Fold errors and (with ``cfg.scoring``) scores of every lambda, fold and target, batch by batch.

    One batch without ``scoring``: the solver of ``cfg.solver`` on the forms, as
    ever.  Otherwise the quadratics of :mod:`streamridge.solvers.quadratics`
    (the eigen method through a factor of the validation form; squared error
    and the score from the same products), each fold decomposed once for all
    batches; the covariance solver runs on each batch.

    Returns
    -------
    E : array of shape (R, K, T)
    S : array of shape (R, K, T) or None
    """
    T, K, R = n_targets_of(forms), forms.n_folds, alphas.shape[0]
    if isinstance(forms, Forms) and cfg.scoring is None:
        return fold_errors(forms, alphas, solver=cfg.solver), None
    E = np.empty((R, K, T))
    S = None if cfg.scoring is None else np.empty((R, K, T))
    named = ("sse",) if cfg.scoring is None else ("sse", cfg.scoring)
    factors: dict[int, ValidationFactor] = {}  # every fold decomposed once, whatever the batches
    for cols, fb in each_batch(forms):
        if cfg.solver == "covariance" and S is None:
            E[:, :, cols] = fold_errors(fb, alphas, solver=cfg.solver)
            continue
        found = fold_score_set(fb, alphas, named, factors=factors)
        E[:, :, cols] = found["sse"]
        if S is not None and cfg.scoring is not None:
            S[:, :, cols] = found[cfg.scoring]
    return E, S


def selection_forms(
    stats: FoldStats,
    cfg: SelectionOptions,
    *,
    train_only: int = 0,
    forward: bool = False,
    whole: bool = False,
) -> tuple[Forms | TargetBatches, FullForm]:
    """The forms :func:`choose_model` takes for ``stats`` and ``cfg``, and the full form.

    The forms of all targets when their ``Bt`` and ``Bv`` fit ``cfg.max_bytes``
    (or ``whole``, or a feature selection needs them together); else
    :class:`~streamridge.forms.build.TargetBatches` of that width, with the
    full form of the first target (its ``A``: the default grid).  With ``cfg.scoring`` or
    ``cfg.bands`` the forms carry the folds' own moments.
    """
    fi, std, bal = cfg.fit_intercept, cfg.standardize, cfg.balanced
    moments = cfg.scoring is not None or cfg.bands is not None
    K, N, T = stats.n_folds - train_only, stats.n_features, stats.n_targets
    width = target_batch_width(K, N, cfg.max_bytes)
    if whole or not cfg.batched or width >= T:
        forms = build_forms(
            stats, fit_intercept=fi, standardize=std, balanced=bal, train_only=train_only, forward=forward,
            with_moments=moments,
        )  # fmt: skip
        return forms, build_full_form(stats, fit_intercept=fi, standardize=std, balanced=bal)
    batches = TargetBatches(
        stats, width=width, fit_intercept=fi, standardize=std, balanced=bal, train_only=train_only,
        forward=forward, with_moments=moments,
    )  # fmt: skip
    return batches, batches.full(slice(0, 1))


def solve_bytes(solve_memory: Any) -> int:
    """Bytes of ``solve_memory`` (an int, or a size such as ``"2GB"``); None: :data:`DEFAULT_SOLVE_BYTES`.

    Raises
    ------
    ParameterError
        For anything but a positive size.
    """
    if solve_memory is None:
        return DEFAULT_SOLVE_BYTES
    if isinstance(solve_memory, (int, np.integer)) and not isinstance(solve_memory, (bool, np.bool_)):
        value = int(solve_memory)
    else:
        value = _parse_size(solve_memory)
    if value < 1:
        raise ParameterError(
            f"solve_memory must be a positive size in bytes (or like '2GB'); got solve_memory={solve_memory!r}"
        )
    return value


_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
}


def _parse_size(text: Any) -> int:
    """``"2GB"``, ``"512MiB"``, ``"1e9"`` as bytes (-1 when it is not a size)."""
    if not isinstance(text, str):
        return -1
    t = text.strip().upper().replace(" ", "")
    num = t.rstrip("KMGTIB")
    unit = t[len(num) :]
    try:
        value = float(num)
    except ValueError:
        return -1
    if unit not in _UNITS or not np.isfinite(value):
        return -1
    return int(value * _UNITS[unit])
