"""Utility comparisons: paired seeded runs, the summary and its t-test, the table and the plot."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from privgraph.evaluate.comparison import ComparisonResult, run_comparison
from privgraph.evaluate.comparison_report import comparison_markdown, summarize, utility_plot_png
from privgraph.ingest.datasets import load_dataset
from privgraph.parts.partition import partition_graph

TRAIN = {"epochs": 15, "patience": None, "hidden": 16, "device": "cpu"}


@pytest.fixture(scope="module")
def small():
    g = load_dataset("sbm", rho=0.2, num_nodes=300, num_features=8, num_classes=3)
    return g, partition_graph(g, 2, "hash")


def _run(small, seed=5, **kw):
    g, parts = small
    args = dict(
        scope="features", mechanisms={"feature_rr": {"bins": 2}, "laplace": {}}, epsilons=[1.0, 4.0],
        runs=2, target="feature_rr", partitioning=parts, root_seed=np.random.SeedSequence(seed),
        train_kwargs=TRAIN,
    )
    args.update(kw)
    return run_comparison(g, **args)


def test_runs_are_seeded_paired_and_complete(small, one_torch_thread):
    r = _run(small)
    assert len(r.records) == 2 + 2 * 2 * 2  # clean runs + mechanisms x epsilons x runs
    assert r.to_dict()["records"] == _run(small).to_dict()["records"]  # same seed, same accuracies
    assert all(0.0 <= rec["test_acc"] <= 1.0 for rec in r.records)
    assert {rec["mechanism"] for rec in r.records} == {"clean", "feature_rr", "laplace"}
    other = _run(small, seed=6)
    assert [x["test_acc"] for x in other.records] != [x["test_acc"] for x in r.records]


def test_summary_and_t_test_match_scipy():
    recs = []
    acc = {"a": [0.5, 0.52, 0.54], "b": [0.6, 0.58, 0.59], "c": [0.4, 0.41, 0.39]}
    for m, xs in acc.items():
        recs += [{"mechanism": m, "epsilon": 1.0, "run": i, "test_acc": x} for i, x in enumerate(xs)]
    recs += [{"mechanism": "clean", "epsilon": None, "run": i, "test_acc": 0.8} for i in range(3)]
    r = ComparisonResult(scope="features", target="a", epsilons=(1.0,), mechanisms=("a", "b", "c"), runs=3,
                         records=tuple(recs))
    s = summarize(r)
    assert s["cells"]["b"]["1.0"]["mean"] == pytest.approx(np.mean(acc["b"]))
    assert s["cells"]["b"]["1.0"]["std"] == pytest.approx(np.std(acc["b"], ddof=1))
    t = s["t_tests"]["1.0"]
    ref = stats.ttest_rel(acc["a"], acc["b"])  # runs are paired by their training seed
    assert t["best_baseline"] == "b"  # the best OTHER mechanism by mean
    assert t["t"] == pytest.approx(ref.statistic) and t["p"] == pytest.approx(ref.pvalue)
    md = comparison_markdown("T", r)
    assert "| a (target) | 0.520 +- 0.020 |" in md
    assert "| b | **0.590 +- 0.010** |" in md
    assert "vs b: t = " in md and "| clean graph | 0.800 +- 0.000 |" in md
    png = utility_plot_png("T", r)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_every_cell_has_its_feature_only_floor(small):
    """A features comparison trains the floor on each cell's private features; an edges
    comparison once per run (the features are untouched), the same in every cell. The table
    and the summary carry it with the paired test of the GNN against it."""
    r = _run(small)
    cell = [x for x in r.records if x["mechanism"] == "laplace" and x["epsilon"] == 1.0]
    assert all({"feature_only_acc", "selected_acc"} <= set(x) for x in cell)
    assert all(x["selected_acc"] in (x["test_acc"], x["feature_only_acc"], x["public_only_acc"],
                                     x["correct_and_smooth_acc"]) for x in cell)
    assert not any("release_propagation_acc" in x for x in cell)  # no released edge
    assert not any("public_edges_acc" in x for x in cell)  # a features comparison: no edge is private
    assert not any("feature_only_acc" in x for x in r.records if x["mechanism"] == "clean")
    s = summarize(r)["cells"]["laplace"]["1.0"]
    assert s["vs_feature_only"]["test"].startswith("paired t-test") and s["vs_feature_only"]["runs"] == 2
    assert "## The feature-only floor" in comparison_markdown("T", r)
    e = _run(small, scope="edges", mechanisms={"dprr": {}, "warner_rr": {}}, target="dprr", epsilons=[1.0])
    floors = {m: list(e.accuracies(m, 1.0, "feature_only_acc")) for m in ("dprr", "warner_rr")}
    assert floors["dprr"] == floors["warner_rr"] and len(floors["dprr"]) == 2
    g, _ = small
    from privgraph.seeding import partition_seeds, stage_seed
    from privgraph.evaluate.training import fit_node_classifier
    from privgraph.evaluate.candidates import feature_only_kwargs

    ts = partition_seeds(stage_seed(np.random.SeedSequence(5), "train"), 2)[0]
    ref = fit_node_classifier(g, seed=ts, eval_y=g.y, **feature_only_kwargs(dict(TRAIN))).result["test_acc"]
    assert floors["dprr"][0] == ref  # the model over no edges, on the raw features, with run 0's seed
    # the public edges alone are the third candidate of an edges cell (the graph has public edges)
    pub = {m: list(e.accuracies(m, 1.0, "public_edges_acc")) for m in ("dprr", "warner_rr")}
    assert pub["dprr"] == pub["warner_rr"] and len(pub["dprr"]) == 2
    ref_pub = fit_node_classifier(g, seed=ts, eval_y=g.y, **{**TRAIN, "edges": "public"}).result["test_acc"]
    assert pub["dprr"][0] == ref_pub
    for x in (x for x in e.records if x["mechanism"] == "dprr"):
        by_name = {"public_only": x["public_only_acc"], "feature_only": x["feature_only_acc"],
                   "public_edges": x["public_edges_acc"], "gnn": x["test_acc"],
                   "release_propagation": x["release_propagation_acc"],
                   "correct_and_smooth": x["correct_and_smooth_acc"]}
        assert x["selected_acc"] == by_name[x["selected"]]
    # the public data alone (label propagation of the training labels over the public edges), in
    # every cell: the same for every mechanism, and the value of the release over it
    from privgraph.evaluate.public_reference import public_only_reference

    alone = public_only_reference(g, np.ones(g.num_nodes, bool), int(g.y.max()) + 1, raw_y=g.y)["test_acc"]
    assert all(x["public_only_acc"] == alone for x in e.records if x["mechanism"] != "clean")
    cell = summarize(e)["cells"]["dprr"]["1.0"]
    # Correct and Smooth of the cell's models (floor, public edges, GNN), as evaluate_utility's
    from privgraph.evaluate.correct_and_smooth import release_correct_and_smooth

    x0 = next(x for x in e.records if x["mechanism"] == "dprr" and x["run"] == 0)
    assert cell["correct_and_smooth"]["mean"] == pytest.approx(np.mean(e.accuracies("dprr", 1.0, "correct_and_smooth_acc")))
    assert 0.0 <= x0["correct_and_smooth_acc"] <= 1.0 and "release_propagation" in cell
    assert release_correct_and_smooth(g, {}, 2) is None
    assert cell["public_only"]["mean"] == pytest.approx(alone)
    assert cell["value_of_release"]["mean_difference"] == pytest.approx(cell["selected"]["mean"] - alone)
    assert "public alone" in comparison_markdown("T", e)
    assert len(cell["selected"]["models"]) == 2 and cell["public_edges"]["mean"] == pytest.approx(np.mean(pub["dprr"]))
    assert cell["selected_vs_feature_only"]["test"].startswith("paired t-test")
    assert "chosen - floor" in comparison_markdown("T", e)


def test_bad_comparisons_are_refused(small):
    g, parts = small
    with pytest.raises(ValueError, match="target 'x' is not among"):
        _run(small, target="x")
    with pytest.raises(ValueError, match="protects edges, not features"):
        _run(small, mechanisms={"feature_rr": {}, "dprr": {}})
    with pytest.raises(ValueError, match="do not set epsilon"):
        _run(small, mechanisms={"feature_rr": {"epsilon": 1.0}})
    with pytest.raises(ValueError, match="epsilons"):
        _run(small, epsilons=[0.0])
    with pytest.raises(ValueError, match="runs"):
        _run(small, runs=0)
    with pytest.raises(ValueError, match="bins"):
        _run(small, mechanisms={"feature_rr": {"bins": 1}})


def test_labels_alias_a_registered_mechanism_and_use_scores_needs_theta(small):
    g, parts = small
    mechs = {"hetero": {"mechanism": "feature_rr", "use_scores": True}, "homo": {"mechanism": "feature_rr"}}
    with pytest.raises(ValueError, match="use_scores needs scores"):
        _run(small, mechanisms=mechs, target="hetero", epsilons=[1.0])
    theta = np.array([1.0, 0, 0, 0, 0, 0, 0, 0])
    r = _run(small, mechanisms=mechs, target="hetero", epsilons=[8.0], theta=theta)
    assert r.mechanisms == ("hetero", "homo")
    assert len(r.records) == 2 + 2 * 2


def test_edge_comparison_records_degree_curves_and_budgetless_baseline(small):
    from privgraph.evaluate.comparison_report import comparison_objects

    r = _run(small, scope="edges", mechanisms={"dprr": {}, "nonpriv_part": {}}, target="dprr", epsilons=[1.0, 2.0])
    assert set(r.degree_curves) == {"dprr/1", "dprr/2", "nonpriv_part/1", "nonpriv_part/2"}
    # NonPriv-Part spends nothing: one set of runs serves every epsilon
    assert list(r.accuracies("nonpriv_part", 1.0)) == list(r.accuracies("nonpriv_part", 2.0))
    c = r.degree_curves["nonpriv_part/1"]
    assert all(m == 0.0 for m in c["noisy_mean"])  # no private edge released
    objs = comparison_objects("edges", r)
    assert objs["degrees.png"][:4] == b"\x89PNG"


def test_progress_counts_the_clean_baseline_and_every_cell(small):
    """``clean baseline`` k/runs, then ``comparison cells`` k/(mechanisms x epsilons x runs); a
    budgetless mechanism's reused runs count as done without work; no accuracy in an event."""
    from privgraph.evaluate.progress import ProgressEvent

    events: list[ProgressEvent] = []
    r = _run(small, scope="edges", mechanisms={"dprr": {}, "nonpriv_part": {}}, target="dprr",
             epsilons=[1.0, 2.0], progress=events.append)
    baseline = [(e.done, e.total) for e in events if e.task == "clean baseline"]
    cells = [e for e in events if e.task == "comparison cells"]
    assert baseline == [(0, 2), (1, 2), (2, 2)]
    assert [e.done for e in cells] == [0, 1, 2, 3, 4, 5, 6, 8]  # nonpriv_part at eps 2: 2 runs reused
    assert {e.total for e in cells} == {8} and cells[-1].finished and cells[-1].eta == 0.0
    assert cells[1].detail == "dprr eps=1 run 0" and "reused" in cells[-1].detail
    # inside each computed cell (6: nonpriv_part's eps 2 runs are reused): privatized, then trained
    steps = [e for e in events if e.task == "comparison cell"]
    assert [(e.done, e.total) for e in steps] == [(0, 2), (1, 2), (2, 2)] * 6
    assert steps[1].detail == "dprr eps=1 run 0: privatized" and steps[2].detail == "dprr eps=1 run 0: trained"
    accs = {f"{rec['test_acc']:.4f}" for rec in r.records}
    assert not any(a in e.line() for e in events for a in accs)


