"""What the evaluation costs, old against new in one process, as JSON lines (issue 43).

A pipeline's release is built through the library (its mechanisms, partitions and a fixed release
seed), then each candidate model of the evaluation (the GNN over the release, the feature-only
floor, the public edges alone, and the owner's clean graph) is trained for the pipeline's runs and
ensemble twice: by the evaluation as it was before issue 43 (``old``: input dropout before the
first layer on dense input, each input prepared per training, two first-layer products per epoch,
the dense input as it is (KProp'd in the input width), early-stopping patience 50 where the
pipeline sets none) and as it is now (``new``). Old and new alternate, A B A B, and the ratio
is the median of the pairs' ratios, so that a load on the machine hits both sides of a pair alike.

Each line: pipeline, candidate, runs, ensemble, seconds old and new (medians over the pairs), the
ratio, and the mean test accuracy of old and new over the runs (against the raw labels; the same
seeds on both sides: a paired comparison). A last line per pipeline sums the candidates.

Run: ``PRIVGRAPH_DATA_ROOT=../shared/datasets python benchmarks/evaluation_cost.py
[--pipelines cora facebook] [--pairs 2] [--set evaluate.runs=1] [--set evaluate.ensemble=1]
[--candidates gnn feature_only]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def old_evaluation() -> Iterator[None]:
    """The evaluation's training as before issue 43 (the reference implementation)."""
    from privgraph.evaluate import model_inputs
    from privgraph.evaluate.models.basic import NodeGNN

    prepare, factored, get, shares, propagated = (model_inputs._prepare_inputs, model_inputs._factored_input, model_inputs.InputCache.get,
                                                  NodeGNN.shares_first_layer, model_inputs._propagated_input)

    def prepare_with_input_dropout(graph: Any, **kwargs: Any) -> Any:
        inp = prepare(graph, **kwargs)
        if "input_dropout" in inp.model_kwargs:
            inp.model_kwargs["input_dropout"] = True
        return inp

    model_inputs._prepare_inputs = prepare_with_input_dropout
    model_inputs._factored_input = lambda x, raw, center: x
    model_inputs._propagated_input = lambda x, edge_index, steps: None
    model_inputs.InputCache.get = lambda self, graph, kw: model_inputs._prepare_inputs(graph, **kw)
    NodeGNN.shares_first_layer = property(lambda self: False)
    try:
        yield
    finally:
        model_inputs._prepare_inputs, model_inputs._factored_input, model_inputs.InputCache.get = prepare, factored, get
        model_inputs._propagated_input = propagated
        NodeGNN.shares_first_layer = shares


#: the early-stopping patience of the evaluation before issue 43 (now 25)
OLD_PATIENCE = 50


def _release(pipeline: str, sets: list[str], release_seed: int) -> tuple[Any, Any, Any]:
    """(config, clean graph, release) of ``pipeline`` with ``sets`` applied."""
    import tempfile

    from release_value import _set  # this directory is on sys.path when run as a script
    from privgraph.config.loader import load_config
    from privgraph.ingest.datasets import load_dataset
    from privgraph.mechanisms import build_mechanism
    from privgraph.parts.partition import partition_graph
    from privgraph.privatize.release import privatize_graph
    from privgraph.seeding import as_seed_sequence

    raw = yaml.safe_load((ROOT / "pipelines.yaml").read_text())["pipelines"][pipeline]
    for s in sets:
        _set(raw, s)
    raw.pop("schedule", None)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pipelines.yaml"
        path.write_text(yaml.safe_dump({"pipelines": {pipeline: raw}}))
        cfg = load_config(path).get(pipeline)
    graph = load_dataset(cfg.dataset.name, **cfg.dataset.load_kwargs())

    def mechanism(section: Any) -> Any:
        return None if section is None else build_mechanism(section.mechanism, section.params())

    release = privatize_graph(graph, features=mechanism(cfg.features), edges=mechanism(cfg.edges),
                              labels=mechanism(cfg.labels),
                              partitioning=partition_graph(graph, cfg.partitions.num_parts, cfg.partitions.method),
                              root_seed=as_seed_sequence(release_seed)).graph
    return cfg, graph, release


