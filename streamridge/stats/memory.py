"""Memory the statistics of a pass and its feature map need, checked before the pass starts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streamridge.errors import InputError


def available_memory() -> int | None:
    """Bytes of memory available to this process now (None where unknown)."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:
        return None


#: statistics of at least this many bytes (one copy) are accumulated into one running total
#: (``single_total``): the pass then holds one copy and a working set of read blocks and tiles instead
#: of the merge tree's 6-9 copies (1.5-2.3 GB at this size).  Below it the partitions keep their
#: layout (and the bits of their statistics); one total was not slower where measured (5 x 1 cells,
#: N = 256, T = 4,000, 44 MB, 16,000 rows of zarr: 1.2 s against 1.4-2.6 s on sync, 0.9-1.3 s against
#: 1.4-2.4 s on 2 threads).
SINGLE_TOTAL_BYTES = 256 * 2**20


def pass_copies(n_chunks: int, stats_bytes: int = 0, *, single_total: bool = False) -> int:
    """Copies of the statistics a pass over ``n_chunks`` chunks holds at its peak, at the least.

    With ``single_total`` and statistics of at least :data:`SINGLE_TOTAL_BYTES`
    (``stats_bytes``, one copy), one: every row is added into one running
    total, in row order, whatever the number of chunks or threads (measured: 5
    x 1 cells, N = 256, T = 4,000, 44 MB per copy, 16,000 rows of zarr in 1, 8
    or 32 partitions asked for: peak RSS growth 1.83 copies on sync, 2.08 on 2
    threads, against 5.7-9.3 for the tree; the rest is read blocks and tiles,
    a fixed working set of rows of X and y).
    Otherwise the merge tree's: the zero-initialised total, one chunk's result,
    one merge output, and the partial results of the binary merge tree
    (``floor(log2(n_chunks))``); more chunks in flight on a pool add more.
    Measured (N=300, C=50, K=5, 10 chunks): peak RSS growth 6.9 copies on the
    sync scheduler, 8.9 on 2 threads; this gives 6.
    """
    if single_total and stats_bytes >= SINGLE_TOTAL_BYTES:
        return 1
    return 3 + int(np.floor(np.log2(max(int(n_chunks), 1))))


def _gb(n: float) -> str:
    if n >= 1e14:
        return f"{n / 1e12:.3g} TB"
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def check_stats_memory(
    n_folds: int,
    n_classes: int,
    n_features: int | Sequence[int],
    n_targets: int,
    n_chunks: int = 1,
    *,
    mapped_by: str | None = None,
    single_total: bool = False,
) -> None:
    """Refuse, before the pass, statistics that cannot fit in the memory available now.

    One copy takes ``K x C x (N^2 + N T + N + 2 T + 2) x 8`` bytes; a pass
    holds at least :func:`pass_copies` copies (one where large statistics are
    added into one running total).  The check uses that lower bound, so it
    never refuses a pass that would fit.  With several targets
    the refusal names the part of ``X'Y`` (``K x N x T`` doubles), which grows
    with the targets; the model selection and the final solve take the
    targets in batches and add a fixed working set (``solve_memory``).

    Parameters
    ----------
    n_folds, n_classes, n_targets : int
        Cells and sizes of the statistics (``n_classes=1`` for regression).
    n_features : int or sequence of int
        Features of the statistics; a sequence: the widths of candidate feature maps run in
        one pass, each with statistics of its own (all of them counted).
    n_chunks : int
        Row chunks of the pass.
    mapped_by : str or None
        The feature map making the features (e.g. ``"esn(n_units=30000)"``), named in the refusal:
        the check runs on the width it declares, before it is drawn.
    single_total : bool
        The pass adds large statistics into one running total (a local scheduler, no checkpoint;
        :func:`streamridge.datapass.partitions.plan_pass`).

    Raises
    ------
    InputError
        One line naming the size, the memory available and the fix.
    """
    K, C, T = n_folds, n_classes, n_targets
    widths = [int(n_features)] if isinstance(n_features, (int, np.integer)) else [int(n) for n in n_features]
    one = sum(8 * K * C * (N * N + N * T + N + 2 * T + 2) for N in widths)
    avail = available_memory()
    copies = pass_copies(n_chunks, one, single_total=single_total)
    if avail is None or copies * one <= avail:
        return
    what = (
        f"{K} folds"
        + (f" x {C} classes" if C > 1 else "")
        + _widths(widths)
        + (f" x {T} targets" if T > 1 and C == 1 else "")
        + ("" if mapped_by is None or len(widths) > 1 else f" (the features of the map {mapped_by})")
    )
    xy = ""
    if C > 1:
        fix = "check that y holds class labels (not a continuous target) or merge rare classes"
    else:
        fix = (
            "use fewer features or folds" if mapped_by is None else "use a smaller feature map or fewer folds"
        )
        if len(widths) > 1:
            fix = "use fewer or smaller candidate feature maps, or fewer folds"
    if T > 1 and C == 1:
        N = sum(widths)
        xy = f" (X'Y alone: {K} x {N} x {T} = {_gb(8 * K * N * T)})"
        fix += ", or fit the targets in groups of columns (each is fitted alone with alpha_per_target)"
    held = "one copy" if copies == 1 else f"{copies} copies ({_gb(copies * one)})"
    raise InputError(
        f"the statistics of {what} take {_gb(one)} per copy{xy} and a pass over {n_chunks} chunk(s) holds at least "
        f"{held}, more than the {_gb(avail)} of memory available; {fix}"
    )


def _widths(widths: list[int]) -> str:
    """`` x N features``, or `` x N features for each of G candidate maps`` (a range where they differ)."""
    if len(widths) == 1:
        return f" x {widths[0]} features"
    lo, hi = min(widths), max(widths)
    n = f"{lo}" if lo == hi else f"{lo}-{hi}"
    return f" x {n} features for each of {len(widths)} candidate maps"


def check_map_memory(label: str, held: int, peak: int, what: str, param: str) -> None:
    """Refuse, before anything is drawn, a feature map whose arrays cannot fit in the memory available now.

    Parameters
    ----------
    label : str
        The map and the parameter that sizes it, e.g. ``"esn(n_units=30000)"``.
    held : int
        Bytes of the arrays the fitted map keeps.
    peak : int
        Bytes at the peak of fitting (the kept arrays and the fit's work arrays).
    what : str
        The largest arrays, e.g. ``"a 30000 x 30000 reservoir"``.
    param : str
        The parameter to make smaller.

    Raises
    ------
    InputError
        One line naming the sizes, the memory available and the fix.
    """
    avail = available_memory()
    if avail is None or peak <= avail:
        return
    at_peak = "" if peak == held else f" and {_gb(peak)} at the peak of its fit"
    raise InputError(
        f"the feature map {label} takes {_gb(held)} ({what}){at_peak}, more than the {_gb(avail)} of memory "
        f"available; use a smaller {param}"
    )
