"""Budget caps: what each scope of a privacy ledger may spend, checked before spending.

:class:`BudgetPolicy` caps each scope in its ledger unit (:data:`~privgraph.guarantee.SCOPE_UNITS`)
and checks BEFORE spending (like dp_accounting's ``supports``/``compose`` and diffprivlib's
``BudgetAccountant.check``/``spend``): :meth:`BudgetPolicy.check` lists the violations,
:meth:`BudgetPolicy.charge` records an entry only if the caps allow it. The ledger composes; this
module only compares what it composed with the caps.

This module imports neither torch nor prefect nor dask.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

from privgraph.errors import BudgetExceededError
from privgraph.guarantee import Scope
from privgraph.guarantee.ledger import LedgerEntry, PrivacyLedger, UnsupportedCompositionError
from privgraph.guarantee.params import check_epsilon

__all__ = ["BudgetPolicy"]


def _scope_map(caps: Mapping[str | Scope, Any], name: str) -> dict[Scope, Any]:
    if not isinstance(caps, Mapping):
        raise TypeError(f"{name} must be a mapping of scope -> value, got {type(caps).__name__}")
    known = [s.value for s in Scope]
    out: dict[Scope, Any] = {}
    for key, cap in caps.items():
        try:
            scope = Scope(key)
        except ValueError:
            raise ValueError(f"unknown budget scope {key!r}; known scopes: {known}") from None
        if scope in out:
            raise ValueError(f"budget scope {scope.value!r} is given twice")
        out[scope] = cap
    return out


class BudgetPolicy:
    """Epsilon (and delta) caps per scope; scopes without a cap are not limited.

    Args:
        caps (Mapping[str | Scope, float]): e.g. ``{"features": 4.0, "edges": 2.0}``.
        delta_caps (Mapping[str | Scope, float], optional): the delta a capped scope may spend,
            e.g. ``{"edges": 1e-5}``; a capped scope without one admits pure DP only (delta 0).

    Raises:
        TypeError: ``caps`` is not a mapping or a cap is not a real number.
        ValueError: an unknown scope name, a scope given twice, a cap that is NaN, infinite
            or <= 0, or a delta cap outside (0, 1) or on a scope without an epsilon cap.

    A cap applies to the composed spend of its scope (:meth:`PrivacyLedger.spent`); a scope
    holding entries of several kinds cannot be checked against one cap, and the checks raise
    :class:`UnsupportedCompositionError` for it.

    >>> from privgraph.guarantee import Guarantee, GuaranteeKind
    >>> g = Guarantee(GuaranteeKind.EDGE_DP, 1.5, Scope.EDGES)
    >>> BudgetPolicy({"edges": 1.0}).check(PrivacyLedger([LedgerEntry("edges", "edge_rand", g)]))
    ["scope 'edges': spent epsilon 1.5 exceeds the cap 1.0"]
    """

    def __init__(
        self, caps: Mapping[str | Scope, float], delta_caps: Mapping[str | Scope, float] | None = None
    ) -> None:
        self._caps: dict[Scope, float] = {
            s: check_epsilon(c, f"caps[{s.value!r}]") for s, c in _scope_map(caps, "caps").items()
        }
        self._delta_caps: dict[Scope, float] = {}
        for s, d in _scope_map(delta_caps or {}, "delta_caps").items():
            if s not in self._caps:
                raise ValueError(f"delta_caps[{s.value!r}]: the scope has no epsilon cap")
            if isinstance(d, bool) or not isinstance(d, numbers.Real) or not (0.0 < float(d) < 1.0):
                raise ValueError(f"delta_caps[{s.value!r}] must be in (0, 1), got {d!r}")
            self._delta_caps[s] = float(d)

    @property
    def caps(self) -> dict[Scope, float]:
        return dict(self._caps)

    @property
    def delta_caps(self) -> dict[Scope, float]:
        """The delta cap of every capped scope (0.0: pure DP only)."""
        return {s: self._delta_caps.get(s, 0.0) for s in self._caps}

    def __repr__(self) -> str:
        inner = ", ".join(f"{s.value!r}: {c!r}" for s, c in self._caps.items())
        deltas = ", ".join(f"{s.value!r}: {c!r}" for s, c in self._delta_caps.items())
        return f"BudgetPolicy({{{inner}}}" + (f", delta_caps={{{deltas}}})" if deltas else ")")

    def check(self, ledger: PrivacyLedger) -> list[str]:
        """Human-readable violations of the caps (empty when ``ledger`` is within them)."""
        if not isinstance(ledger, PrivacyLedger):
            raise TypeError(f"ledger must be a PrivacyLedger, got {type(ledger).__name__}")
        out = []
        for scope, cap in self._caps.items():
            total = ledger.spent(scope)
            if total > cap:
                out.append(
                    f"scope {scope.value!r}: spent epsilon {total!r} exceeds the cap {cap!r}"
                )
            delta, delta_cap = ledger.spent_delta(scope), self._delta_caps.get(scope, 0.0)
            if delta > delta_cap:
                out.append(
                    f"scope {scope.value!r}: spent delta {delta!r} exceeds the delta cap {delta_cap!r}"
                    + ("" if delta_cap else " (no delta cap: pure DP only)")
                )
        return out

    def supports(self, ledger: PrivacyLedger, entry: LedgerEntry) -> bool:
        """Dry run: would ``ledger`` stay within the caps after recording ``entry``?"""
        try:
            return not self.check(ledger.copy().record(entry))
        except UnsupportedCompositionError:
            return False

    def charge(self, ledger: PrivacyLedger, entry: LedgerEntry) -> PrivacyLedger:
        """Record ``entry`` in ``ledger`` if the caps allow it (check before spend).

        Raises:
            BudgetExceededError: recording ``entry`` would exceed a cap; the ledger is unchanged.
            UnsupportedCompositionError: the capped scope's entries cannot be composed.
        """
        violations = self.check(ledger.copy().record(entry))
        if violations:
            raise BudgetExceededError(
                f"refusing {entry.stage}/{entry.mechanism} (epsilon {entry.epsilon!r}): "
                + "; ".join(v.replace("spent epsilon", "would-be spent epsilon") for v in violations)
            )
        return ledger.record(entry)

    def enforce(self, ledger: PrivacyLedger) -> None:
        """Raise :class:`~privgraph.errors.BudgetExceededError` if any cap is exceeded."""
        violations = self.check(ledger)
        if violations:
            raise BudgetExceededError("privacy budget exceeded: " + "; ".join(violations))
