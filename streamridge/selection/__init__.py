"""Feature selection for ridge regression from per-fold quadratic forms.

Three paths, all working on :class:`streamridge.forms.build.Forms` only (never on rows):

.. code-block:: python

    select_features(forms, alphas, *, direction, max_features=None, min_features=None,
                    force=(), patience=None, tol=0.0, one_se=False,
                    alpha_per_target=False, memory_budget=None) -> SelectionResult
    brute_force_path(forms, alphas, *, direction, ...same options...) -> SelectionResult
    op_rr(forms, full, alphas, *, max_features=None, min_features=None, force=(),
          one_se=False, alpha_per_target=False, memory_budget=None) -> SelectionResult

For fold k and feature set S the validation error of lambda is

.. code-block:: text

    SSE_k(S, lambda) = W' Av[S,S] W - 2 W' Bv[S] + cv,   W = (At[S,S] + lambda I)^-1 Bt[S]

and a set's criterion is ``min over the grid of sum_k sum_t SSE_k`` (with
``alpha_per_target``: ``sum_t min over the grid of sum_k SSE_k``).  At each step
every candidate set is scored; the lowest criterion wins, ties (relative 1e-9)
to the lowest feature index.  ``steps[0]`` of the result is the starting set
(forward: the forced features, or none with error ``sum(cv)``; backward: all
features).  The final set is the step of lowest criterion (ties, relative 1e-9, to fewer
features) among sets with ``min_features <= size <= max_features``, or with
``one_se`` the smallest set within one standard error of it.  Lambda of each
set is chosen by :func:`streamridge.solvers.grid.choose` (ties to the larger lambda).

Cost per step, R lambdas, K folds, n features in the set, m candidates:
backward O(R K n^2) after an O(R K N^3) start (Sherman-Morrison downdates);
forward O(R K n m) (bordered inverses); the brute-force reference O(m R K n^3).
State beyond ``memory_budget`` bytes (default: a quarter of available memory,\n256 MiB to 4 GiB) is rebuilt per step in lambda batches.

OP-RR (optimally pruned ridge regression) ranks features by LARS on the
full-data Gram matrix and picks the prefix length and lambda by K-fold CV.
"""

from __future__ import annotations

from streamridge.selection._oprr import lars_ranking, op_rr
from streamridge.selection._path import brute_force_path, select_features
from streamridge.selection._result import SelectionResult, Step

__all__ = ["SelectionResult", "Step", "brute_force_path", "lars_ranking", "op_rr", "select_features"]
