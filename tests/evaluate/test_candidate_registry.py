"""Evaluation candidates and GNN models by registry (issue 58): a candidate or a model defined
here, in the test, with no product file changed, is picked up by the summary, the in-memory
evaluation, the report and ``fit_node_classifier``, and gone once removed."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from torch.nn import Parameter, ParameterList

from privgraph.config.evaluate import GNN_MODELS, EvaluateConfig, GNNModel, declared_models
from privgraph.evaluate.candidates import CANDIDATES, Candidate, EvaluationContext, in_tie_order, register_candidate
from privgraph.evaluate.models import MODELS, NodeGNN, register_model
from privgraph.evaluate.models.basic import DECLARED, check_generator, fresh_generator
from privgraph.evaluate.models.sparse import sparse_aware_linear
from privgraph.publish.run_report import UTILITY_ROWS, metrics_markdown
from privgraph.evaluate.selection import utility_summary
from privgraph.evaluate.training import fit_node_classifier
from privgraph.evaluate.utility import evaluate_utility
from privgraph.seeding import as_seed_sequence, partition_seeds
from tests.test_training import QUICK, two_communities


def _result(val: float, test: float, **extra):
    return {"val_acc": val, "test_acc_own_labels": test, "test_acc": test, **extra}


@pytest.fixture
def majority():
    """A candidate computed once after the runs: the majority class of the training labels."""

    class Majority(Candidate):
        """The training labels' majority class, for every node: reads the version's labels only."""

        name = "majority"
        label = "the majority class"
        raw_label = "the majority class, raw test labels"

        def after_runs(self, ctx: EvaluationContext, results):
            g = ctx.version
            top = np.bincount(g.y[g.train_mask]).argmax()
            score = {m: float(np.mean(g.y[getattr(g, m)] == top)) for m in ("val_mask", "test_mask")}
            return [_result(score["val_mask"], score["test_mask"])] * ctx.runs

    register_candidate(Majority, before="feature_only")
    yield Majority
    CANDIDATES[:] = [c for c in CANDIDATES if c.name != "majority"]


@pytest.fixture
def private_edges():
    """A trained candidate: the configured GNN over the version's private (released) edges alone."""

    class PrivateEdges(Candidate):
        name = "private_edges"
        label = "private, released edges only"
        raw_label = "the version's released edges only, raw test labels"
        detail = "private graph, released edges only"

        def training(self, version, train_kwargs):
            return {**train_kwargs, "edges": "private"}

    register_candidate(PrivateEdges)
    yield PrivateEdges
    CANDIDATES[:] = [c for c in CANDIDATES if c.name != "private_edges"]


def test_a_candidate_defined_here_is_summarised_chosen_and_reported(majority):
    assert [c.name for c in CANDIDATES].index("majority") == 1  # before the floor: it wins a tie against it
    gnn, floor = [_result(0.7, 0.8, device="cpu")] * 2, [_result(0.6, 0.6)] * 2
    results = {"gnn": gnn, "feature_only": floor, "majority": [_result(0.7, 0.5), _result(0.9, 0.5)]}
    s = utility_summary(2, results)
    assert s["majority"]["test_acc"] == [0.5, 0.5]
    assert s["selected"]["models"] == ["majority", "majority"]  # run 0: a tie with the GNN; run 1: higher
    assert "| the majority class | 0.5000 |" in metrics_markdown("p", "v1", s)
    assert ("majority", "the majority class") in list(UTILITY_ROWS)
    assert [n for n, _ in in_tie_order({"gnn": {}, "majority": {}, "bases": {}})] == ["majority", "gnn"]
    # no result in every run: no candidate
    assert "majority" not in utility_summary(2, {**results, "majority": [_result(0.9, 0.5)]})


def test_a_trained_and_a_computed_candidate_join_the_evaluation(majority, private_edges):
    g = two_communities()
    version = g.replace(edges_private=g.edges_public[:, ::2], edges_public=np.delete(g.edges_public, np.s_[::2], axis=1))
    m = evaluate_utility(version, version, runs=2, seed_sequence=3, device="cpu", **QUICK)
    assert set(m) >= {"majority", "private_edges", "private", "feature_only", "public_edges"}
    assert "majority_on_raw_labels" in m["owner_only"] and "private_edges_on_raw_labels" in m["owner_only"]
    run0 = partition_seeds(as_seed_sequence(3), 2)[0]
    alone = fit_node_classifier(version, seed=run0, edges="private", eval_y=version.y, device="cpu", **QUICK)
    assert m["private_edges"]["test_acc"][0] == alone.result["test_acc_own_labels"]  # run 0's seed, the same training