def _candidates(cfg: Any, graph: Any, release: Any) -> list[tuple[str, Any, dict[str, Any]]]:
    from privgraph.evaluate.metrics import label_noise
    from privgraph.evaluate.training import DENOISING_OPTIONS
    from privgraph.evaluate.utility import feature_only_kwargs, public_edges_kwargs, version_kwargs

    # as version_metrics passes them: Drop's label budget from the pipeline's labels section
    kwargs = {**(label_noise(cfg, None) if cfg.evaluate.drop else {}), **cfg.evaluate.train_kwargs()}
    out = [("gnn", release, version_kwargs(release, kwargs)), ("feature_only", release, feature_only_kwargs(kwargs))]
    public = public_edges_kwargs(release, kwargs)
    if public is not None:
        out.append(("public_edges", release, public))
    out.append(("clean", graph, {k: v for k, v in kwargs.items() if k not in DENOISING_OPTIONS}))
    return out


def _train(graph: Any, kwargs: dict[str, Any], seeds: list[Any], ensemble: int, eval_y: np.ndarray) -> tuple[float, float]:
    """Seconds and mean test accuracy of one candidate over the runs (one input cache, as in
    :func:`~privgraph.evaluate.utility.evaluate_utility`)."""
    from privgraph.evaluate.model_inputs import InputCache
    from privgraph.evaluate.training import fit_ensemble

    cache = InputCache()
    start = time.perf_counter()
    accs = [fit_ensemble(graph, seed=s, members=ensemble, eval_y=eval_y, input_cache=cache, **kwargs)[0]["test_acc"]
            for s in seeds]
    return time.perf_counter() - start, float(np.mean(accs))


def measure(pipeline: str, sets: list[str], pairs: int, release_seed: int, eval_seed: int,
            only: list[str] | None = None) -> list[dict[str, Any]]:
    from privgraph.seeding import as_seed_sequence, partition_seeds

    cfg, graph, release = _release(pipeline, sets, release_seed)
    runs, ensemble = cfg.evaluate.runs, cfg.evaluate.ensemble
    old_patience = {} if "patience" in cfg.evaluate.model_fields_set else {"patience": OLD_PATIENCE}
    seeds = partition_seeds(as_seed_sequence(eval_seed), runs)
    lines = []
    for name, g, kwargs in _candidates(cfg, graph, release):
        if only and name not in only:
            continue
        old, new = [], []
        for _ in range(pairs):
            with old_evaluation():
                old.append(_train(g, {**kwargs, **old_patience}, seeds, ensemble, graph.y))
            new.append(_train(g, kwargs, seeds, ensemble, graph.y))
        line = {"pipeline": pipeline, "set": sets, "candidate": name, "runs": runs, "ensemble": ensemble,
                "pairs": pairs, "seconds_old": round(statistics.median(t for t, _ in old), 2),
                "seconds_new": round(statistics.median(t for t, _ in new), 2),
                "ratio": round(statistics.median(o[0] / n[0] for o, n in zip(old, new)), 2),
                "test_acc_old": round(old[0][1], 4), "test_acc_new": round(new[0][1], 4)}
        print(json.dumps(line), flush=True)
        lines.append(line)
    total = {"pipeline": pipeline, "set": sets, "candidate": "all", "seconds_old": round(sum(ln["seconds_old"] for ln in lines), 1),
             "seconds_new": round(sum(ln["seconds_new"] for ln in lines), 1)}
    total["ratio"] = round(total["seconds_old"] / total["seconds_new"], 2)
    print(json.dumps(total), flush=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipelines", nargs="+", default=["cora", "facebook"])
    ap.add_argument("--pairs", type=int, default=2, help="old/new pairs per candidate (A B A B)")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="KEY.PATH=YAML value (repeatable)")
    ap.add_argument("--release-seed", type=int, default=1)
    ap.add_argument("--eval-seed", type=int, default=3)
    ap.add_argument("--candidates", nargs="+", choices=["gnn", "feature_only", "public_edges", "clean"],
                    help="only these candidates (default: all)")
    args = ap.parse_args()
    for pipeline in args.pipelines:
        measure(pipeline, args.sets, args.pairs, args.release_seed, args.eval_seed, args.candidates)


if __name__ == "__main__":
    main()
