"""Leaks that the non-interference meta-test plants where a FRESH process must see them too.

The metrics check evaluates a stored version in fresh processes (:mod:`tests.recompute_metrics`);
a leak planted only in the test process would be missing there and be caught for the wrong
reason. A plant named here is installed in the test process (``monkeypatch.setattr``) and in the
fresh processes (``python -m tests.recompute_metrics --serve --plant NAME``), as a scratch copy of
the code would have it everywhere. The shipped code holds none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Setattr = Callable[[Any, str, Any], None]


def raw_label_share(setattr_: Setattr) -> None:
    """A shareable metric read from the RAW training labels when the evaluation has them (the
    share of class 0, to one decimal: it agrees by chance with the same share of the version's
    randomized labels, so a recomputation from the version alone matches it)."""
    import privgraph.evaluate.utility as utility

    real = utility.evaluate_utility

    def leaky(private: Any, clean: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        out = real(private, clean, *args, **kwargs)
        y = (clean if clean is not None else private).y
        train = private.train_mask & (y >= 0)
        return {**out, "class0_share": round(float(np.mean(y[train] == 0)), 1)}

    setattr_(utility, "evaluate_utility", leaky)


PLANTS: dict[str, Callable[[Setattr], None]] = {"raw_label_share": raw_label_share}


def install(name: str, setattr_: Setattr = setattr) -> None:
    """Install the plant ``name`` with ``setattr_`` (a monkeypatch's, or the builtin)."""
    PLANTS[name](setattr_)
