"""Memory the statistics of a pass need, checked before the pass starts."""

from __future__ import annotations

from .errors import InputError


def available_memory() -> int | None:
    """Bytes of memory available to this process now (None where unknown)."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:
        return None


#: copies of the statistics held during a pass, at the least: the running total, a merge level, chunk results in flight
PASS_COPIES = 4


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def check_stats_memory(n_folds: int, n_classes: int, n_features: int, n_targets: int) -> None:
    """Refuse, before the pass, statistics that cannot fit in the memory available now.

    One copy takes ``K x C x (N^2 + N T + N + 2 T + 2) x 8`` bytes; a pass
    holds at least :data:`PASS_COPIES` copies.

    Parameters
    ----------
    n_folds, n_classes, n_features, n_targets : int
        Cells and sizes of the statistics (``n_classes=1`` for regression).

    Raises
    ------
    InputError
        One line naming the size, the memory available and the fix.
    """
    K, C, N, T = n_folds, n_classes, n_features, n_targets
    one = 8 * K * C * (N * N + N * T + N + 2 * T + 2)
    avail = available_memory()
    if avail is None or PASS_COPIES * one <= avail:
        return
    what = (
        f"{K} folds"
        + (f" x {C} classes" if C > 1 else "")
        + f" x {N} features"
        + (f" x {T} targets" if T > 1 and C == 1 else "")
    )
    fix = (
        "check that y holds class labels (not a continuous target) or merge rare classes"
        if C > 1
        else "use fewer features or folds"
    )
    raise InputError(
        f"the statistics of {what} take {_gb(one)} per copy and a pass holds at least {PASS_COPIES} copies "
        f"({_gb(PASS_COPIES * one)}), more than the {_gb(avail)} of memory available; {fix}"
    )
