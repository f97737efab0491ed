"""``privgraph run --ci``: the machine-readable summary (JSON on stdout, markdown in
$GITHUB_STEP_SUMMARY)."""

from __future__ import annotations

import json
import os
from typing import Any

from rich.markup import escape

from privgraph.cli.console import err
from privgraph.cli.failures import LAST_ERROR
from privgraph.errors import EXIT_CODES


def write_ci_summary(pipeline: str, res: dict[str, Any] | None, code: int, seconds: float) -> None:
    """``run --ci``: one JSON object on stdout and a markdown summary in $GITHUB_STEP_SUMMARY.

    Holds only what the manifest holds (version, ledger, validation, shareable metrics) and the
    outcome; never the owner's private record or its path.
    """
    summary: dict[str, Any] = {
        "pipeline": pipeline,
        "status": "published" if code == 0 else "failed",
        "exit_code": code,
        "meaning": EXIT_CODES.get(code, "internal error (a bug)"),
        "seconds": seconds,
    }
    if res is not None:
        from privgraph.guarantee.ledger import PrivacyLedger  # lazy: CLI start-up

        summary.update(
            version=res["version"], store=str(res["store"]),
            ledger=PrivacyLedger.from_dict(res["ledger"]).summary(),
            validation=res.get("validation"), metrics=res.get("metrics"),
        )
    elif LAST_ERROR:
        summary["error"] = LAST_ERROR.get("message")
    print(json.dumps(summary, sort_keys=True, default=str))
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(ci_markdown(summary))
        except OSError as exc:  # the run's outcome stands: a summary file is not the run
            err.print(f"warning: the CI step summary was not written to $GITHUB_STEP_SUMMARY={escape(path)}: "
                      f"{escape(exc.strerror or type(exc).__name__)}", highlight=False, soft_wrap=True)


def ci_markdown(summary: dict[str, Any]) -> str:
    """The markdown ``run --ci`` appends to $GITHUB_STEP_SUMMARY for ``summary`` (its JSON object)."""
    lines = [f"## privgraph run `{summary['pipeline']}`: {summary['status']} (exit {summary['exit_code']})", ""]
    if summary["status"] == "published":
        lines += [f"version `{summary['version']}` in `{summary['store']}` ({summary['seconds']} s)", "",
                  "| scope | kind | epsilon |", "|---|---|---|"]
        for row in summary["ledger"]:
            eps = "n/a" if row.get("epsilon") is None else f"{row['epsilon']:g}"
            lines.append(f"| {row.get('scope')} | {row.get('kind')} | {eps} |")
        m = (summary.get("metrics") or {}).get("private")
        if m:
            lines += ["", f"test accuracy of a GNN trained on the version (its own labels): "
                      f"{m['test_acc_mean']:.4f} +- {m['test_acc_std']:.4f}"]
    else:
        lines.append(f"{summary['meaning']}: {summary.get('error', '')}")
    return "\n".join(lines) + "\n\n"