def test_removed_candidates_are_gone(majority, private_edges):
    CANDIDATES[:] = [c for c in CANDIDATES if c.name not in ("majority", "private_edges")]
    results = {"gnn": [_result(0.7, 0.8, device="cpu")], "feature_only": [_result(0.6, 0.6)],
               "majority": [_result(0.9, 0.5)], "private_edges": [_result(0.9, 0.5)]}
    s = utility_summary(1, results)
    assert "majority" not in s and "private_edges" not in s and s["selected"]["models"] == ["gnn"]
    assert "majority" not in dict(UTILITY_ROWS)
    with pytest.raises(ValueError, match="already a candidate"):
        register_candidate(type("Again", (Candidate,), {"name": "gnn"}))


@pytest.fixture
def linear_model():
    """A model defined here: one linear map per layer, no propagation (an MLP)."""

    @register_model("test_mlp")
    class MLP(NodeGNN):
        def _check_aggr(self, aggr):
            if aggr != "mean":
                raise ValueError(f"MLP: aggr must be 'mean', got {aggr!r}")
            return aggr

        def _build(self, generator):
            pairs = list(zip(self.dims[:-1], self.dims[1:]))
            self.weights = ParameterList(Parameter(torch.empty(o, i)) for i, o in pairs)
            self.biases = ParameterList(Parameter(torch.empty(o)) for _, o in pairs)
            self.reset_parameters(generator)

        def reset_parameters(self, generator=None):
            self._cache = self._x_cache = None
            w0 = self.weights[0]
            g = fresh_generator(w0.device) if generator is None else generator
            check_generator(g, w0, "MLP")
            with torch.no_grad():
                for w, b in zip(self.weights, self.biases):
                    bound = 1.0 / math.sqrt(w.shape[1])
                    torch.nn.init.uniform_(w, -bound, bound, generator=g)
                    torch.nn.init.uniform_(b, -bound, bound, generator=g)

        def propagation(self, edge_index, num_nodes):
            return None

        def layer(self, i, x, propagation, generator=None):
            return sparse_aware_linear(self, x, self.weights[i]) + self.biases[i]

    yield MLP
    del MODELS["test_mlp"]


def test_a_model_defined_here_is_trained_by_name(linear_model):
    g = two_communities()
    trained = fit_node_classifier(g, seed=0, model="test_mlp", device="cpu", epochs=40)
    assert type(trained.net) is linear_model
    assert trained.result["test_acc"] > 0.65  # the features separate the classes (chance: 0.5)
    again = fit_node_classifier(g, seed=0, model="test_mlp", device="cpu", epochs=40)
    assert again.result == trained.result  # seeded: the same parameters, the same masks
    del MODELS["test_mlp"]
    with pytest.raises(ValueError, match="model must be one of"):
        fit_node_classifier(g, seed=0, model="test_mlp", device="cpu", epochs=1)
    MODELS["test_mlp"] = linear_model  # for the fixture's teardown


def test_every_configurable_model_is_a_registered_gnn_admitting_its_aggregations():
    assert set(GNN_MODELS) <= set(MODELS)
    for name, spec in GNN_MODELS.items():
        cls = MODELS[name]
        assert issubclass(cls, NodeGNN), name
        for aggr in spec.aggrs:
            assert cls(4, 8, 2, aggr=aggr, generator=torch.Generator().manual_seed(0)).aggr == aggr
        assert EvaluateConfig(model=name, hidden=8 * spec.hidden_multiple).aggr in spec.aggrs  # aggr left out


def test_the_configuration_reads_each_models_declaration_from_its_module(tmp_path):
    """What ``evaluate.model`` admits is declared once, in the model's decorator: the configuration
    reads it from the sources without importing torch, equal to what ``register_model`` received
    at run time; a new module in the models folder is the whole declaration (read here from a
    folder holding one module written in the test)."""
    assert GNN_MODELS == {name: DECLARED[name] for name in GNN_MODELS} and set(DECLARED) == set(GNN_MODELS)
    assert "gap" in MODELS and "gap" not in GNN_MODELS  # registered by name alone: not configurable
    (tmp_path / "probe.py").write_text(textwrap.dedent('''
        import torch
        from privgraph.evaluate.models.basic import NodeGNN, register_model

        @register_model("probe", what="a probe", aggrs=("sum",), aggregates="sums", hidden_multiple=2)
        class Probe(NodeGNN):
            pass
    '''))
    assert declared_models(tmp_path) == {"probe": GNNModel("a probe", ("sum",), "sums", 2)}
    code = ("import sys; import privgraph.config.evaluate as e; "
            "print(list(e.GNN_MODELS), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split()[-1] == "False"  # the configuration loads no torch
