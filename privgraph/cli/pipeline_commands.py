"""The pipeline commands: ``run``, ``evaluate``, ``compare`` and ``serve`` (registered on the app
in :mod:`privgraph.cli`)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from privgraph.cli.ci_summary import write_ci_summary
from privgraph.cli.console import err, out
from privgraph.cli.failures import exit_on_failure, quiet_prefect
from privgraph.cli.options import SHOW_PRIVATE_HELP, VERBOSE_HELP, default_store
from privgraph.cli.tables import print_ledger, print_metrics
from privgraph.errors import ConfigError


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
    show_private: bool = typer.Option(False, "--show-private", help=SHOW_PRIVATE_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP),
) -> None:
    """Run the privatize flow (and evaluate) for PIPELINE and publish a private version."""
    t0 = time.perf_counter()
    res: dict[str, Any] | None = None
    try:
        with exit_on_failure():
            from privgraph.validate.preflight import preflight  # lazy: CLI start-up (pydantic, the loaders)
            from privgraph.cli.progress_display import rich_progress  # lazy: rich, only for a live display

            # config, store, private records, input files: before Prefect starts and any data is read;
            # the flow takes this load and check instead of repeating them
            store = preflight(str(config), pipeline, store, evaluate=evaluate).store
            from flows.privatize import privatize_flow  # lazy: prefect, imported only when a flow runs
            from flows.server import prefect_api  # lazy: CLI start-up

            quiet_prefect(verbose)
            status = f"running pipeline [bold]{escape(pipeline)}[/] (privatize -> validate -> evaluate -> store)"
            with prefect_api(), rich_progress(err, status=status, transient=True):
                res = privatize_flow(pipeline=pipeline, config_path=str(config), store=store, evaluate=evaluate)
            res["seconds"] = round(time.perf_counter() - t0, 2)
    except typer.Exit as exc:
        if ci:
            write_ci_summary(pipeline, None, exc.exit_code, round(time.perf_counter() - t0, 2))
        raise
    assert res is not None
    if ci:
        write_ci_summary(pipeline, res, 0, res["seconds"])
        return
    if as_json:
        print(json.dumps(res, sort_keys=True))
        return
    out.print(f"[bold green]published[/] {escape(res['pipeline'])}/{res['version']} in {escape(str(res['store']))} ({res['seconds']} s)")
    print_ledger(res["ledger"])
    if res.get("metrics"):
        owner_only = None
        if res.get("private_record") and show_private:
            owner_only = json.loads(Path(res["private_record"]).read_text()).get("private_evaluation")
        print_metrics(res["metrics"], owner_only)
    elif res.get("not_evaluated"):
        why = res["not_evaluated"]
        out.print("not evaluated: " + escape("run without --no-evaluate to train and report utility" if why == "--no-evaluate"
                                             else why + "; add them to report utility"))
    if res.get("private_record"):
        out.print(f"private record (owner only, not published): {escape(res['private_record'])}"
                  + ("" if show_private else "; --show-private prints its evaluation here"))


def evaluate(
    version: str = typer.Argument(..., help="a published version (see `privgraph artifacts list`)"),
    config: Path = typer.Option(Path("pipelines.yaml"), "--config", "-c", help="pipelines file"),
    store: str | None = typer.Option(None, "--store", help="artifact store URI"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    structure_plot: Path | None = typer.Option(
        None, "--structure-plot", help="also write the graph-utility report as a PNG here (private evaluation)"),
    show_private: bool = typer.Option(False, "--show-private", help=SHOW_PRIVATE_HELP),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP),
) -> None:
    """Train the GNN on a published version (shareable accuracy) and on the clean graph (the
    owner's private evaluation); print both."""
    with exit_on_failure():
        from privgraph.storage import open_store  # lazy: CLI start-up (the store loads pyarrow)

        if structure_plot is not None and not structure_plot.parent.is_dir():
            raise ConfigError(f"--structure-plot: directory {structure_plot.parent} does not exist")
        store_uri = store or default_store()
        pipeline, version = open_store(store_uri).find_version(version)
        from flows.evaluate import evaluate_flow  # lazy: torch and prefect, only where a model trains
        from flows.server import prefect_api  # lazy: CLI start-up
        from privgraph.cli.progress_display import rich_progress  # lazy: rich, only for a live display

        quiet_prefect(verbose)
        with prefect_api(), rich_progress(err, status=f"evaluating {escape(pipeline)}/{escape(version)}", transient=True):
            res = evaluate_flow(pipeline=pipeline, version=version, config_path=str(config), store=store_uri)
        if structure_plot is not None:
            report = (res.get("private_evaluation") or {}).get("graph_utility")
            if report is None:
                raise ConfigError("--structure-plot: no structure report (the graph has no private edges, "
                                  "or evaluate.graph_report is false)")
            from privgraph.evaluate.graph_utility import structure_plot_png  # lazy: scipy, only for --structure-plot

            tmp = structure_plot.with_name(f".{structure_plot.name}.tmp")
            tmp.write_bytes(structure_plot_png(f"{pipeline} {version}: released edges against the raw graph "
                                               f"(PRIVATE EVALUATION)", report))
            tmp.replace(structure_plot)
    if as_json:
        print(json.dumps({k: v for k, v in res.items() if k != "private_evaluation"}, sort_keys=True))
        return
    print_metrics(res["metrics"], res.get("private_evaluation") if show_private else None)
    if not show_private:
        out.print("the owner's private evaluation (clean graph, structure, attacks) is not printed: --show-private")
    out.print(f"input check: {res.get('input_check')}")


def compare(
    name: str = typer.Argument(..., help="comparison name in pipelines.yaml (comparisons:)"),
    config: Path = typer.Option(Path("pipelines.yaml"), "--config", "-c", help="pipelines file"),
    store: str | None = typer.Option(None, "--store", help="artifact store URI (default: the pipeline's storage)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object (version, summary)"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help=VERBOSE_HELP),
) -> None:
    """Compare mechanisms: privatize one scope with each at each epsilon, train on each, and store
    the table (mean +- std, t-test of the target against the best other) and the plots as a
    PRIVATE report (scored on raw data) under the pipeline's private_records directory."""
    with exit_on_failure():
        from privgraph.config.loader import load_config  # lazy: CLI start-up

        cfg = load_config(config)
        if cfg.graph_comparison(name) is not None:
            return _graph_compare(name, config, as_json, verbose)
        cfg.comparison(name)  # fail fast on config errors
        if store is not None:  # a flow parameter is stored and shown by Prefect: a URI holding credentials is refused
            from privgraph.storage import open_store  # lazy: CLI start-up (the store loads pyarrow)

            open_store(store)
        from flows.compare import compare_flow  # lazy: torch and prefect, only where a comparison runs

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
    from flows.server import prefect_api  # lazy: CLI start-up
    from privgraph.cli.progress_display import rich_progress  # lazy: rich, only for a live display

    quiet_prefect(verbose)
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
    from flows.compare import graph_compare_flow  # lazy: torch and prefect, only where a comparison runs

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
    Ctrl-C: the executing run is cancelled, a run left Running ends as Crashed with a message that
    says what the store holds of it (the version it published, once its manifest was written, or
    nothing), claimed runs go back to the schedule, and the schedules are paused until the next
    ``serve``."""
    with exit_on_failure():
        from privgraph.config.loader import load_config  # lazy: CLI start-up

        cfg = load_config(config)
        names = pipelines or [n for n, p in cfg.pipelines.items() if p.schedule is not None]
        if not names:
            raise ConfigError(f"{config}: no pipeline has a 'schedule'; add one or name pipelines and pass --cron")
        from flows.schedule import check_not_served, pipeline_deployments  # lazy: prefect, only for serve
        from flows.schedule import serve as serve_deployments  # lazy: prefect, only for serve

        if cron is not None:
            _check_cron(cron)
        for n in names:
            cfg.get(n)
        from flows.server import require_prefect_api  # lazy: CLI start-up

        require_prefect_api()
        deployments = pipeline_deployments(cfg, names, str(config.resolve()), cron=cron, evaluate=evaluate)
        check_not_served(deployments)
        err.print(f"serving {escape(', '.join(d.name for d in deployments))}; Ctrl-C to stop", highlight=False)
        ended, released, published = serve_deployments(deployments)
        if published:  # the runner cancelled them after their manifest was written: they published
            err.print(f"stopped; {len(published)} run(s) stopped after their version was published, as the store "
                      f"says: {escape('; '.join(published))}", highlight=False, soft_wrap=True)
        if ended:
            err.print(f"stopped; {len(ended)} run(s) left Running by this process ended as Crashed, as the store "
                      f"says: {escape('; '.join(ended))}", highlight=False, soft_wrap=True)
        if released:
            err.print(f"stopped; {len(released)} claimed run(s) handed back to the schedule: {escape(', '.join(released))}",
                      highlight=False, soft_wrap=True)
        err.print("stopped; the schedules of " + escape(", ".join(d.name for d in deployments)) + " are paused "
                  "until the next `privgraph serve`", highlight=False, soft_wrap=True)


def _check_cron(expr: str) -> None:
    """``--cron`` is validated like ``schedule.cron`` in pipelines.yaml, before anything runs."""
    from pydantic import ValidationError  # lazy: CLI start-up

    from privgraph.config.pipeline import ScheduleConfig  # lazy: CLI start-up

    try:
        ScheduleConfig(cron=expr)
    except ValidationError as exc:
        raise ConfigError(f"--cron: {exc.errors()[0]['msg'].removeprefix('Value error, ')}") from None
