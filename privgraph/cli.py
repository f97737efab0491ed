"""The ``privgraph`` command.

Exit codes (defined once, in :mod:`privgraph.errors`): 0 success; 2 bad input or configuration;
3 a failed validation checkpoint (budget cap exceeded, invalid output); 4 the infrastructure
(artifact store, Prefect API, Dask cluster) failed after retries; 1 only for an unexpected error,
a bug. Every failure prints one line, never a traceback (``PRIVGRAPH_DEBUG=1`` shows it).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from privgraph.errors import EXIT_CODES, exit_code_for, one_line
from privgraph.report import (PAIRED_TESTS, POST_PROCESSING, UTILITY_ROWS, attack_rows, ensemble_note, graph_utility_rows,
                              paired_test_line)

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Differentially private graphs, end to end.")
artifacts_app = typer.Typer(no_args_is_help=True, help="List, show, verify and clean stored private graph versions.")
app.add_typer(artifacts_app, name="artifacts")

# the temporary Prefect server's telemetry heartbeat only adds noise (and sqlite lock errors)
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.*", category=FutureWarning)

#: the width of output that is not a terminal (a pipe, a log, CI): rich's 80 columns cut table cells
#: ("privatize.fe…"), so such output gets lines as long as their content
_PIPE_WIDTH = 400


def _console(stream: Any) -> Console:
    stderr = stream is sys.stderr
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=_PIPE_WIDTH, height=25)  # both set: also under TERM=dumb


err = _console(sys.stderr)
out = _console(sys.stdout)

DEFAULT_STORE = "./artifacts"
EXIT_INTERNAL = 1  # an unexpected exception: a bug in privgraph
_LAST_ERROR: dict[str, str] = {}  # the last failure's one line, for `run --ci`


def _default_store() -> str:
    return os.environ.get("PRIVGRAPH_STORE", DEFAULT_STORE)


def _published_store(uri: str | None) -> Any:
    """The store a reading command (``artifacts list / show / verify / gc``) reads: a directory
    store that does not exist is a mistyped path, not an empty store (exit 2, as a missing S3
    bucket is)."""
    from privgraph.errors import ConfigError
    from privgraph.storage import open_store
    from privgraph.storage.local import LocalStore

    st = open_store(uri or _default_store())
    if isinstance(st, LocalStore) and not st.root.is_dir():
        raise ConfigError(f"--store {uri or _default_store()}: no such directory ({st.root}); nothing was published there")
    return st


_PUBLIC_KEY_HELP = (
    "trust manifests sealed by this Ed25519 public key (64 hex; repeatable; see `privgraph artifacts "
    "public-key`); default: the owner's own key, found via --private-records"
)
_PRIVATE_RECORDS_HELP = "the owner's private-records directory (its keys/; $PRIVGRAPH_HOME wins when set)"


def _trusted_keys(public_keys: list[str] | None, private_records: str) -> list[str] | None:
    """The public keys whose seals a reader trusts: the ones given, else the owner's own key when
    this machine holds it, else ``None`` (a seal is checked only against the key it names)."""
    from privgraph.errors import ConfigError
    from privgraph.storage.private_record import owner_public_key

    keys = [k.strip().lower() for k in public_keys or []]
    for k in keys:
        if len(k) != 64 or not set(k) <= set("0123456789abcdef"):
            raise ConfigError(f"--public-key {k[:70]!r}: expected 64 hex digits (an Ed25519 public key)")
    if keys:
        return keys
    own = owner_public_key(private_records)
    return None if own is None else [own]


def _failure(exc: BaseException) -> tuple[int, str]:
    """The exit code and the one-line message of a failed command."""
    code = exit_code_for(exc)
    if code is None:
        return EXIT_INTERNAL, (
            f"internal error: {type(exc).__name__}: {one_line(exc)} "
            "(a bug in privgraph; PRIVGRAPH_DEBUG=1 shows the traceback)"
        )
    return code, one_line(exc)


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """Turn any failure into one line on stderr and its documented exit code."""
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except KeyboardInterrupt:
        err.print("interrupted", highlight=False)
        raise typer.Exit(130) from None
    except Exception as exc:
        if os.environ.get("PRIVGRAPH_DEBUG"):
            raise
        code, msg = _failure(exc)
        _LAST_ERROR["message"] = msg
        err.print(f"[bold red]error:[/] {escape(msg)}", highlight=False, soft_wrap=True)
        raise typer.Exit(code) from None


class _NoTracebackForKnownErrors(logging.Filter):
    """Prefect logs a failed run's exception with its traceback; a known failure gets one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None and exit_code_for(record.exc_info[1]) is not None:
            record.exc_info = None
            record.exc_text = None
        return True


