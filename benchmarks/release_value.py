"""What a release is worth over the public data alone, through the CLI, as JSON lines.

Each line is one ``privgraph run PIPELINE --json`` (a real Prefect flow run on a temporary server)
of a pipeline of ``pipelines.yaml`` with optional overrides (``--set features.mechanism=multibit``,
YAML values), at a fixed ``seed`` per repeat (the seed is configuration: it is never written to an
artifact). Printed: every utility row of the version's shareable metrics (mean over the
evaluation's runs, on the version's own test labels), the models chosen per run, and the value of
the release (chosen model - the public-only reference) with its paired test; the last line
averages the repeats. Versions go to a temporary store.

``--library`` runs the same stages in this process through the library alone (ingest, partition,
privatize, the evaluation of the unstored version: what the flows call, without Prefect, a store
or a manifest; the budget checkpoint before any data is read and on the release's ledger, as a
run's), for a machine that has torch but not the orchestration stack (a lent GPU box:
``--set evaluate.device=cuda``). The figures follow the same protocol; the seeds differ from a CLI
run's only in how the stages' seeds are derived from ``seed``.

``--baseline-set`` (repeatable) runs a second configuration at the same seeds (the same
pipeline with those overrides, e.g. ``--baseline-set edges.mechanism=nonpriv_part``: no edge
release) and the last line adds the paired t-test of the chosen model's per-run accuracies, run
``i`` of repeat ``r`` against the baseline's (the feature release and the training seeds are the
same in both: only what the overrides change differs).

Run: ``PRIVGRAPH_DATA_ROOT=../shared/datasets python benchmarks/release_value.py cora --repeats 2
[--set evaluate.runs=3] [--set features.mechanism=multibit] [--library] [--baseline-set KEY=VALUE]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROWS = ("public_only", "feature_only", "public_edges", "release_propagation", "private", "correct_and_smooth",
        "selected")
ROOT = Path(__file__).resolve().parent.parent


def _set(cfg: dict[str, Any], assignment: str) -> None:
    path, _, value = assignment.partition("=")
    *parents, leaf = path.split(".")
    node = cfg
    for key in parents:
        node = node.setdefault(key, {})
    parsed = yaml.safe_load(value)
    if parsed is None:
        node.pop(leaf, None)
    else:
        node[leaf] = parsed


def _cli_metrics(pipeline: str, path: Path, seed: int, tmp: Path) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "privgraph.cli", "run", pipeline, "-c", str(path), "--json"],
                         capture_output=True, text=True, cwd=tmp, env=os.environ.copy())
    if out.returncode:
        raise SystemExit(f"{pipeline} seed {seed}: exit {out.returncode}: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout)["metrics"]


def _library_metrics(pipeline: str, path: Path) -> dict[str, Any]:
    """The privatize flow's stages through the library: the shareable metrics of the unstored
    version (no scores stage, no embed stage: pipelines with those need the CLI)."""
    from privgraph.config.loader import load_config
    from privgraph.ingest.datasets import load_dataset
    from privgraph.evaluate.metrics import evaluation_entropy, version_metrics
    from privgraph.mechanisms import build_mechanism
    from privgraph.parts.partition import partition_graph
    from privgraph.evaluate.release_encoder import encoder_on
    from privgraph.privatize.release import privatize_graph
    from privgraph.seeding import as_seed_sequence, stage_seed
    from privgraph.guarantee.budget import BudgetPolicy
    from privgraph.validate import budget_failures
    from privgraph.errors import ValidationFailedError
    from privgraph.validate.preflight import check_budget

    cfg = load_config(path).get(pipeline)
    if cfg.scores is not None or cfg.embed is not None:
        raise SystemExit(f"{pipeline}: --library runs no scores or embed stage; use the CLI")
    try:  # the run's checkpoint before any data is read, as the CLI runs it
        check_budget(cfg)
    except ValidationFailedError as e:
        raise SystemExit(f"{pipeline}: {e}") from None
    graph = load_dataset(cfg.dataset.name, **cfg.dataset.load_kwargs())

    def mechanism(section: Any) -> Any:
        return None if section is None else build_mechanism(section.mechanism, section.params())

    result = privatize_graph(
        graph, features=mechanism(cfg.features), edges=mechanism(cfg.edges), labels=mechanism(cfg.labels),
        partitioning=partition_graph(graph, cfg.partitions.num_parts, cfg.partitions.method),
        root_seed=stage_seed(as_seed_sequence(cfg.seed), "privatize"), encoder=encoder_on(cfg.evaluate.device),
    )
    failures = budget_failures(result.ledger, BudgetPolicy(cfg.budget, cfg.budget_delta))
    if failures:  # and again on the ledger the release recorded
        raise SystemExit(f"{pipeline}: validation checkpoint failed: " + "; ".join(failures))
    return version_metrics(result.graph, cfg, None, evaluation_entropy(cfg.seed))


def run_once(pipeline: str, sets: list[str], seed: int, tmp: Path, library: bool = False) -> dict[str, Any]:
    """One CLI run (or, with ``library``, one in-process library run) of ``pipeline`` with
    ``sets`` applied at ``seed``; its metrics' summary."""
    cfg = yaml.safe_load((ROOT / "pipelines.yaml").read_text())
    p = cfg["pipelines"][pipeline]
    for s in sets:
        _set(p, s)
    p["seed"] = seed
    p["storage"] = str(tmp / "store")
    p.pop("schedule", None)
    path = tmp / f"pipelines-{seed}.yaml"
    path.write_text(yaml.safe_dump({"pipelines": {pipeline: p}}))
    start = time.perf_counter()
    metrics = _library_metrics(pipeline, path) if library else _cli_metrics(pipeline, path, seed, tmp)
    line: dict[str, Any] = {"pipeline": pipeline, "set": sets, "seed": seed, "seconds": round(time.perf_counter() - start, 1)}
    if library:
        line["via"] = "library"
    for key in ROWS:
        if metrics.get(key):
            line[key] = round(metrics[key]["test_acc_mean"], 4)
    line["selected_std"] = round(metrics["selected"]["test_acc_std"], 4)
    line["selected_runs"] = [round(a, 4) for a in metrics["selected"]["test_acc"]]
    line["chosen"] = metrics["selected"]["models"]
    if metrics["private"].get("kprop"):
        line["kprop"] = metrics["private"]["kprop"]  # [K_x, K_y] chosen per run by kprop_search
    if metrics.get("ensemble"):
        line["ensemble"] = metrics["ensemble"]
    if metrics.get("value_of_release"):
        v = metrics["value_of_release"]
        line["value_of_release"] = round(v["mean_difference"], 4)
        line["pvalue"] = None if v["pvalue"] is None else float(f"{v['pvalue']:.3g}")
    if metrics.get("correct_and_smooth"):
        line["cs_base"] = metrics["correct_and_smooth"]["base"]
    return line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pipeline")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--first-seed", type=int, default=0, help="the seed of the first repeat (then +1 each)")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="KEY.PATH=YAML value (repeatable)")
    ap.add_argument("--library", action="store_true", help="run the stages in-process through the library (no Prefect)")
    ap.add_argument("--baseline-set", dest="baseline", action="append", default=[],
                    help="KEY.PATH=YAML value of a baseline run at the same seeds (repeatable)")
    args = ap.parse_args()
    lines, base = [], []
    with tempfile.TemporaryDirectory(prefix="release-value-") as tmp:
        for seed in range(args.first_seed, args.first_seed + args.repeats):
            lines.append(run_once(args.pipeline, args.sets, seed, Path(tmp), args.library))
            print(json.dumps(lines[-1]), flush=True)
            if args.baseline:
                base.append(run_once(args.pipeline, args.baseline, seed, Path(tmp), args.library))
                print(json.dumps({**base[-1], "baseline": True}), flush=True)
    summary: dict[str, Any] = {"pipeline": args.pipeline, "set": args.sets, "repeats": args.repeats, "mean": {}}
    for key in (*ROWS, "value_of_release"):
        vals = [ln[key] for ln in lines if key in ln]
        if vals:
            summary["mean"][key] = round(sum(vals) / len(vals), 4)
    if base:
        from scipy import stats

        a = [x for ln in lines for x in ln["selected_runs"]]
        b = [x for ln in base for x in ln["selected_runs"]]
        t = stats.ttest_rel(a, b)
        summary["vs_baseline"] = {"baseline_set": args.baseline, "runs": len(a),
                                  "mean_difference": round(sum(a) / len(a) - sum(b) / len(b), 4),
                                  "pvalue": float(f"{t.pvalue:.3g}"), "test": "paired t-test (scipy.stats.ttest_rel)"}
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
