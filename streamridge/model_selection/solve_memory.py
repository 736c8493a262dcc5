"""``solve_memory``: the memory of one batch of targets' forms in the model selection and the final solve.

:func:`solve_bytes` reads the parameter (an int of bytes or a size such as ``"2GB"``);
:func:`streamridge.model_selection.choose.selection_forms` sizes the target batches from it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamridge.errors import ParameterError

#: memory of one batch of targets' forms in the model selection and the final solve, when not given (bytes)
DEFAULT_SOLVE_BYTES = 1 << 30


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
