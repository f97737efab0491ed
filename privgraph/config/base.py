"""The base of every section of ``pipelines.yaml``: a strict, frozen pydantic model (unknown keys
are errors) and the validators the sections share."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict

__all__ = ["Float", "Int", "StrictModel", "finite_positive"]


def _not_bool(v: Any) -> Any:
    """YAML's ``true`` is not the number 1: a boolean where a number belongs is a mistake."""
    if isinstance(v, bool):
        raise ValueError(f"expected a number, got {str(v).lower()}")
    return v


#: numbers that refuse booleans (pydantic's lax mode would read ``true`` as 1)
Int = Annotated[int, BeforeValidator(_not_bool)]
Float = Annotated[float, BeforeValidator(_not_bool)]


class StrictModel(BaseModel):
    """A section's base: unknown keys are errors and a loaded section is frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def finite_positive(v: Any, what: str = "epsilon") -> float:
    """``v`` as a float when it is a finite number > 0 (not a boolean); else ``ValueError`` naming ``what``."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{what} must be a number, got {v!r}")
    f = float(v)
    if math.isnan(f) or math.isinf(f):
        raise ValueError(f"{what} must be finite, got {f}")
    if f <= 0:
        raise ValueError(f"{what} must be > 0, got {f}")
    return f