class _OtherLibrariesBelowWarning(logging.Filter):
    """Drops other libraries' records below WARNING (Dask's scheduler and nanny chatter,
    great_expectations' notes); Prefect's and privgraph's own run logs pass."""

    OWN = ("prefect", "privgraph", "flows", "tasks")

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or record.name.split(".", 1)[0] in self.OWN


def _quiet_prefect(verbose: bool = False) -> None:
    """Call after importing Prefect: strip known-failure tracebacks from every Prefect log handler
    and, unless ``verbose``, other libraries' INFO and DEBUG records."""
    filters: list[logging.Filter] = [_NoTracebackForKnownErrors()]
    if not verbose:
        filters.append(_OtherLibrariesBelowWarning())
    for name in ("", "prefect", "prefect.flow_runs", "prefect.task_runs"):
        for h in logging.getLogger(name).handlers:
            for flt in filters:
                if not any(type(f) is type(flt) for f in h.filters):
                    h.addFilter(flt)
            if verbose:
                for f in [f for f in h.filters if isinstance(f, _OtherLibrariesBelowWarning)]:
                    h.removeFilter(f)


_VERBOSE_HELP = "also print other libraries' INFO logs (Dask's scheduler and workers, great_expectations)"


_SHOW_PRIVATE_HELP = ("also print the owner's private evaluation (the clean graph's accuracy, the structure report, "
                      "attack scores) here; off by default: CLI output is a published channel (CI logs, shared terminals)")


@app.command()
def run(
    pipeline: str = typer.Argument("cora", help="pipeline name in pipelines.yaml"),
    config: Path = typer.Option(Path("pipelines.yaml"), "--config", "-c", help="pipelines file"),
    store: str | None = typer.Option(None, "--store", help="artifact store URI (default: the pipeline's storage)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object (version, ledger, metrics)"),
    evaluate: bool = typer.Option(True, "--evaluate/--no-evaluate", help="train and report utility before publishing"),
    ci: bool = typer.Option(
        False, "--ci",
        help="machine-readable summary for CI: JSON on stdout (also on failure), markdown to $GITHUB_STEP_SUMMARY",
    ),
    show_private: bool = typer.Option(False, "--show-private", help=_SHOW_PRIVATE_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=_VERBOSE_HELP),
) -> None:
    """Run the privatize flow (and evaluate) for PIPELINE and publish a private version."""
    t0 = time.perf_counter()
    res: dict[str, Any] | None = None
    try:
        with _errors():
            from privgraph.config_loader import load_config
            from privgraph.preflight import check_before_reading, resolve_store
            from privgraph.progress import rich_progress

            cfg = load_config(config).get(pipeline)  # fail fast on config errors, before Prefect starts
            store = resolve_store(cfg, store)
            check_before_reading(cfg, store)  # store, private records, input files: before any data is read
            from flows.privatize import privatize_flow
            from flows.server import prefect_api

            _quiet_prefect(verbose)
            status = f"running pipeline [bold]{escape(pipeline)}[/] (privatize -> validate -> evaluate -> store)"
            with prefect_api(), rich_progress(err, status=status, transient=True):
                res = privatize_flow(pipeline=pipeline, config_path=str(config), store=store, evaluate=evaluate)
            res["seconds"] = round(time.perf_counter() - t0, 2)
    except typer.Exit as exc:
        if ci:
            _ci_summary(pipeline, None, exc.exit_code, round(time.perf_counter() - t0, 2))
        raise
    assert res is not None
    if ci:
        _ci_summary(pipeline, res, 0, res["seconds"])
        return
    if as_json:
        print(json.dumps(res, sort_keys=True))
        return
    out.print(f"[bold green]published[/] {escape(res['pipeline'])}/{res['version']} in {escape(str(res['store']))} ({res['seconds']} s)")
    _print_ledger(res["ledger"])
    if res.get("metrics"):
        owner_only = None
        if res.get("private_record") and show_private:
            owner_only = json.loads(Path(res["private_record"]).read_text()).get("private_evaluation")
        _print_metrics(res["metrics"], owner_only)
    elif res.get("not_evaluated"):
        why = res["not_evaluated"]
        out.print("not evaluated: " + escape("run without --no-evaluate to train and report utility" if why == "--no-evaluate"
                                             else why + "; add them to report utility"))
    if res.get("private_record"):
        out.print(f"private record (owner only, not published): {escape(res['private_record'])}"
                  + ("" if show_private else "; --show-private prints its evaluation here"))



