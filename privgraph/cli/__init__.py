"""The ``privgraph`` command.

Exit codes (defined once, in :mod:`privgraph.errors`): 0 success; 2 bad input or configuration;
3 a failed validation checkpoint (budget cap exceeded, invalid output); 4 the infrastructure
(artifact store, Prefect API, Dask cluster) failed after retries, or a disk filled; 1 only for an
unexpected error, a bug. Every failure prints one line, never a traceback (``PRIVGRAPH_DEBUG=1`` shows it).

The commands live in :mod:`privgraph.cli.pipeline_commands` (``run``, ``evaluate``, ``compare``,
``serve``) and :mod:`privgraph.cli.artifacts_commands` (``artifacts ...``) and are registered here,
in this order; the names the tests reach for stay importable from ``privgraph.cli``.
"""

from __future__ import annotations

import inspect
import os
import sys
import warnings

import typer

from privgraph.cli.artifacts_commands import (artifacts_gc, artifacts_list, artifacts_public_key, artifacts_show,
                                              artifacts_verify)
from privgraph.cli.ci_summary import ci_markdown, write_ci_summary
from privgraph.cli.console import err, out
from privgraph.cli.failures import EXIT_INTERNAL, LAST_ERROR, exit_on_failure, quiet_prefect
from privgraph.cli.ingest_command import ingest
from privgraph.cli.options import DEFAULT_STORE, default_store
from privgraph.cli.pipeline_commands import compare, evaluate, run, serve
from privgraph.cli.tables import print_ledger, print_metrics

__all__ = [
    "DEFAULT_STORE", "EXIT_INTERNAL", "LAST_ERROR", "app", "artifacts_app", "artifacts_gc", "artifacts_list",
    "artifacts_public_key", "artifacts_show", "artifacts_verify", "ci_markdown", "compare", "default_store", "err",
    "evaluate", "exit_on_failure", "ingest", "main", "out", "print_ledger", "print_metrics", "quiet_prefect", "run",
    "serve", "write_ci_summary",
]

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Differentially private graphs, end to end.")
artifacts_app = typer.Typer(no_args_is_help=True, help="List, show, verify and clean stored private graph versions.")
app.add_typer(artifacts_app, name="artifacts")

# the temporary Prefect server's telemetry heartbeat only adds noise (and sqlite lock errors)
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.*", category=FutureWarning)

for _command in (run, evaluate, compare, serve):
    app.command()(_command)
app.command()(ingest)
for _name, _command in (("list", artifacts_list), ("show", artifacts_show), ("verify", artifacts_verify),
                        ("public-key", artifacts_public_key), ("gc", artifacts_gc)):
    artifacts_app.command(_name)(_command)


def _reflowed(doc: str) -> str:
    """A docstring's paragraphs, each on one line: the help text wraps them to the terminal."""
    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n"))


for _typer in (app, artifacts_app):
    for _info in _typer.registered_commands:
        if _info.help is None and _info.callback is not None and _info.callback.__doc__:
            _info.help = _reflowed(_info.callback.__doc__)


def main() -> None:  # pragma: no cover - console script entry
    sys.exit(app())