def test_edge_comparison_attacks_every_model_on_the_same_pairs(small):
    """evaluate.attacks in a comparison: each cell's model (and the clean one) attacked on one set
    of candidate pairs; the clean graph gives its edges away, NonPriv-Part (no private edge
    released) leaves LinkTeller only what the public edges show; table and plot get the columns."""
    from privgraph.evaluate.comparison_report import comparison_objects
    from privgraph.config.pipeline import EvaluateConfig

    attacks = EvaluateConfig(attacks=[{"name": "linkteller", "max_pairs": 40}, {"name": "link_stealing", "max_pairs": 40},
                                      "membership"]).attacks
    r = _run(small, scope="edges", mechanisms={"dprr": {}, "nonpriv_part": {}}, target="dprr", epsilons=[1.0, 8.0],
             attacks=attacks)
    assert r.attacks == ["linkteller", "link_stealing", "membership"]
    clean = r.attack_aucs("linkteller", "clean", None)
    part = r.attack_aucs("linkteller", "nonpriv_part", 1.0)
    assert clean.min() > 0.9 and part.max() < clean.min() - 0.1, (clean, part)
    assert r.to_dict()["records"] == _run(small, scope="edges", mechanisms={"dprr": {}, "nonpriv_part": {}}, target="dprr",
                                          epsilons=[1.0, 8.0], attacks=attacks).to_dict()["records"]  # seeded
    s = summarize(r)
    assert set(s["attacks"]) == {"linkteller", "link_stealing", "membership"}
    table = comparison_markdown("edges", r)
    assert "## linkteller: ROC-AUC" in table and "## membership: ROC-AUC" in table
    assert comparison_objects("edges", r)["utility.png"][:4] == b"\x89PNG"


