"""The tables ``run``, ``evaluate`` and ``artifacts show`` print: the privacy ledger and the
utility metrics (with the owner's private evaluation when asked for)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from privgraph.cli.console import out
from privgraph.publish.run_report import (PAIRED_TESTS, POST_PROCESSING, UTILITY_ROWS, attack_rows, ensemble_note,
                                      graph_utility_rows, paired_test_line, scale_note)


def print_ledger(ledger: dict[str, Any]) -> None:
    """Print the privacy ledger (a manifest's ``ledger``) as one table on stdout."""
    t = Table("stage", "mechanism", "scope", "kind", "epsilon", "in scope unit", title="privacy ledger")
    for e in ledger.get("entries", []):
        g = e["guarantee"]
        unit = f"{g.get('unit_kind', g['kind'])} {g.get('unit_epsilon', g['epsilon']):.4g}"
        t.add_row(e["stage"], e["mechanism"], g["scope"], g["kind"], f"{g['epsilon']:.4g}", unit)
    out.print(t)


def print_metrics(m: dict[str, Any], owner_only: dict[str, Any] | None = None) -> None:
    """Print the shareable utility metrics ``m``; ``owner_only`` (the private evaluation) adds its
    rows and tables, each marked as not published."""
    t = Table("model", "test acc (mean)", "std", title=f"utility, {m.get('runs')} runs{ensemble_note(m)} on {m.get('device')}")
    for key, label in UTILITY_ROWS:
        if m.get(key):
            t.add_row(escape(label), f"{m[key]['test_acc_mean']:.4f}", f"{m[key]['test_acc_std']:.4f}")
    if owner_only and owner_only.get("clean"):
        c = owner_only["clean"]
        t.add_row("clean graph (private evaluation: not published)", f"{c['test_acc_mean']:.4f}", f"{c['test_acc_std']:.4f}")
    out.print(t)
    for key, label in PAIRED_TESTS:
        if m.get(key):
            out.print(escape(paired_test_line(m[key], label)), highlight=False)
    out.print(escape(POST_PROCESSING), highlight=False)
    if scale_note(m):  # the evaluation at scale: how it was trained
        out.print(escape(scale_note(m)), highlight=False)
    rows = graph_utility_rows((owner_only or {}).get("graph_utility"))
    if rows:
        g = Table("statistic", "original", "released", "error / distance",
                  title="structure of the released edges (private evaluation: not published)")
        for r in rows:
            g.add_row(*(escape(c) for c in r))
        out.print(g)
    rows = attack_rows((owner_only or {}).get("attacks"))
    if rows:
        a = Table("attack", "AUC, raw graph's model", "without private edges", "AUC, version's model", "precision@k",
                  title="attacks (private evaluation: not published; 0.5 = chance)")
        for r in rows:
            a.add_row(*(escape(c) for c in r))
        out.print(a)
