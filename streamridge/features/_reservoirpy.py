"""The parameters of an :class:`~streamridge.features.EchoStateNetwork` from a reservoirpy ``Reservoir`` node.

reservoirpy is an optional dependency: it is imported only by :func:`reservoir_params`.
Its reservoir's update (``reservoirpy.nodes.Reservoir``) is

.. code-block:: text

    x[t+1] = (1 - lr) x[t] + lr f(W x[t] + Win u[t+1] + bias)

the map's with ``leak_rate = lr``; the matrices (dense or scipy sparse) are taken as float64
arrays.  What the map cannot express (one leak rate per unit, noise, feedback, an activation
other than tanh, sigmoid, relu or identity) is refused, never approximated.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamridge.errors import ParameterError

_FUNCTIONS = ("tanh", "sigmoid", "relu", "identity")
"""reservoirpy's activations (``reservoirpy.activationsfunc``) that the map has, under the same names."""


def reservoir_params(reservoir: Any) -> dict[str, Any]:
    """``n_units``, ``W``, ``W_in``, ``bias``, ``leak_rate`` and ``activation`` of an initialized reservoir.

    Raises
    ------
    ParameterError
        Not a reservoirpy ``Reservoir``, not initialized, or a feature the map does not have.
    """
    from reservoirpy import activationsfunc
    from reservoirpy.nodes import Reservoir

    if not isinstance(reservoir, Reservoir):
        raise ParameterError(
            f"from_reservoirpy takes a reservoirpy.nodes.Reservoir; got {type(reservoir).__name__}"
        )
    W, W_in = getattr(reservoir, "W", None), getattr(reservoir, "Win", None)
    if callable(W) or callable(W_in) or W is None or W_in is None:
        raise ParameterError(
            "the reservoir is not initialized (its W and Win are not drawn yet); run it once, or call "
            "reservoir.initialize(u) with inputs u of the width it will take, then convert it"
        )
    _refuse_extras(reservoir)
    n = int(np.shape(W)[0])
    return {
        "n_units": n,
        "W": _dense(W),
        "W_in": _dense(W_in),
        "bias": _bias(getattr(reservoir, "bias", 0.0), n),
        "leak_rate": _leak_rate(getattr(reservoir, "lr", 1.0)),
        "activation": _activation(getattr(reservoir, "activation", None), activationsfunc),
    }


def _dense(a: Any) -> np.ndarray:
    """A dense float64 copy of a NumPy array or a scipy sparse matrix."""
    return np.array(a.toarray() if hasattr(a, "toarray") else a, dtype=np.float64)


def _bias(b: Any, n: int) -> np.ndarray:
    """The bias as ``n`` values (reservoirpy allows a number, or an array of shape (n,) or (n, 1))."""
    if callable(b):
        raise ParameterError("the reservoir's bias is not drawn yet; run the reservoir once, then convert it")
    v = _dense(b).reshape(-1)
    if v.size not in (1, n):
        raise ParameterError(f"the reservoir's bias has {v.size} values for {n} units; expected 1 or {n}")
    return np.broadcast_to(v, (n,)).copy()


def _leak_rate(lr: Any) -> float:
    """One leak rate (an array of equal rates counts as one)."""
    v = np.asarray(lr, dtype=np.float64).reshape(-1)
    if v.size == 0 or not np.all(v == v[0]):
        raise ParameterError(
            "the reservoir has one leak rate per unit; the map has one leak rate for all units (give lr as a number)"
        )
    return float(v[0])


def _activation(f: Any, functions: Any) -> str:
    """The name of one of reservoirpy's activations the map has."""
    for name in _FUNCTIONS:
        if f is getattr(functions, name, None):
            return name
    shown = getattr(f, "__name__", repr(f))
    raise ParameterError(
        f"the reservoir's activation {shown} is not one the map has; use one of {', '.join(_FUNCTIONS)} "
        "(reservoirpy.activationsfunc)"
    )


def _refuse_extras(reservoir: Any) -> None:
    """Older reservoirpy reservoirs may add noise, feedback or the 'external' update; the map has none of them."""
    if getattr(reservoir, "equation", "internal") != "internal":
        raise ParameterError(
            "the reservoir uses the 'external' update (the activation outside the leak); the map has the 'internal' "
            "one: x = (1 - lr) x + lr f(W x + Win u + bias)"
        )
    for noise in ("noise_rc", "noise_in", "noise_fb"):
        if float(getattr(reservoir, noise, 0.0) or 0.0) != 0.0:
            raise ParameterError(
                f"the reservoir adds noise ({noise}={getattr(reservoir, noise)}); the map has none"
            )
    if getattr(reservoir, "has_feedback", False):
        raise ParameterError("the reservoir has a feedback connection; the map has none")
