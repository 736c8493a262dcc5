"""OP-RR: optimally pruned ridge regression (Buteneers et al. 2013, section 5).

Features are ranked once by least angle regression (LARS) on the full-data Gram
matrix; the prefix length of that ranking and lambda are then chosen by K-fold
CV from the per-fold forms.  The prefixes are evaluated by the incremental
forward engine (bordered inverses) fed with the ranking instead of a search,
so the whole path costs about one forward step per prefix.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from streamridge.errors import ParameterError
from streamridge.forms.build import Forms, FullForm
from streamridge.selection._forward import ForwardEngine
from streamridge.selection._options import check_options
from streamridge.selection._path import finish
from streamridge.selection._result import SelectionResult, make_step


def lars_ranking(A: np.ndarray, B: np.ndarray, n_samples: float) -> np.ndarray:
    """Features in order of entry into the LARS path of ``(A, B)``.

    Parameters
    ----------
    A : array of shape (N, N)
        Gram matrix ``X'X`` (centered and scaled as the model sees it).
    B : array of shape (N,) or (N, T)
        ``X'y``; several targets are ranked on their sum.
    n_samples : float
        Weight sum of the rows (only scales the LARS penalty, not the order).

    Returns
    -------
    array of int of shape (N,)
        LARS order; features LARS never activates (collinear ones) follow by
        decreasing ``|X'y|``, then index.
    """
    from sklearn.linear_model import lars_path_gram  # scikit-learn only where op-rr ranks features

    b = B if B.ndim == 1 else B.sum(axis=1)
    N = A.shape[0]
    _, active, _ = lars_path_gram(
        b.copy(), A.copy(), n_samples=max(1, round(float(n_samples))), max_iter=N, method="lar"
    )
    order = [int(f) for f in active]
    rest = sorted(set(range(N)) - set(order), key=lambda f: (-abs(b[f]), f))
    return np.array(order + rest, dtype=np.int64)


def op_rr(
    forms: Forms,
    full: FullForm,
    alphas: np.ndarray,
    *,
    max_features: int | None = None,
    min_features: int | None = None,
    force: Sequence[int] = (),
    one_se: bool = False,
    alpha_per_target: bool = False,
    memory_budget: int | None = None,
) -> SelectionResult:
    """Optimally pruned ridge regression: LARS ranking, CV over ranking prefixes and lambda.

    Parameters
    ----------
    forms : Forms
        Per-fold forms (CV of every prefix).
    full : FullForm
        Full-data training form; ``full.A`` and ``full.B`` give the LARS ranking.
    alphas : array of shape (R,)
    max_features, min_features, force, one_se, alpha_per_target, memory_budget
        As in :func:`streamridge.selection.select_features`; forced features
        lead the ranking (in index order), the others keep their LARS order.

    Returns
    -------
    SelectionResult
        ``direction="op-rr"``; ``steps[i]`` is the prefix of length
        ``len(force) + i``; ``selected`` the chosen prefix.
    """
    F, a, opts = check_options(
        forms,
        alphas,
        direction="op-rr",
        max_features=max_features,
        min_features=min_features,
        force=force,
        patience=None,
        tol=0.0,
        one_se=one_se,
        alpha_per_target=alpha_per_target,
        memory_budget=memory_budget,
        directions=("op-rr",),
    )
    if full.A.shape[0] != opts.n_features:
        raise ParameterError(
            f"full has {full.A.shape[0]} features but forms has {opts.n_features}; build both from the same statistics"
        )
    fixed = set(opts.force)
    ranking = list(opts.force) + [int(f) for f in lars_ranking(full.A, full.B, full.n) if f not in fixed]
    n = len(opts.force)
    with threadpool_limits(limits=1, user_api="blas"):  # see streamridge.selection._path
        engine = ForwardEngine(F, a, opts.force, opts.memory_budget, opts.max_features)
        steps = [make_step(-1, n, engine.fold_errors(), a, opts.per_target)]
        for f in ranking[n : opts.max_features]:
            engine.apply(f)
            n += 1
            steps.append(make_step(f, n, engine.fold_errors(), a, opts.per_target))
    return finish("op-rr", steps, opts, a, opts.force)
