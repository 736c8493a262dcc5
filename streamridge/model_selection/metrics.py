"""Mergeable sufficient statistics of validation metrics, and the metrics computed from them.

A metric pass (:mod:`streamridge.model_selection.metric_pass`) applies M models per fold to the
rows of that fold and accumulates, per fold k and model m:

* regression (:class:`RegressionTally`): the weight ``n``, the weighted means
  of y and of the prediction p and their *centered* co-moments ``Syy, Spp,
  Syp`` (pairwise Chan merges, as the statistics pass: an offset of 1e6 costs no
  accuracy), the sums ``sum w |y - p|`` and ``sum w (y - p)^2``.  They give R^2,
  MAE, MSE, RMSE, explained variance and Pearson's correlation exactly.
* classification (:class:`ClassTally`): the weighted confusion matrix
  ``[true class, predicted class]`` (accuracy, balanced accuracy, per-class
  error, precision, recall, F1) and, for two classes, a histogram of the scores
  of each class in :data:`AUC_BINS` fixed bins (ROC AUC).

ROC AUC from the histograms: the score s of model (k, m) is standardized by its
mean and standard deviation on fold k (known from the statistics before the
pass) and binned by ``floor(B * Phi((s - mu) / sd))``: B equal-probability bins
of the normal approximation, monotone in s.  Pairs in different bins are ranked
exactly; the pairs that share a bin are counted as ties (1/2), so

.. code-block:: text

    |AUC_hist - AUC_exact| <= (1/2) sum_b P_b N_b / (P N)       (auc_bound)

with ``P_b, N_b`` the weights of positive/negative rows in bin b.  The bound
is computed from the same histograms and reported with every AUC; it is of the
order of ``1 / (2 B)`` for roughly normal scores (B = 1024: below 2e-3 in the tests,
with 60 rows per fold).

Every tally is a plain dataclass of NumPy arrays with a ``merge`` that is
exact for counts and the pairwise update for moments; nothing here imports
dask or touches files.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from streamridge.errors import ParameterError

#: histogram bins per class for ROC AUC (see the module docstring for the error bound)
AUC_BINS = 1024

REGRESSION_SCORERS = (
    "r2",
    "neg_mean_absolute_error",
    "neg_mean_squared_error",
    "neg_root_mean_squared_error",
    "explained_variance",
    "correlation",
)
BINARY_ONLY = ("f1", "precision", "recall", "roc_auc")
CLASSIFICATION_SCORERS = (
    "accuracy",
    "balanced_accuracy",
    "f1_macro",
    "f1_micro",
    "f1_weighted",
    *BINARY_ONLY,
)


def check_scoring(scoring: object, *, classifier: bool, n_classes: int = 2) -> str | None:
    """Validate a ``scoring`` name (scikit-learn's names) for the task; None passes through.

    Raises
    ------
    ParameterError
        A one-line message for an unknown name, a metric of the other task,
        or a two-class metric with more classes.
    """
    if scoring is None:
        return None
    if not isinstance(scoring, str) or scoring not in REGRESSION_SCORERS + CLASSIFICATION_SCORERS:
        raise ParameterError(
            f"unknown scoring {scoring!r}; use one of {list(REGRESSION_SCORERS)} for regression "
            f"or {list(CLASSIFICATION_SCORERS)} for a classifier"
        )
    if classifier and scoring in REGRESSION_SCORERS:
        raise ParameterError(
            f"scoring={scoring!r} is a regression metric; a classifier takes one of {list(CLASSIFICATION_SCORERS)}"
        )
    if not classifier and scoring in CLASSIFICATION_SCORERS:
        raise ParameterError(
            f"scoring={scoring!r} needs a classifier (StreamRidgeClassifierCV, --classify); "
            f"for regression use one of {list(REGRESSION_SCORERS)}"
        )
    if classifier and n_classes > 2 and scoring in BINARY_ONLY:
        alt = "f1_macro" if scoring == "f1" else "balanced_accuracy"
        raise ParameterError(
            f"scoring={scoring!r} is for two classes; got {n_classes} classes; use e.g. {alt!r}"
        )
    return scoring


# ---------------------------------------------------------------------- regression
@dataclass
class RegressionTally:
    """Per (fold, model, target) moments of targets and predictions.

    Attributes
    ----------
    weight : array of shape (K,)
    mean_y, syy : arrays of shape (K, T)
        Weighted mean and centered sum of squares of y.
    mean_p, spp, syp : arrays of shape (K, M, T)
        Weighted mean of the prediction, its centered sum of squares and the
        centered cross-product with y.
    sae, sse : arrays of shape (K, M, T)
        ``sum w |y - p|`` and ``sum w (y - p)^2``.
    """

    weight: np.ndarray
    mean_y: np.ndarray
    syy: np.ndarray
    mean_p: np.ndarray
    spp: np.ndarray
    syp: np.ndarray
    sae: np.ndarray
    sse: np.ndarray

    @classmethod
    def zeros(cls, K: int, M: int, T: int) -> RegressionTally:
        """The identity of :meth:`merge`."""
        z = np.zeros
        return cls(
            z(K), z((K, T)), z((K, T)), z((K, M, T)), z((K, M, T)), z((K, M, T)), z((K, M, T)), z((K, M, T))
        )

    def add_rows(self, k: int, Y: np.ndarray, P: np.ndarray, w: np.ndarray | None) -> None:
        """Merge the rows of fold k: targets Y (m, T), predictions P (m, M, T), weights w (m,) or None."""
        if Y.shape[0] == 0:
            return
        w1 = np.ones(Y.shape[0]) if w is None else np.asarray(w, dtype=np.float64)
        n = float(w1.sum())
        if n <= 0:
            return
        my = w1 @ Y / n
        mp = _wsum(w1, P) / n
        Yc = Y - my
        Pc = P - mp
        E = Y[:, None, :] - P
        part = RegressionTally(
            np.array([n]),
            my[None],
            (w1 @ (Yc * Yc))[None],
            mp[None],
            _wsum(w1, Pc * Pc)[None],
            _wsum(w1, Pc * Yc[:, None, :])[None],
            _wsum(w1, np.abs(E))[None],
            _wsum(w1, E * E)[None],
        )
        here = self.slot(k)
        merged = here.merge(part)
        for name in _REG_FIELDS:
            getattr(self, name)[k] = getattr(merged, name)[0]

    def slot(self, k: int) -> RegressionTally:
        """Fold k as a tally with K = 1 (copies)."""
        return RegressionTally(*(getattr(self, f)[k : k + 1].copy() for f in _REG_FIELDS))

    def merge(self, other: RegressionTally) -> RegressionTally:
        """Pairwise (Chan-Golub-LeVeque) merge of two tallies of the same shape."""
        n = self.weight + other.weight
        safe = np.where(n > 0, n, 1.0)
        fb = np.where(n > 0, other.weight / safe, 0.0)
        f = np.where(n > 0, self.weight * other.weight / safe, 0.0)
        dy = other.mean_y - self.mean_y  # (K, T)
        dp = other.mean_p - self.mean_p  # (K, M, T)
        f2, f3 = f[:, None], f[:, None, None]
        return RegressionTally(
            n,
            self.mean_y + dy * fb[:, None],
            self.syy + other.syy + f2 * dy * dy,
            self.mean_p + dp * fb[:, None, None],
            self.spp + other.spp + f3 * dp * dp,
            self.syp + other.syp + f3 * dp * dy[:, None, :],
            self.sae + other.sae,
            self.sse + other.sse,
        )


def _wsum(w: np.ndarray, A: np.ndarray) -> np.ndarray:
    """``sum_i w_i A[i]`` for A of shape (m, ...), as one matrix-vector product."""
    return (w @ A.reshape(A.shape[0], -1)).reshape(A.shape[1:])


_REG_FIELDS = ("weight", "mean_y", "syy", "mean_p", "spp", "syp", "sae", "sse")


def _ratio_score(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``1 - num / den`` with scikit-learn's ``force_finite`` convention (den == 0: 1 if num == 0 else 0)."""
    safe = np.where(den > 0, den, 1.0)
    return np.where(den > 0, 1.0 - num / safe, np.where(num == 0, 1.0, 0.0))


def regression_scores(t: RegressionTally, scoring: str) -> np.ndarray:
    """Per fold, model and target score of shape (K, M, T) (greater is better, as scikit-learn's scorers)."""
    n = np.where(t.weight > 0, t.weight, np.nan)[:, None, None]
    syy = t.syy[:, None, :]
    if scoring == "r2":
        return _ratio_score(t.sse, np.broadcast_to(syy, t.sse.shape))
    if scoring == "explained_variance":
        resid = np.maximum(syy - 2.0 * t.syp + t.spp, 0.0)  # centered sum of squares of y - p
        return _ratio_score(resid, np.broadcast_to(syy, resid.shape))
    if scoring == "neg_mean_absolute_error":
        return -t.sae / n
    if scoring == "neg_mean_squared_error":
        return -t.sse / n
    if scoring == "neg_root_mean_squared_error":
        return -np.sqrt(t.sse / n)
    if scoring == "correlation":
        den = np.sqrt(syy * t.spp)
        return np.where(den > 0, t.syp / np.where(den > 0, den, 1.0), 0.0)
    raise ParameterError(f"unknown regression scoring {scoring!r}; use one of {list(REGRESSION_SCORERS)}")


# ---------------------------------------------------------------------- classification
@dataclass
class ClassTally:
    """Per (fold, model) weighted confusion counts and (two classes) score histograms.

    Attributes
    ----------
    confusion : array of shape (K, M, C, C)
        Weight of rows of true class i predicted as class j.
    hist : array of shape (K, M, 2, B) or (K, M, 2, 0)
        Weight of rows of class 0 / class 1 per score bin (two classes, ROC AUC).
    """

    confusion: np.ndarray
    hist: np.ndarray

    @classmethod
    def zeros(cls, K: int, M: int, C: int, bins: int = 0) -> ClassTally:
        """The identity of :meth:`merge`."""
        return cls(np.zeros((K, M, C, C)), np.zeros((K, M, 2, bins)))

    def add_rows(
        self,
        k: int,
        cls: np.ndarray,
        S: np.ndarray,
        w: np.ndarray | None,
        norm: tuple[np.ndarray, np.ndarray] | None,
    ) -> None:
        """Add fold k's rows: class index (m,), scores S (m, M, T), weights (m,) or None.

        ``norm`` = (mean, sd) of shape (M,) of the binary score on fold k, for the AUC bins.
        """
        m, M, T = S.shape
        if m == 0:
            return
        C = self.confusion.shape[2]
        pred = (S[:, :, 0] > 0).astype(np.int64) if T == 1 else np.argmax(S, axis=2)  # (m, M)
        idx = (np.arange(M)[None, :] * C + cls[:, None]) * C + pred
        wt = (
            None
            if w is None
            else np.broadcast_to(np.asarray(w, dtype=np.float64)[:, None], idx.shape).ravel()
        )
        self.confusion[k] += np.bincount(idx.ravel(), weights=wt, minlength=M * C * C).reshape(M, C, C)
        B = self.hist.shape[3]
        if B and norm is not None:
            mu, sd = norm
            b = np.clip((ndtr((S[:, :, 0] - mu) / sd) * B).astype(np.int64), 0, B - 1)
            hidx = (np.arange(M)[None, :] * 2 + cls[:, None]) * B + b
            self.hist[k] += np.bincount(hidx.ravel(), weights=wt, minlength=M * 2 * B).reshape(M, 2, B)

    def merge(self, other: ClassTally) -> ClassTally:
        """Exact: counts add."""
        return ClassTally(self.confusion + other.confusion, self.hist + other.hist)


def _safe_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(b > 0, a / np.where(b > 0, b, 1.0), 0.0)


def per_class_error(t: ClassTally) -> np.ndarray:
    """Error rate of every true class, shape (K, M, C) (NaN where a fold has no row of that class)."""
    cm = t.confusion
    true = cm.sum(axis=3)
    diag = np.diagonal(cm, axis1=2, axis2=3)
    with np.errstate(invalid="ignore", divide="ignore"):
        return 1.0 - diag / true


def _f1(cm: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-class precision, recall, F1 and (true + predicted) weight, each (K, M, C)."""
    tp = np.diagonal(cm, axis1=2, axis2=3)
    true, pred = cm.sum(axis=3), cm.sum(axis=2)
    precision, recall = _safe_div(tp, pred), _safe_div(tp, true)
    return precision, recall, _safe_div(2.0 * tp, true + pred), true + pred


def classification_scores(t: ClassTally, scoring: str) -> np.ndarray:
    """Per fold and model score of shape (K, M) (as scikit-learn's metric with ``sample_weight``)."""
    cm = t.confusion
    total = cm.sum(axis=(2, 3))
    tp = np.diagonal(cm, axis1=2, axis2=3)
    if scoring in ("accuracy", "f1_micro"):
        return _safe_div(tp.sum(axis=2), total)
    if scoring == "balanced_accuracy":
        true = cm.sum(axis=3)
        present = true > 0
        recall = _safe_div(tp, true)
        return _safe_div((recall * present).sum(axis=2), present.sum(axis=2).astype(float))
    precision, recall, f1, seen = _f1(cm)
    if scoring == "f1":
        return f1[..., 1]
    if scoring == "precision":
        return precision[..., 1]
    if scoring == "recall":
        return recall[..., 1]
    if scoring == "f1_macro":
        present = seen > 0
        return _safe_div((f1 * present).sum(axis=2), present.sum(axis=2).astype(float))
    if scoring == "f1_weighted":
        true = cm.sum(axis=3)
        return _safe_div((f1 * true).sum(axis=2), true.sum(axis=2))
    if scoring == "roc_auc":
        return roc_auc(t)[0]
    raise ParameterError(
        f"unknown classification scoring {scoring!r}; use one of {list(CLASSIFICATION_SCORERS)}"
    )


def roc_auc(t: ClassTally) -> tuple[np.ndarray, np.ndarray]:
    """ROC AUC of class 1 vs class 0 and its error bound, each of shape (K, M); see the module docstring."""
    neg, pos = t.hist[:, :, 0], t.hist[:, :, 1]
    below = np.cumsum(neg, axis=2) - neg  # negatives in lower bins
    pairs = pos.sum(axis=2) * neg.sum(axis=2)
    ties = (pos * neg).sum(axis=2)
    auc = _safe_div((pos * below).sum(axis=2) + 0.5 * ties, pairs)
    return np.where(pairs > 0, auc, np.nan), np.where(pairs > 0, _safe_div(0.5 * ties, pairs), np.nan)


# ---------------------------------------------------------------------- per-fold scores
def fold_scores(tally: RegressionTally | ClassTally, scoring: str) -> np.ndarray:
    """Score of every model on every fold, shape (M, K, T) for regression (per target), (M, K, 1) for a classifier."""
    if isinstance(tally, ClassTally):
        return classification_scores(tally, scoring).T[:, :, None]
    return np.transpose(regression_scores(tally, scoring), (1, 0, 2))
