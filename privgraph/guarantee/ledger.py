"""Privacy accounting: the ledger of every mechanism application and its composition.

A :class:`LedgerEntry` records one application of one mechanism: which stage ran it, what it
promised (its :class:`~privgraph.guarantee.Guarantee`: kind, epsilon, scope), which disjoint
node partitions it touched, and its PUBLIC parameters. Entries are frozen and serialise to JSON;
their meaning never changes once written (old manifests must keep saying what they said).

:class:`PrivacyLedger` composes the entries of one scope for pure eps-DP guarantees:

* **sequential composition** where entries touch the same data: their epsilons add;
* **parallel composition** across disjoint node partitions: the maximum counts.

Each scope composes in ONE unit (:data:`~privgraph.guarantee.SCOPE_UNITS`): features in
feature-LDP, labels in label-LDP, edges in edge-level DP. A per-node (local) edge guarantee
states the edge-level figure it implies (DPRR and Warner RR at eps: 2 eps, since both endpoints
report an edge; LocalLap: 2 eps1 + eps2), and that figure is what counts. Concretely, for a
scope ``s``::

    spent(s) = max over partitions p of  sum of unit epsilon over the entries of s covering p

where an entry with ``partitions=None`` (the whole graph) covers every partition, so whole-graph
entries add to every partition's total. Partition ids must all refer to the SAME partitioning of
the node set (the run's one partitioning); ids of two different partitionings are not disjoint
sets and must not be mixed in one ledger.

The caps on what a ledger may spend are :class:`~privgraph.guarantee.budget.BudgetPolicy`'s
(its own module, above this one).

Approximate-DP entries (``delta > 0``, e.g. GAP's Gaussian aggregation perturbation, whose
mechanism converts its RDP curve to one (epsilon, delta) with ``dp-accounting``) compose by the
basic composition theorem: epsilons add and deltas add, sequentially, and the maximum counts
across disjoint partitions (:meth:`PrivacyLedger.spent_delta`). This is sound for any mix with
pure entries (delta 0); it is looser than composing several Gaussian entries' RDP curves first,
which a run with one Gaussian entry per scope does not need. Renyi-DP entries
(``GuaranteeKind.RDP``, an RDP curve without a conversion) can be recorded but are refused by
:meth:`PrivacyLedger.spent`: a mechanism states the (epsilon, delta) it converts to instead.

This module imports neither torch nor prefect nor dask.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from privgraph.errors import PrivgraphError
from privgraph.guarantee import SCOPE_UNITS, Guarantee, GuaranteeKind, Scope

__all__ = [
    "LedgerEntry",
    "PrivacyLedger",
    "UnsupportedCompositionError",
    "LEDGER_FORMAT",
]

#: The serialisation format tag of :meth:`PrivacyLedger.to_dict`.
LEDGER_FORMAT = "privgraph.ledger/2"
#: Formats :meth:`PrivacyLedger.from_dict` still reads (ledgers of published versions never change;
#: version 1 did not record the scope-unit epsilon, see :meth:`Guarantee.from_dict`).
READABLE_LEDGER_FORMATS = ("privgraph.ledger/1", LEDGER_FORMAT)

_RDP_MESSAGE = ("RDP entries are not composed by the ledger: the mechanism records the (epsilon, delta) "
                "its accountant converts the RDP curve to")


class UnsupportedCompositionError(PrivgraphError):
    """The ledger cannot compose these entries into one epsilon (mixed kinds, RDP, delta > 0)."""


# -- parameter hygiene ---------------------------------------------------------------------------
def _is_seed_key(key: str) -> bool:
    return "seed" in key.lower()


def _json_safe(value: Any, path: str) -> Any:
    """A deep, JSON-safe copy of ``value``; raises for arrays, seeds and non-JSON types."""
    if isinstance(value, np.ndarray):
        raise TypeError(
            f"params{path}: arrays are not allowed in ledger parameters (got shape "
            f"{list(value.shape)}); record a public summary (a number or a short list) instead"
        )
    if isinstance(value, np.generic):  # numpy scalars: convert to the Python equivalent
        value = value.item()
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        v = float(value)
        if not math.isfinite(v):
            raise ValueError(f"params{path}: must be finite to be stored as JSON, got {v}")
        return v
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"params{path}: keys must be strings, got {type(k).__name__} {k!r}")
            if _is_seed_key(k):
                raise ValueError(
                    f"params{path}[{k!r}]: seeds are never recorded (a seed plus the raw data "
                    f"replays the noise); keep it in the run's private record"
                )
            out[k] = _json_safe(v, f"{path}[{k!r}]")
        return out
    if isinstance(value, (list, tuple)):
        return [_json_safe(v, f"{path}[{i}]") for i, v in enumerate(value)]
    raise TypeError(
        f"params{path}: {type(value).__name__} is not JSON-safe (use None, bool, int, float, "
        f"str, lists and dicts with string keys)"
    )


def _check_name(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__} {value!r}")
    if not value.strip():
        raise ValueError(f"{name} must be a non-empty string")
    return value


def _check_partitions(value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"partitions must be None or a sequence of ints, got {value!r}")
    parts: list[int] = []
    for p in value:
        if isinstance(p, bool) or not isinstance(p, numbers.Integral):
            raise TypeError(f"partitions: ids must be ints, got {type(p).__name__} {p!r}")
        if int(p) < 0:
            raise ValueError(f"partitions: ids must be >= 0, got {int(p)}")
        parts.append(int(p))
    if not parts:
        raise ValueError("partitions must be None (the whole graph) or a non-empty sequence of ids")
    if len(set(parts)) != len(parts):
        raise ValueError(f"partitions: duplicate ids in {parts}")
    return tuple(sorted(parts))


# -- entries -------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class LedgerEntry:
    """One application of one mechanism, as recorded in the ledger (frozen, serialisable).

    Args:
        stage (str): the pipeline stage that ran it, e.g. ``"privatize_features"``.
        mechanism (str): the mechanism's registry name, e.g. ``"feature_rr"``.
        guarantee (Guarantee): what the application promises (kind, epsilon, scope, ...).
        partitions (tuple[int, ...], optional): the disjoint node partitions this application
            touched; ``None`` means the whole graph (default: ``None``). Stored sorted.
        params (dict): the mechanism's PUBLIC parameters, JSON-safe: no arrays, and no key named
            or containing ``"seed"`` at any depth (default: ``{}``). Stored as a deep copy.
        note (str): free text, e.g. "10 samples from one dendrogram: post-processing"
            (default: ``""``).

    Raises:
        TypeError: a field has the wrong type, or ``params`` holds an array or a non-JSON value.
        ValueError: empty names, negative or duplicate partition ids, a seed in ``params``.
    """

    stage: str
    mechanism: str
    guarantee: Guarantee
    partitions: tuple[int, ...] | None = None
    params: dict[str, Any] = dataclasses.field(default_factory=dict, hash=False)
    note: str = ""

    def __post_init__(self) -> None:
        _check_name(self.stage, "stage")
        _check_name(self.mechanism, "mechanism")
        if not isinstance(self.guarantee, Guarantee):
            raise TypeError(
                f"guarantee must be a Guarantee, got {type(self.guarantee).__name__}"
            )
        object.__setattr__(self, "partitions", _check_partitions(self.partitions))
        if not isinstance(self.params, Mapping):
            raise TypeError(f"params must be a dict, got {type(self.params).__name__}")
        object.__setattr__(self, "params", _json_safe(self.params, ""))
        if not isinstance(self.note, str):
            raise TypeError(f"note must be a str, got {type(self.note).__name__}")

    @property
    def scope(self) -> Scope:
        return self.guarantee.scope

    @property
    def kind(self) -> GuaranteeKind:
        return self.guarantee.kind

    @property
    def epsilon(self) -> float:
        return self.guarantee.epsilon

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "mechanism": self.mechanism,
            "guarantee": self.guarantee.to_dict(),
            "partitions": None if self.partitions is None else list(self.partitions),
            "params": _json_safe(self.params, ""),
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LedgerEntry:
        if not isinstance(d, Mapping):
            raise TypeError(f"a ledger entry must be a dict, got {type(d).__name__}")
        missing = [k for k in ("stage", "mechanism", "guarantee") if k not in d]
        if missing:
            raise ValueError(f"ledger entry lacks {missing}: {dict(d)!r}")
        return cls(
            stage=d["stage"],
            mechanism=d["mechanism"],
            guarantee=Guarantee.from_dict(d["guarantee"]),
            partitions=d.get("partitions"),
            params=d.get("params") or {},
            note=d.get("note", ""),
        )


# -- the ledger ----------------------------------------------------------------------------------
def _compose_pure(entries: Iterable[LedgerEntry], value: Callable[[LedgerEntry], float]) -> float:
    """max over partitions of (whole-graph sum + that partition's sum) of ``value(entry)``; exact
    float sums."""
    whole: list[float] = []
    per_part: dict[int, list[float]] = {}
    for e in entries:
        if e.partitions is None:
            whole.append(value(e))
        else:
            for p in e.partitions:
                per_part.setdefault(p, []).append(value(e))
    if not per_part:
        return math.fsum(whole)
    return max(math.fsum(whole + eps) for eps in per_part.values())


def _fmt_partitions(parts: tuple[int, ...] | None) -> str:
    if parts is None:
        return "all"
    runs: list[str] = []
    start = prev = parts[0]
    for p in parts[1:] + (None,):  # type: ignore[operator]
        if p is not None and p == prev + 1:
            prev = p
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if p is not None:
            start = prev = p
    return ", ".join(runs)


def _md_cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


class PrivacyLedger:
    """The record of every mechanism application of a run, and its composition.

    Args:
        entries (iterable of LedgerEntry, optional): entries to start with (default: none).

    Entries on disjoint partitions compose in parallel, entries on the same partition add up:

    >>> g = Guarantee(GuaranteeKind.FEATURE_LDP, 1.0, Scope.FEATURES)
    >>> ledger = PrivacyLedger()
    >>> _ = ledger.record(LedgerEntry("features", "feature_rr", g, partitions=(0,)))
    >>> _ = ledger.record(LedgerEntry("features", "feature_rr", g, partitions=(1,)))
    >>> ledger.spent(Scope.FEATURES)
    1.0
    >>> _ = ledger.record(LedgerEntry("features.again", "feature_rr", g, partitions=(1,)))
    >>> ledger.spent("features")
    2.0
    """

    def __init__(self, entries: Iterable[LedgerEntry] = ()) -> None:
        self._entries: list[LedgerEntry] = []
        for e in entries:
            self.record(e)

    # -- recording ------------------------------------------------------------------------------
    def record(self, entry: LedgerEntry) -> PrivacyLedger:
        """Append ``entry`` (no budget check: use :meth:`BudgetPolicy.charge` for that)."""
        if not isinstance(entry, LedgerEntry):
            raise TypeError(f"entry must be a LedgerEntry, got {type(entry).__name__}")
        self._entries.append(entry)
        return self

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        return tuple(self._entries)

    def copy(self) -> PrivacyLedger:
        return PrivacyLedger(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[LedgerEntry]:
        return iter(tuple(self._entries))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PrivacyLedger):
            return NotImplemented
        return self._entries == other._entries

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"PrivacyLedger({len(self._entries)} entries)"

    # -- composition ----------------------------------------------------------------------------
    def kinds(self, scope: Scope | str) -> list[GuaranteeKind]:
        """The guarantee kinds recorded in ``scope``, in first-seen order."""
        scope = Scope(scope)
        seen: dict[GuaranteeKind, None] = {}
        for e in self._entries:
            if e.scope is scope:
                seen.setdefault(e.kind)
        return list(seen)

    def spent(self, scope: Scope | str, kind: GuaranteeKind | str | None = None) -> float:
        """The epsilon spent in ``scope`` (0.0 when nothing was recorded there).

        Without ``kind``, every entry counts with its guarantee in the scope's unit
        (:data:`~privgraph.guarantee.SCOPE_UNITS`, :attr:`Guarantee.ledger_epsilon`): for
        edges the edge-level figure (a per-node guarantee of DPRR at eps counts 2 eps). This is the
        figure the budget caps are checked against. With ``kind``, only the entries of that kind
        count, with their own epsilon (e.g. the per-node ``edge_ldp`` total).

        Entries compose sequentially where they cover the same partition (or the whole graph)
        and in parallel across disjoint partitions; see the module docstring.

        Entries with ``delta > 0`` compose by basic composition (their epsilons add like pure
        ones; :meth:`spent_delta` gives the delta that goes with this epsilon).

        Raises:
            UnsupportedCompositionError: the selected entries are RDP.
        """
        selected = self._selected(scope, kind)
        if kind is None:
            return _compose_pure(selected, lambda e: e.guarantee.ledger_epsilon)
        return _compose_pure(selected, lambda e: e.epsilon)

    def spent_delta(self, scope: Scope | str, kind: GuaranteeKind | str | None = None) -> float:
        """The delta that goes with :meth:`spent`'s epsilon (0.0 for pure entries only): deltas add
        where entries cover the same partition and the maximum counts across disjoint ones
        (basic composition; the same partition rule as the epsilons)."""
        return _compose_pure(self._selected(scope, kind), lambda e: e.guarantee.delta)

    def _selected(self, scope: Scope | str, kind: GuaranteeKind | str | None) -> list[LedgerEntry]:
        scope = Scope(scope)
        selected = [e for e in self._entries if e.scope is scope]
        if kind is not None:
            kind = GuaranteeKind(kind)
            selected = [e for e in selected if e.kind is kind]
        if any(e.kind is GuaranteeKind.RDP for e in selected):
            raise UnsupportedCompositionError(f"scope {scope.value!r}: {_RDP_MESSAGE}")
        return selected

    def summary(self) -> list[dict[str, Any]]:
        """One row per scope with entries, in the scope's unit: ``scope``, ``kind`` (the unit,
        e.g. ``edge_dp``), ``epsilon`` (:meth:`spent`), ``delta`` (:meth:`spent_delta`),
        ``entries``, ``note``.

        ``epsilon`` and ``delta`` are ``None`` (and ``note`` says why) where the entries cannot be composed.
        """
        rows = []
        for scope in Scope:
            count = sum(1 for e in self._entries if e.scope is scope)
            if not count:
                continue
            delta: float | None
            try:
                eps: float | None = self.spent(scope)
                delta = self.spent_delta(scope)
                note = ""
            except UnsupportedCompositionError as err:
                eps, delta, note = None, None, str(err)
            local = [k for k in self.kinds(scope) if k is not SCOPE_UNITS[scope]]
            if local and eps is not None:
                note = (
                    f"{', '.join(k.value for k in local)} entries count with the {SCOPE_UNITS[scope].value} "
                    "epsilon they imply"
                )
            rows.append(
                {"scope": scope.value, "kind": SCOPE_UNITS[scope].value, "epsilon": eps,
                 "delta": delta, "entries": count, "note": note}
            )
        return rows

    # -- serialisation --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"format": LEDGER_FORMAT, "entries": [e.to_dict() for e in self._entries]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PrivacyLedger:
        if not isinstance(d, Mapping):
            raise TypeError(f"a ledger must be a dict, got {type(d).__name__}")
        fmt = d.get("format")
        if fmt not in READABLE_LEDGER_FORMATS:
            raise ValueError(f"unknown ledger format {fmt!r} (expected {LEDGER_FORMAT!r})")
        entries = d.get("entries")
        if not isinstance(entries, list):
            raise TypeError(f"ledger 'entries' must be a list, got {type(entries).__name__}")
        return cls(LedgerEntry.from_dict(e) for e in entries)

    def to_markdown(self) -> str:
        """A Markdown table of the entries, then the totals per (scope, kind) (for Prefect)."""
        lines = [
            "| stage | mechanism | scope | kind | epsilon | partitions |",
            "|---|---|---|---|---:|---|",
        ]
        for e in self._entries:
            cells = (e.stage, e.mechanism, e.scope.value, e.kind.value, repr(e.epsilon),
                     _fmt_partitions(e.partitions))
            lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
        lines += ["", "| scope | kind | spent epsilon | spent delta |", "|---|---|---:|---:|"]
        for row in self.summary():
            eps = "n/a" if row["epsilon"] is None else repr(row["epsilon"])
            delta = "n/a" if row["delta"] is None else repr(row["delta"])
            lines.append(f"| {row['scope']} | {row['kind']} | {_md_cell(eps)} | {_md_cell(delta)} |")
        return "\n".join(lines) + "\n"
