"""Cells of a comparison of ``pipelines.yaml``, run in this process through the library, as JSON lines.

``privgraph compare NAME`` runs a comparison as a Prefect flow and stores its table as a private
report. This script runs the same cells through :func:`privgraph.evaluate.comparison.run_comparison`
(ingest, partition, then each mechanism x epsilon x run: privatize, train, attack), with no
Prefect, store or checkpoint, for a machine that has torch but not the orchestration stack (a lent
GPU box) or for a subset of a comparison's cells (``--mechanisms``, ``--epsilons``, ``--runs``).

Every run prints one line as it finishes (the clean graph's runs first, then each cell's): its
accuracies, the model chosen by validation, each attack's ROC-AUC, and the seconds since the
start; the last line is :func:`privgraph.evaluate.comparison_report.summarize` of the whole grid. Like the
compare flow's report, these figures are scored on raw data: a PRIVATE evaluation for the data
owner (here, of a public benchmark dataset), never a release.

Run: ``PRIVGRAPH_DATA_ROOT=../shared/datasets python benchmarks/comparison_cells.py facebook-edges
--mechanisms warner_rr edge_rand --epsilons 1 0.5 --runs 2 [--device cuda] [--seed 0]``
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent


class _PrintedRuns:
    """The comparison's checkpoint protocol (``get``/``put``), keeping nothing: each finished run
    is printed as one JSON line (a cut-off run leaves every finished line behind)."""

    def __init__(self, start: float) -> None:
        self.start = start

    def get(self, cell: str) -> None:
        return None

    def put(self, cell: str, done: dict[str, Any]) -> None:
        rec = dict(done["record"])
        rec["cell"] = cell
        rec["seconds"] = round(time.perf_counter() - self.start, 1)
        print(json.dumps(rec), flush=True)


def _only(config: Path, name: str, tmp: Path) -> Path:
    """A copy of ``config`` with the comparison ``name`` and its pipeline alone (no schedule), so
    that only their sections are validated: a machine without the stack of other pipelines (GAP's
    accountant, the scheduler's cron parser) runs it."""
    raw = yaml.safe_load(config.read_text())
    if name not in (raw.get("comparisons") or {}):
        raise SystemExit(f"{config}: no comparison {name!r}")
    comparison = raw["comparisons"][name]
    pipeline = dict(raw["pipelines"][comparison["pipeline"]])
    pipeline.pop("schedule", None)
    path = tmp / "pipelines.yaml"
    path.write_text(yaml.safe_dump({"pipelines": {comparison["pipeline"]: pipeline}, "comparisons": {name: comparison}}))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("comparison")
    ap.add_argument("--config", default=str(ROOT / "pipelines.yaml"))
    ap.add_argument("--mechanisms", nargs="+", help="labels of the comparison's mechanisms to run (default: all)")
    ap.add_argument("--epsilons", nargs="+", type=float, help="default: the comparison's")
    ap.add_argument("--runs", type=int, help="default: the comparison's")
    ap.add_argument("--device", help="training device (default: the evaluation's)")
    ap.add_argument("--seed", type=int, help="default: the comparison's seed")
    args = ap.parse_args()

    from privgraph.evaluate.comparison import run_comparison
    from privgraph.evaluate.comparison_report import summarize
    from privgraph.config.pipeline import mechanism_entry
    from privgraph.config.loader import load_config
    from privgraph.ingest.datasets import load_dataset
    from privgraph.parts.partition import partition_graph
    from privgraph.seeding import as_seed_sequence, stage_seed

    cfg = load_config(_only(Path(args.config), args.comparison, Path(tempfile.mkdtemp(prefix="comparison-cells-"))))
    ccfg = cfg.comparison(args.comparison)
    pcfg = cfg.get(ccfg.pipeline)
    mechanisms = dict(ccfg.mechanisms)
    if args.mechanisms:
        unknown = sorted(set(args.mechanisms) - set(mechanisms))
        if unknown:
            raise SystemExit(f"{args.comparison}: no mechanism labelled {unknown} (it has {sorted(mechanisms)})")
        mechanisms = {m: mechanisms[m] for m in args.mechanisms}
    if pcfg.embed is not None or any(mechanism_entry(m, e)[2] for m, e in mechanisms.items()):
        raise SystemExit(f"{args.comparison}: this script runs no embed or scores stage; use `privgraph compare`")
    target = ccfg.target if ccfg.target in mechanisms else next(iter(mechanisms))
    ev = ccfg.evaluate_settings(pcfg)
    train_kwargs = ev.train_kwargs()
    if args.device:
        train_kwargs["device"] = args.device
    seed = ccfg.seed if args.seed is None else args.seed

    start = time.perf_counter()
    graph = load_dataset(pcfg.dataset.name, **pcfg.dataset.load_kwargs())
    parts = partition_graph(graph, pcfg.partitions.num_parts, pcfg.partitions.method)
    result = run_comparison(
        graph, scope=ccfg.scope, mechanisms=mechanisms, epsilons=args.epsilons or ccfg.epsilons,
        runs=args.runs or ccfg.runs, target=target, partitioning=parts,
        root_seed=stage_seed(as_seed_sequence(seed), "compare"), train_kwargs=train_kwargs,
        attacks=ev.attacks, checkpoint=_PrintedRuns(start),
    )
    print(json.dumps({"comparison": args.comparison, "mechanisms": list(mechanisms), "device": train_kwargs.get("device"),
                      "seconds": round(time.perf_counter() - start, 1), "summary": summarize(result)}), flush=True)


if __name__ == "__main__":
    main()
