"""Markdown renderings of a ledger, a validation result and utility metrics.

Used for Prefect artifacts (the Prefect UI shows them) and by ``privgraph artifacts show``.
Only public quantities appear here: budgets, parameters, accuracies; never rows or seeds.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ledger_markdown", "metrics_markdown"]


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def ledger_markdown(
    pipeline: str, version: str | None, ledger: dict[str, Any], validation: dict[str, Any] | None = None
) -> str:
    lines = [f"## Privacy ledger: {pipeline} {version or '(staged, not published)'}", ""]
    lines += ["| stage | mechanism | scope | kind | epsilon | partitions |", "|---|---|---|---|---|---|"]
    for e in ledger.get("entries", []):
        g = e["guarantee"]
        parts = e.get("partitions")
        parts_s = "all" if parts is None else f"{len(parts)} disjoint"
        lines.append(
            f"| {e['stage']} | {e['mechanism']} | {g['scope']} | {g['kind']} | {_fmt(g['epsilon'])} | {parts_s} |"
        )
    if validation is not None:
        lines += ["", "### Budget (composed)", "", "| scope | kind | spent | cap |", "|---|---|---|---|"]
        for b in validation.get("budget", []):
            lines.append(f"| {b['scope']} | {b['kind']} | {_fmt(b['spent'])} | {_fmt(b['cap'])} |")
        ok = "passed" if validation.get("success") else "FAILED"
        lines += ["", f"Validation checkpoint: **{ok}**"]
        for r in validation.get("results", []):
            if not r["success"]:
                lines.append(f"- {r['suite']}.{r['expectation']}: {r['detail']}")
    return "\n".join(lines) + "\n"


def metrics_markdown(pipeline: str, version: str, metrics: dict[str, Any]) -> str:
    lines = [f"## Utility: {pipeline} {version}", ""]
    lines += [
        f"GCN ({metrics.get('runs', '?')} runs, device {metrics.get('device', '?')}), test accuracy:",
        "",
        "| graph | mean | std |",
        "|---|---|---|",
    ]
    for which in ("clean", "private"):
        m = metrics.get(which)
        if m:
            lines.append(f"| {which} | {m['test_acc_mean']:.4f} | {m['test_acc_std']:.4f} |")
    return "\n".join(lines) + "\n"