class _CutOff(Exception):
    pass


def test_a_cut_off_comparison_resumes_from_its_checkpoint(small, tmp_path, monkeypatch, one_torch_thread):
    """Each finished run is checkpointed as it finishes; a run killed part-way and started again
    reads those back (progress says so, no accuracy in an event) and computes only the rest; the
    result equals an uninterrupted run's, degree curves included."""
    from privgraph.evaluate.progress import ProgressEvent
    from privgraph.storage.private_record import CellCheckpoint

    monkeypatch.delenv("PRIVGRAPH_HOME", raising=False)
    g, _ = small
    kw = dict(scope="edges", mechanisms={"dprr": {}, "nonpriv_part": {}}, target="dprr", epsilons=[1.0, 2.0])
    whole = _run(small, **kw)

    class Dying(CellCheckpoint):
        puts = 0

        def put(self, cell, value):
            if Dying.puts == 4:  # the 2 clean runs and 2 cells are on disk, then the process dies
                raise _CutOff
            super().put(cell, value)
            Dying.puts += 1

    settings = {"comparison": "c", "seed": 5}
    with pytest.raises(_CutOff):
        _run(small, checkpoint=Dying(tmp_path, "c", settings, [g]), **kw)
    resumed = CellCheckpoint(tmp_path, "c", settings, [g])
    assert len(resumed) == 4
    events: list[ProgressEvent] = []
    again = _run(small, checkpoint=resumed, progress=events.append, **kw)
    assert again.to_dict()["records"] == whole.to_dict()["records"]
    assert again.degree_curves == whole.degree_curves
    from_ck = [e.detail for e in events if "from the checkpoint" in e.detail]
    assert from_ck == ["clean graph run 0: from the checkpoint", "clean graph run 1: from the checkpoint",
                       "dprr eps=1 run 0: from the checkpoint", "dprr eps=1 run 1: from the checkpoint"]
    assert len(resumed) == 2 + 2 * 2 + 2  # nonpriv_part's eps 2 reuses eps 1's runs: not cells of their own


def test_priv_hrg_cells_get_the_declared_public_edges_as_a_reference(small, one_torch_thread):
    """privHRG privatizes the public edges too, so its release holds none; they are declared
    public all the same: its cells get the same public-edges reference model (and the validation
    choice among the public data alone, floor, public edges and GNN) as every other edge cell of the
    same run."""
    g, parts = small
    assert g.edges_public.shape[1] and g.edges_private.shape[1]
    r = _run(small, scope="edges", mechanisms={"priv_hrg": {}, "nonpriv_part": {}}, target="priv_hrg",
             epsilons=[1.0], runs=2)
    by = {(rec["mechanism"], rec["run"]): rec for rec in r.records}
    for i in range(2):
        hrg, part = by[("priv_hrg", i)], by[("nonpriv_part", i)]
        # NonPriv-Part's GNN is the same model over the same public edges, seed and labels
        assert hrg["public_edges_acc"] == part["test_acc"]
        assert hrg["feature_only_acc"] == part["feature_only_acc"]
        assert hrg["public_only_acc"] == part["public_only_acc"]  # over the declared public edges too
        assert hrg["selected"] in {"public_only", "feature_only", "public_edges", "gnn"}
