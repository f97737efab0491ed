"""Ensembles of an evaluation's models (issue 26): the mean prediction of several trainings."""

import numpy as np
import pytest

from privgraph.config.pipeline import ComparisonConfig, EvaluateConfig, PipelineConfig
from privgraph.seeding import as_seed_sequence
from privgraph.evaluate.training import fit_ensemble, fit_node_classifier, member_seeds, split_accuracies
from privgraph.evaluate.utility import evaluate_utility
from tests.test_training import QUICK, two_communities

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")


@pytest.fixture(scope="module")
def graph():
    return two_communities(signal=0.3, seed=3)


def test_member_seeds_start_with_the_seed_and_differ():
    seeds = member_seeds(5, 4)
    assert seeds[0].entropy == 5 and seeds[0].spawn_key == ()
    states = {tuple(s.generate_state(2)) for s in seeds}
    assert len(states) == 4  # four distinct members
    # the same seed, the same members (a retry redraws nothing)
    assert [tuple(s.generate_state(2)) for s in member_seeds(5, 4)] == [tuple(s.generate_state(2)) for s in seeds]
    child = as_seed_sequence(5).spawn(1)[0]  # never a member of another run's seed
    assert tuple(child.generate_state(2)) not in states


def test_one_member_is_exactly_the_single_model(graph):
    single = fit_node_classifier(graph, seed=7, **QUICK)
    result, post = fit_ensemble(graph, seed=7, members=1, **QUICK)
    assert result == single.result and np.array_equal(post, single.posteriors)


def test_members_average_their_posteriors_and_are_scored_on_the_mean(graph):
    eval_y = 1 - graph.y  # flipped "raw" labels: test_acc must be scored against them
    result, post = fit_ensemble(graph, seed=7, members=3, eval_y=eval_y, **QUICK)
    members = [fit_node_classifier(graph, seed=s, eval_y=eval_y, **QUICK) for s in member_seeds(7, 3)]
    mean = np.mean([m.posteriors.astype(np.float64) for m in members], axis=0)
    assert np.allclose(post, mean, atol=1e-6)
    assert not np.allclose(members[0].posteriors, members[1].posteriors)  # the members differ
    acc = split_accuracies(graph, mean.argmax(1), eval_y)
    assert {k: result[k] for k in acc} == acc and result["ensemble"] == 3
    assert result["test_acc"] == pytest.approx(1 - result["test_acc_own_labels"])
    assert result["best_epoch"] == members[0].result["best_epoch"]  # member 0's training record


def test_split_accuracies_match_the_trained_model(graph):
    m = fit_node_classifier(graph, seed=1, **QUICK)
    acc = split_accuracies(graph, m.posteriors.argmax(1))
    assert all(acc[k] == pytest.approx(m.result[k]) for k in acc)


def test_the_kprop_search_runs_once_and_the_members_use_its_choice(graph, monkeypatch):
    import privgraph.evaluate.training as training

    calls = []
    real = training.fit_node_classifier

    def spy(g, **kw):
        calls.append((kw.get("kprop_search"), kw.get("kprop_features"), kw.get("kprop_labels")))
        return real(g, **kw)

    monkeypatch.setattr(training, "fit_node_classifier", spy)
    result, _ = fit_ensemble(graph, seed=2, members=3, kprop_search=[0, 2], **QUICK)
    kx, ky = result["kprop"]
    searches = [c for c in calls if c[0] is not None]
    assert searches == [([0, 2], None, None)]  # one search (its 4 cells and the chosen one: 5 trainings)
    assert len(calls) == 1 + 5 + 2 and calls[-2:] == [(None, kx, ky), (None, kx, ky)]


def test_evaluate_utility_reports_the_ensemble(graph):
    out = evaluate_utility(graph, graph, runs=2, seed_sequence=0, ensemble=2, **QUICK)
    assert out["ensemble"] == 2
    single = evaluate_utility(graph, None, runs=2, seed_sequence=0, **QUICK)
    assert "ensemble" not in single
    with pytest.raises(ValueError, match="ensemble"):
        evaluate_utility(graph, None, runs=1, seed_sequence=0, ensemble=0, **QUICK)


def test_config_ensemble_for_runs_not_comparisons():
    assert EvaluateConfig().ensemble == 1 and EvaluateConfig(ensemble=5).ensemble == 5
    with pytest.raises(ValueError, match="ensemble"):
        EvaluateConfig(ensemble=0)
    pipe = PipelineConfig.model_validate({"dataset": {"name": "sbm"}, "edges": {"mechanism": "dprr", "epsilon": 1.0},
                                          "evaluate": {"ensemble": 5}})
    comp = {"pipeline": "p", "scope": "edges", "target": "dprr", "mechanisms": {"dprr": {}}, "epsilons": [1.0]}
    assert ComparisonConfig.model_validate(comp).evaluate_settings(pipe).ensemble == 1  # one model per cell
    with pytest.raises(ValueError, match="a comparison trains one model per cell"):
        ComparisonConfig.model_validate({**comp, "evaluate": {"ensemble": 3}})