def _ci_summary(pipeline: str, res: dict[str, Any] | None, code: int, seconds: float) -> None:
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
        from privgraph.accounting import PrivacyLedger

        summary.update(
            version=res["version"], store=str(res["store"]),
            ledger=PrivacyLedger.from_dict(res["ledger"]).summary(),
            validation=res.get("validation"), metrics=res.get("metrics"),
        )
    elif _LAST_ERROR:
        summary["error"] = _LAST_ERROR.get("message")
    print(json.dumps(summary, sort_keys=True, default=str))
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(_ci_markdown(summary))
        except OSError as exc:  # the run's outcome stands: a summary file is not the run
            err.print(f"warning: the CI step summary was not written to $GITHUB_STEP_SUMMARY={escape(path)}: "
                      f"{escape(exc.strerror or type(exc).__name__)}", highlight=False, soft_wrap=True)


def _ci_markdown(summary: dict[str, Any]) -> str:
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


@app.command()
def evaluate(
    version: str = typer.Argument(..., help="a published version (see `privgraph artifacts list`)"),
    config: Path = typer.Option(Path("pipelines.yaml"), "--config", "-c", help="pipelines file"),
    store: str | None = typer.Option(None, "--store", help="artifact store URI"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    structure_plot: Path | None = typer.Option(
        None, "--structure-plot", help="also write the graph-utility report as a PNG here (private evaluation)"),
    show_private: bool = typer.Option(False, "--show-private", help=_SHOW_PRIVATE_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=_VERBOSE_HELP),
) -> None:
    """Train the GNN on a published version (shareable accuracy) and on the clean graph (the
    owner's private evaluation); print both."""
    with _errors():
        from privgraph.errors import ConfigError
        from privgraph.storage import open_store

        if structure_plot is not None and not structure_plot.parent.is_dir():
            raise ConfigError(f"--structure-plot: directory {structure_plot.parent} does not exist")
        store_uri = store or _default_store()
        pipeline, version = open_store(store_uri).find_version(version)
        from flows.evaluate import evaluate_flow
        from flows.server import prefect_api
        from privgraph.progress import rich_progress

        _quiet_prefect(verbose)
        with prefect_api(), rich_progress(err, status=f"evaluating {escape(pipeline)}/{escape(version)}", transient=True):
            res = evaluate_flow(pipeline=pipeline, version=version, config_path=str(config), store=store_uri)
        if structure_plot is not None:
            report = (res.get("private_evaluation") or {}).get("graph_utility")
            if report is None:
                raise ConfigError("--structure-plot: no structure report (the graph has no private edges, "
                                  "or evaluate.graph_report is false)")
            from privgraph.graph_utility import structure_plot_png

            tmp = structure_plot.with_name(f".{structure_plot.name}.tmp")
            tmp.write_bytes(structure_plot_png(f"{pipeline} {version}: released edges against the raw graph "
                                               f"(PRIVATE EVALUATION)", report))
            tmp.replace(structure_plot)
    if as_json:
        print(json.dumps({k: v for k, v in res.items() if k != "private_evaluation"}, sort_keys=True))
        return
    _print_metrics(res["metrics"], res.get("private_evaluation") if show_private else None)
    if not show_private:
        out.print("the owner's private evaluation (clean graph, structure, attacks) is not printed: --show-private")
    out.print(f"input check: {res.get('input_check')}")


@app.command()
def compare(
    name: str = typer.Argument(..., help="comparison name in pipelines.yaml (comparisons:)"),
    config: Path = typer.Option(Path("pipelines.yaml"), "--config", "-c", help="pipelines file"),
    store: str | None = typer.Option(None, "--store", help="artifact store URI (default: the pipeline's storage)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object (version, summary)"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=_VERBOSE_HELP),
) -> None:
    """Compare mechanisms: privatize one scope with each at each epsilon, train on each, and store
    the table (mean +- std, t-test of the target against the best other) and the plots as a
    PRIVATE report (scored on raw data) under the pipeline's private_records directory."""
    with _errors():
        from privgraph.config_loader import load_config

        cfg = load_config(config)
        if cfg.graph_comparison(name) is not None:
            return _graph_compare(name, config, as_json, verbose)
        cfg.comparison(name)  # fail fast on config errors
        from flows.compare import compare_flow

        res = _run_comparison_flow(f"running comparison [bold]{escape(name)}[/]", compare_flow, verbose,
                                   name=name, config_path=str(config), store=store)
    if _reported(res, as_json):
        return
    s = res["summary"]
    eps_keys = list(next(iter(s["cells"].values())))
    t = Table("mechanism", *[f"eps {k}" for k in eps_keys], title="test accuracy, mean +- std")
    for mech, cells in s["cells"].items():
        t.add_row(mech, *[f"{cells[k]['mean']:.3f} +- {cells[k]['std']:.3f}" for k in eps_keys])
    t.add_row("clean graph", *[f"{s['clean']['mean']:.3f} +- {s['clean']['std']:.3f}"] * len(eps_keys))
    t.add_row("paired t-test p, target vs best other",
              *["n/a" if s["t_tests"][k]["p"] is None else f"{s['t_tests'][k]['p']:.3g}" for k in eps_keys])
    out.print(t)
    if all("feature_only" in c[k] for c in s["cells"].values() for k in eps_keys):
        t = Table("mechanism", *[f"eps {k}" for k in eps_keys],
                  title="feature-only floor (same model, no edges) | GNN - floor, paired t-test p")
        for mech, cells in s["cells"].items():
            t.add_row(mech, *[f"{cells[k]['feature_only']['mean']:.3f} | {cells[k]['vs_feature_only']['mean_difference']:+.3f}"
                              + ("" if cells[k]["vs_feature_only"]["pvalue"] is None else f", p {cells[k]['vs_feature_only']['pvalue']:.2g}")
                              for k in eps_keys])
        out.print(t)
    for attack, a in s.get("attacks", {}).items():
        t = Table("mechanism", *[f"eps {k}" for k in eps_keys], title=f"{attack} ROC-AUC, mean +- std (0.5 = chance)")
        for mech, cells in a["cells"].items():
            t.add_row(mech, *[f"{cells[k]['mean']:.3f} +- {cells[k]['std']:.3f}" for k in eps_keys])
        t.add_row("clean graph", *[f"{a['clean']['mean']:.3f} +- {a['clean']['std']:.3f}"] * len(eps_keys))
        out.print(t)


def _run_comparison_flow(status: str, flow: Any, verbose: bool, **kwargs: Any) -> dict[str, Any]:
    """Run a comparison flow against a temporary Prefect API with a progress bar; its result with
    ``seconds``."""
    from flows.server import prefect_api
    from privgraph.progress import rich_progress

    _quiet_prefect(verbose)
    t0 = time.perf_counter()
    with prefect_api(), rich_progress(err, status=status, transient=True):
        res = flow(**kwargs)
    res["seconds"] = round(time.perf_counter() - t0, 2)
    return res


def _reported(res: dict[str, Any], as_json: bool) -> bool:
    """Print a comparison's JSON (then True: nothing more to print) or the line naming its report."""
    if as_json:
        print(json.dumps(res, sort_keys=True))
        return True
    out.print(f"[bold green]stored private report[/] {escape(str(res['report']))} ({res['seconds']} s; owner only, scored on raw data)")
    return False


def _graph_compare(name: str, config: Path, as_json: bool, verbose: bool) -> None:
    """``privgraph compare`` of a graph-classification comparison (``graph_comparisons:``)."""
    from flows.compare import graph_compare_flow

    res = _run_comparison_flow(f"running graph comparison [bold]{escape(name)}[/]", graph_compare_flow, verbose,
                               name=name, config_path=str(config))
    if _reported(res, as_json):
        return
    s = res["summary"]
    eps_keys = list(next(iter(s["cells"].values())))
    for metric, title in (("acc", "accuracy"), ("auc", "ROC AUC")):
        t = Table("mechanism", *[f"eps {k}" for k in eps_keys], title=f"GIN-0 {title}, mean +- std over {s['folds']} folds")
        for mech, cells in s["cells"].items():
            t.add_row(mech, *[f"{cells[k][metric + '_mean']:.3f} +- {cells[k][metric + '_std']:.3f}" for k in eps_keys])
        f = s["nonpriv_full"]
        t.add_row("NonPriv-Full", *[f"{f[metric + '_mean']:.3f} +- {f[metric + '_std']:.3f}"] * len(eps_keys))
        out.print(t)


@app.command()
def serve(
    pipelines: list[str] = typer.Argument(None, help="pipelines to schedule (default: all with a schedule)"),
    config: Path = typer.Option(Path("pipelines.yaml"), "--config", "-c", help="pipelines file"),
    cron: str | None = typer.Option(None, "--cron", help="override the schedule, e.g. '0 3 * * *'"),
    evaluate: bool = typer.Option(True, "--evaluate/--no-evaluate",
                                  help="--no-evaluate: publish on schedule without the evaluation (run `privgraph evaluate VERSION` later)"),
) -> None:
    """Serve scheduled production runs of the privatize flow (needs a running Prefect server).

    Deployments ``<pipeline>-served``, one run of a pipeline at a time (a run that would start
    while the previous one still runs is cancelled); one ``serve`` per pipeline. On SIGTERM or
    Ctrl-C: the executing run is cancelled (nothing of it published), a run left Running ends as
    Crashed, claimed runs go back to the schedule, and the schedules are paused until the next
    ``serve``."""
    with _errors():
        from privgraph.config_loader import load_config

        cfg = load_config(config)
        names = pipelines or [n for n, p in cfg.pipelines.items() if p.schedule is not None]
        if not names:
            from privgraph.errors import ConfigError

            raise ConfigError(f"{config}: no pipeline has a 'schedule'; add one or name pipelines and pass --cron")
        from flows.schedule import check_not_served, pipeline_deployments
        from flows.schedule import serve as serve_deployments

        if cron is not None:
            _check_cron(cron)
        for n in names:
            cfg.get(n)
        from flows.server import require_prefect_api

        require_prefect_api()
        deployments = pipeline_deployments(cfg, names, str(config.resolve()), cron=cron, evaluate=evaluate)
        check_not_served(deployments)
        err.print(f"serving {escape(', '.join(d.name for d in deployments))}; Ctrl-C to stop", highlight=False)
        ended, released = serve_deployments(deployments)
        if ended:
            err.print(f"stopped; {len(ended)} run(s) left Running by this process ended as Crashed, nothing of them "
                      f"published: {escape(', '.join(ended))}", highlight=False, soft_wrap=True)
        if released:
            err.print(f"stopped; {len(released)} claimed run(s) handed back to the schedule: {escape(', '.join(released))}",
                      highlight=False, soft_wrap=True)
        err.print("stopped; the schedules of " + escape(", ".join(d.name for d in deployments)) + " are paused "
                  "until the next `privgraph serve`", highlight=False, soft_wrap=True)


def _check_cron(expr: str) -> None:
    """``--cron`` is validated like ``schedule.cron`` in pipelines.yaml, before anything runs."""
    from pydantic import ValidationError

    from privgraph.config import ScheduleConfig
    from privgraph.errors import ConfigError

    try:
        ScheduleConfig(cron=expr)
    except ValidationError as exc:
        raise ConfigError(f"--cron: {exc.errors()[0]['msg'].removeprefix('Value error, ')}") from None


def _note_untrusted(trusted: list[str] | None) -> None:
    """Say on stderr, once per command, that seals are checked only against the key they name."""
    if trusted is None:
        err.print(
            "note: no trusted public key (--public-key, or the owner's key under --private-records): "
            "each seal is checked against the key it names, which shows no edit since signing, not who signed",
            highlight=False, soft_wrap=True,
        )


@artifacts_app.command("list")
def artifacts_list(
    store: str | None = typer.Option(None, "--store", help="artifact store URI"),
    pipeline: str | None = typer.Option(None, "--pipeline", help="only this pipeline"),
    as_json: bool = typer.Option(False, "--json"),
    public_key: list[str] | None = typer.Option(None, "--public-key", help=_PUBLIC_KEY_HELP),
    private_records: str = typer.Option("./private-records", "--private-records", help=_PRIVATE_RECORDS_HELP),
) -> None:
    """List the published versions (a version without a manifest does not exist), each ledger's
    seal checked (against a trusted key when one is at hand); a version whose manifest cannot be
    read or does not match its seal is left out and fails the command."""
    with _errors():
        from privgraph.errors import ArtifactIntegrityError

        trusted = _trusted_keys(public_key, private_records)
        _note_untrusted(trusted)
        broken: list[str] = []
        st = _published_store(store)
        rows = []
        for info in st.list_versions(pipeline, broken=broken):
            where = f"{info.pipeline}/{info.version}"
            try:  # the seal against the trusted keys (or the key it names), and the content hash
                signer = st.read_manifest(info.pipeline, info.version, trusted=trusted, sealed=True)["seal"]["public_key"]
            except ArtifactIntegrityError as exc:
                broken.append(f"{where}: {one_line(exc)}")
                continue
            rows.append({**info.to_dict(), "seal": {"signer": signer, "trusted_key": trusted is not None}})
        if as_json:
            print(json.dumps(rows, sort_keys=True))
        elif not rows:
            out.print("no versions")
        else:
            t = Table("pipeline")
            t.add_column("version", no_wrap=True)
            t.add_column("created (UTC)", no_wrap=True)
            t.add_column("epsilon")
            t.add_column("seal", no_wrap=True)
            for r in rows:
                seal = f"{r['seal']['signer'][:16]}... " + ("trusted" if trusted is not None else "(unchecked signer)")
                t.add_row(escape(r["pipeline"]), r["version"], r["created"][:19], escape(r.get("epsilon_summary", "")), seal)
            out.print(t)
        if broken:
            for line in broken[1:]:
                err.print(f"broken: {escape(line)}", highlight=False, soft_wrap=True)
            raise ArtifactIntegrityError(
                f"{len(broken)} version(s) whose manifest cannot be read or does not match its seal left out "
                f"of the listing: {broken[0]}"
            )


@artifacts_app.command("show")
def artifacts_show(
    version: str = typer.Argument(..., help="version id (see `privgraph artifacts list`)"),
    store: str | None = typer.Option(None, "--store", help="artifact store URI"),
    as_json: bool = typer.Option(False, "--json"),
    public_key: list[str] | None = typer.Option(None, "--public-key", help=_PUBLIC_KEY_HELP),
    private_records: str = typer.Option("./private-records", "--private-records", help=_PRIVATE_RECORDS_HELP),
) -> None:
    """Show a version's manifest: ledger, parameters, validation, metrics (after verifying its
    seal and every object)."""
    with _errors():

        trusted = _trusted_keys(public_key, private_records)
        _note_untrusted(trusted)
        st = _published_store(store)
        pipeline, version = st.find_version(version)
        # the seal, every object present with the manifest's checksum
        st.verify_version(pipeline, version, trusted=trusted, sealed=True)
        manifest = st.read_manifest(pipeline, version, trusted=trusted, sealed=True)
    if as_json:  # the manifest, and (beside it, not part of it) what this command checked
        checked = {"seal": True, "objects": True, "signer": manifest["seal"]["public_key"],
                   "signer_trusted": trusted is not None}
        print(json.dumps({**manifest, "checked": checked}, sort_keys=True))
        return
    out.print(f"[bold]{escape(pipeline)}/{escape(version)}[/]  created {manifest.get('created', '?')}  code {manifest.get('code_version', '?')}")
    out.print(f"public input fingerprint {str(manifest.get('public_input_fingerprint', '?'))[:16]}...")
    signer = str(manifest["seal"]["public_key"])[:16]
    out.print(f"seal: signed by {signer}... " + (
        "(a trusted key)" if trusted is not None else "(not checked against a trusted key: see the note above)"),
        highlight=False)
    _print_ledger(manifest["ledger"])
    val = manifest.get("validation") or {}
    out.print(f"validation: {'passed' if val.get('success') else 'FAILED'}")
    if manifest.get("metrics"):
        _print_metrics(manifest["metrics"])


@artifacts_app.command("verify")
def artifacts_verify(
    version: str | None = typer.Argument(None, help="version id (see `privgraph artifacts list`)"),
    all_versions: bool = typer.Option(False, "--all", help="verify every published version"),
    store: str | None = typer.Option(None, "--store", help="artifact store URI"),
    public_key: list[str] | None = typer.Option(None, "--public-key", help=_PUBLIC_KEY_HELP),
    private_records: str = typer.Option("./private-records", "--private-records", help=_PRIVATE_RECORDS_HELP),
    accept_unchecked_signer: bool = typer.Option(
        False, "--accept-unchecked-signer",
        help="with no trusted key at hand, accept a seal checked only against the key it names (no edit since "
             "signing, but not who signed); without it such a version is 'unchecked' and the command fails"),
) -> None:
    """Check stored versions: the owner's seal over the manifest (an edited ledger fails), the
    content hash in the version id, every object's sha256 and size, and that the manifest and
    every object are exactly the bytes privgraph writes for their content (nothing beside it)
    and the objects exactly those graph.json lists; with --all a version whose manifest cannot
    be read fails too."""
    with _errors():
        from privgraph.errors import ArtifactIntegrityError, ConfigError

        if (version is None) == (not all_versions):
            raise ConfigError("artifacts verify: give a VERSION or --all (not both)")
        trusted = _trusted_keys(public_key, private_records)
        _note_untrusted(trusted)
        st = _published_store(store)
        unreadable: list[str] = []  # --all: a version whose manifest cannot be read fails too
        if version is not None:
            targets = [st.find_version(version)]
        else:
            targets = [(i.pipeline, i.version) for i in st.list_versions(broken=unreadable)]
        failed: list[str] = []
        unchecked: list[str] = []  # sealed, but by a key nobody said to trust
        for what in unreadable:
            failed.append(what.split(":", 1)[0])
            err.print(f"[bold red]FAILED[/] {escape(' '.join(what.split()))} (its manifest cannot be read)", highlight=False,
                      soft_wrap=True)
        for pipeline, v in targets:
            try:
                r = st.verify_version(pipeline, v, trusted=trusted, sealed=True)
            except ArtifactIntegrityError as exc:
                failed.append(f"{pipeline}/{v}")
                err.print(f"[bold red]FAILED[/] {escape(one_line(exc))}", highlight=False, soft_wrap=True)
                continue
            word, whose = (("ok", "a trusted key") if trusted is not None else
                           ("ok", "signer not checked: accepted") if accept_unchecked_signer else
                           ("unchecked", "signer not checked against a trusted key"))
            if word == "unchecked":
                unchecked.append(f"{pipeline}/{v}")
            out.print(
                f"{word} {escape(pipeline)}/{escape(v)} ({r['objects']} objects, {r['bytes']} bytes, "
                f"sealed by {r['signer'][:16]}..., {whose})", highlight=False,
            )
        if failed:
            raise ArtifactIntegrityError(
                f"{len(failed)} of {len(targets) + len(unreadable)} versions failed verification: {', '.join(failed)}"
            )
        if unchecked:
            raise ArtifactIntegrityError(
                f"{len(unchecked)} version(s) intact but sealed by a key not checked against a trusted one "
                f"({', '.join(unchecked)}): pass --public-key (the owner's, from `privgraph artifacts public-key`), "
                "--private-records with the owner's key, or --accept-unchecked-signer"
            )
        if not targets:
            out.print("no versions")


@artifacts_app.command("public-key")
def artifacts_public_key(
    private_records: str = typer.Option("./private-records", "--private-records", help=_PRIVATE_RECORDS_HELP),
) -> None:
    """Print the owner's public signing key (64 hex), for consumers to pin with --public-key."""
    with _errors():
        from privgraph.errors import ConfigError
        from privgraph.storage.private_record import owner_public_key, owner_signing_key_path

        key = owner_public_key(private_records)
        if key is None:
            raise ConfigError(
                f"no signing key at {owner_signing_key_path(private_records)}: it is created by the first "
                "`privgraph run` with these private records"
            )
    print(key)


@artifacts_app.command("gc")
def artifacts_gc(
    min_age_hours: float = typer.Option(24.0, "--min-age-hours", help="only staged versions older than this"),
    dry_run: bool = typer.Option(False, "--dry-run", help="list what would be removed, remove nothing"),
    store: str | None = typer.Option(None, "--store", help="artifact store URI"),
    private_records: str = typer.Option("./private-records", "--private-records", help=_PRIVATE_RECORDS_HELP),
) -> None:
    """Remove staged versions a killed run left behind (objects without a manifest), the parts
    areas of partitioned releases never committed, and the raw partitioned input a killed run
    left in the owner's staging area; published versions are never touched."""
    with _errors():
        import datetime as dt

        from privgraph.errors import ConfigError
        from privgraph.storage import gc_staged

        if isinstance(min_age_hours, bool) or not min_age_hours >= 0:
            raise ConfigError(f"--min-age-hours must be >= 0, got {min_age_hours}")
        from privgraph.partitioned import sweep_staging

        removed = gc_staged(_published_store(store), dt.timedelta(hours=min_age_hours), dry_run=dry_run)
        inputs = sweep_staging(Path(private_records) / "staging", dt.timedelta(hours=min_age_hours), dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    for p, v in removed:
        out.print(f"{verb} staged {escape(p)}/{v}", highlight=False)
    for d in inputs:
        out.print(f"{verb} a killed run's partitioned input {escape(str(d))}", highlight=False)
    out.print(f"{len(removed)} staged version(s) {verb}" + (f", {len(inputs)} staged input(s)" if inputs else ""),
              highlight=False)


def _print_ledger(ledger: dict[str, Any]) -> None:
    t = Table("stage", "mechanism", "scope", "kind", "epsilon", "in scope unit", title="privacy ledger")
    for e in ledger.get("entries", []):
        g = e["guarantee"]
        unit = f"{g.get('unit_kind', g['kind'])} {g.get('unit_epsilon', g['epsilon']):.4g}"
        t.add_row(e["stage"], e["mechanism"], g["scope"], g["kind"], f"{g['epsilon']:.4g}", unit)
    out.print(t)


def _print_metrics(m: dict[str, Any], owner_only: dict[str, Any] | None = None) -> None:
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


def _reflowed(doc: str) -> str:
    """A docstring's paragraphs, each on one line: the help text wraps them to the terminal."""
    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n"))


for _typer in (app, artifacts_app):
    for _info in _typer.registered_commands:
        if _info.help is None and _info.callback is not None and _info.callback.__doc__:
            _info.help = _reflowed(_info.callback.__doc__)


def main() -> None:  # pragma: no cover - console script entry
    sys.exit(app())


if __name__ == "__main__":  # pragma: no cover
    main()
