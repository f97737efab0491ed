"""Validation of parameters, one way for every module (diffprivlib's ``utils`` pattern).

A privacy budget is a real number, finite and > 0 (NaN, infinities, booleans and non-numbers are
refused, not only values <= 0: a widely used DP library accepts all three); probabilities and
integer parameters are checked the same way. ``TypeError`` for a wrong type, ``ValueError``
naming the parameter, the allowed range and the value. Imports nothing of privgraph.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

__all__ = ["check_epsilon", "check_probability", "check_int", "check_real_vector"]


def check_epsilon(value: Any, name: str = "epsilon", *, allow_zero: bool = False) -> float:
    """Validate a privacy budget: a real number, not bool, finite and > 0 (or >= 0)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    if math.isnan(v) or math.isinf(v):
        raise ValueError(f"{name} must be finite, got {v}")
    if v < 0 or (v == 0 and not allow_zero):
        op = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {op}, got {v}")
    return v


def check_probability(value: Any, name: str, *, open_low: bool = False, open_high: bool = False) -> float:
    """Validate a probability in [0, 1] (optionally open at either end)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    lo_ok = v > 0 if open_low else v >= 0
    hi_ok = v < 1 if open_high else v <= 1
    if math.isnan(v) or not (lo_ok and hi_ok):
        lo = "(0" if open_low else "[0"
        hi = "1)" if open_high else "1]"
        raise ValueError(f"{name} must be in {lo}, {hi}, got {v}")
    return v


def check_int(value: Any, name: str, *, minimum: int) -> int:
    """Validate an integer parameter >= ``minimum`` (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {int(value)}")
    return int(value)


def check_real_vector(value: Any, name: str, *, nonnegative: bool = False) -> np.ndarray:
    """Validate a non-empty 1-D array of finite real numbers (not a scalar, a string or booleans;
    with ``nonnegative`` every entry ``>= 0``); returns it as float64."""
    if isinstance(value, (bool, str, bytes)) or isinstance(value, numbers.Number):
        raise TypeError(f"{name} must be a 1-D array of real numbers, got {value!r}")
    arr = np.asarray(value)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise TypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {list(arr.shape)}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        bad = np.flatnonzero(~np.isfinite(arr))[:5].tolist()
        raise ValueError(f"{name} must be finite (NaN or inf found at {bad})")
    if nonnegative and np.any(arr < 0):
        raise ValueError(f"{name} must be >= 0, got negative entries at {np.flatnonzero(arr < 0)[:5].tolist()}")
    return arr
