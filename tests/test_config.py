"""pipelines.yaml validation: every fault is one line that starts with its YAML path."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from privgraph.config.disclosure import disclosure_of
from privgraph.config.loader import load_config, parse_config
from privgraph.errors import ConfigError
from privgraph.validate.preflight import check_budget

REPO = Path(__file__).resolve().parents[1]

BASE = {
    "pipelines": {
        "cora": {
            "dataset": {"name": "cora", "rho": 0.2},
            "features": {"mechanism": "feature_rr", "epsilon": 1.0, "bins": 2},
            "edges": {"mechanism": "dprr", "epsilon": 1.0},
            "budget": {"features": 1.0, "edges": 2.0},
        }
    }
}


def _with(path: str, value, delete: bool = False) -> dict:
    d = copy.deepcopy(BASE)
    node = d
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[k]
    if delete:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return d


def _error(data) -> str:
    with pytest.raises(ConfigError) as ei:
        parse_config(data)
    msg = str(ei.value)
    assert "\n" not in msg
    return msg


def test_repo_pipelines_yaml_is_valid():
    cfg = load_config(REPO / "pipelines.yaml")
    cora = cfg.get("cora")
    assert cora.features.mechanism == "piecewise" and cora.features.epsilon == 1.0
    assert cora.evaluate.kprop_features == 32  # docs/results.md, "What a release is worth"
    assert cora.edges.mechanism == "dprr" and cora.edges.epsilon == 1.0
    assert cora.dataset.rho == 0.2
    assert cora.budget == {"features": 1.0, "edges": 2.0}  # edge-level DP: 2 x DPRR's per-node eps
    for name in cfg.pipelines:
        disclosure_of(cfg, name)  # every shipped pipeline declares what is public without conflict
        check_budget(cfg.get(name))  # and its mechanisms fit its caps before any data is read


def test_a_budget_cap_of_exactly_twice_the_per_node_epsilon_is_met():
    """An edge-LDP mechanism that both endpoints spend on (DPRR, Warner RR, Blink) charges the
    ledger 2 eps exactly: a cap of 2 eps passes the checkpoint (Blink's eps_d + eps_a once
    summed, rounded up, to just above 2 eps and failed cora-blink's cap of 8 before the run)."""
    base = {"dataset": {"name": "cora", "rho": 0.2}}
    for mech, eps in (("blink", 4.0), ("blink", 0.3), ("dprr", 1.0), ("warner_rr", 0.7)):
        cfg = parse_config({"pipelines": {"p": {**base, "edges": {"mechanism": mech, "epsilon": eps},
                                                "budget": {"edges": 2 * eps}}}})
        check_budget(cfg.get("p"))


def test_valid_base():
    cfg = parse_config(BASE)
    assert cfg.get("cora").features.params() == {"epsilon": 1.0, "bins": 2}


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), float("-inf"), True, "1"])
def test_bad_epsilon_names_its_path(bad):
    msg = _error(_with("pipelines.cora.features.epsilon", bad))
    assert msg.startswith("pipelines.cora.features.epsilon:"), msg


def test_yaml_nan_and_inf_are_refused(tmp_path):
    for literal in (".nan", ".inf", "-1", "0"):
        text = yaml.safe_dump(BASE).replace("epsilon: 1.0", f"epsilon: {literal}", 1)
        p = tmp_path / "p.yaml"
        p.write_text(text)
        with pytest.raises(ConfigError, match=r"^pipelines\.cora\.(features|edges)\.epsilon: "):
            load_config(p)


def test_unknown_key():
    msg = _error(_with("pipelines.cora.colour", "blue"))
    assert msg.startswith("pipelines.cora.colour: unknown key"), msg
    msg = _error(_with("pipelines.cora.dataset.rhoo", 0.1))
    assert msg.startswith("pipelines.cora.dataset.rhoo: unknown key"), msg


def test_unknown_mechanism_param_is_refused_with_its_path():
    msg = _error(_with("pipelines.cora.features.binz", 3))
    assert msg.startswith("pipelines.cora.features:") and "binz" in msg, msg


def test_unknown_mechanism():
    msg = _error(_with("pipelines.cora.features.mechanism", "feature_rrr"))
    assert msg.startswith("pipelines.cora.features.mechanism: unknown mechanism 'feature_rrr'"), msg
    assert "feature_rr" in msg


def test_mechanism_in_wrong_scope():
    msg = _error(_with("pipelines.cora.features.mechanism", "dprr"))
    assert msg.startswith("pipelines.cora.features.mechanism:") and "edges" in msg, msg


def test_missing_dataset():
    msg = _error(_with("pipelines.cora.dataset", None, delete=True))
    assert msg.startswith("pipelines.cora.dataset: required key is missing"), msg


def test_unknown_dataset():
    msg = _error(_with("pipelines.cora.dataset.name", "coraa"))
    assert msg.startswith("pipelines.cora.dataset.name:") and "unknown dataset" in msg, msg


def test_bad_rho_and_budget_cap():
    assert _error(_with("pipelines.cora.dataset.rho", 1.5)).startswith("pipelines.cora.dataset.rho:")
    assert _error(_with("pipelines.cora.budget.edges", float("nan"))).startswith("pipelines.cora.budget")
    assert _error(_with("pipelines.cora.budget.nodes", 1.0)).startswith("pipelines.cora.budget.nodes")


def test_unknown_pipeline_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"^pipelines\.nope: no such pipeline; defined: cora"):
        parse_config(BASE).get("nope")
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("pipelines: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_labels_scope():
    data = _with("pipelines.cora.labels", {"mechanism": "label_rr", "epsilon": 1.0, "num_classes": 7})
    assert parse_config(data).get("cora").labels.params() == {"epsilon": 1.0, "num_classes": 7}
    msg = _error(_with("pipelines.cora.labels", {"mechanism": "feature_rr", "epsilon": 1.0}))
    assert msg.startswith("pipelines.cora.labels.mechanism:") and "features" in msg, msg


# -- the one declaration of what is public (issue 9, leak 2) ---------------------------------------
SCORES = {"gamma": 1.0, "public_nodes": {"rule": "train_mask"}}
LABELS = {"mechanism": "label_rr", "epsilon": 1.0, "num_classes": 7, "mask": ["train_mask", "val_mask"]}


def _heterorr(**over) -> dict:
    d = copy.deepcopy(BASE)
    d["pipelines"]["cora"].update({"scores": copy.deepcopy(SCORES), "labels": copy.deepcopy(LABELS),
                                  "budget": {"features": 1.0, "edges": 2.0, "labels": 1.0}})
    d["pipelines"]["cora"].update(over)
    return d


def test_scores_reading_labels_that_labels_privatizes_is_refused_naming_both_paths():
    """The configuration of leak 2: LabelRR on train+val labels and SHAP on the raw training
    labels. Accepted before the fix (theta, published, moved with one training label)."""
    msg = _error(_heterorr())
    assert msg.startswith("pipelines.cora.scores.public_nodes.rule:"), msg
    assert "pipelines.cora.labels.mask" in msg and "charge_epsilon" in msg, msg


def test_the_same_conflict_through_the_cli_exits_2_in_one_line(tmp_path):
    import subprocess
    import sys

    p = tmp_path / "pipelines.yaml"
    p.write_text(yaml.safe_dump(_heterorr()))
    r = subprocess.run([sys.executable, "-m", "privgraph.cli", "run", "cora", "--config", str(p)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "pipelines.cora.labels.mask" in lines[0] and "Traceback" not in r.stderr


def test_consistent_declarations_are_accepted():
    # charged: the scores randomize the private labels and the charge is in the ledger
    charged = _heterorr()
    charged["pipelines"]["cora"]["scores"]["public_nodes"]["charge_epsilon"] = 0.5
    parse_config(charged)
    # the labels mechanism leaves the training labels public
    val_only = _heterorr(labels={**LABELS, "mask": ["val_mask"]})
    d = disclosure_of(parse_config(val_only), "cora")
    assert d.manifest_section()["labels_outside_mask"]["declared_by"] == "pipelines.cora.labels.mask"
    # rule random draws outside the private masks
    rnd = _heterorr(scores={"gamma": 1.0, "public_nodes": {"rule": "random", "fraction": 0.1}})
    parse_config(rnd)


@pytest.mark.parametrize(
    ("over", "paths"),
    [
        ({"labels": {**LABELS, "mask": None}}, ("scores.public_nodes.rule", "labels")),  # every label private
        ({"scores": {"gamma": 1.0, "public_nodes": {"rule": "random", "fraction": 0.1}},
          "labels": {"mechanism": "label_rr", "epsilon": 1.0, "num_classes": 7}}, ("scores.public_nodes.rule", "labels")),
        ({"scores": {"gamma": 1.0, "public_nodes": {"rule": "all", "all_features_public": True}}},
         ("scores.public_nodes.all_features_public", "features.mechanism")),
    ],
)
def test_other_conflicts_are_refused(over, paths):
    data = _heterorr(**over)
    if data["pipelines"]["cora"]["labels"].get("mask", "x") is None:
        del data["pipelines"]["cora"]["labels"]["mask"]
    msg = _error(data)
    for p in paths:
        assert f"pipelines.cora.{p}" in msg, msg


def test_private_edges_need_an_edge_mechanism():
    """cora-lpgnn shipped with rho 0.2 and no edge mechanism: its raw private edges were stored."""
    msg = _error(_with("pipelines.cora.edges", None, delete=True))
    assert msg.startswith("pipelines.cora.dataset.rho:") and "pipelines.cora.edges" in msg, msg
    no_rho = _with("pipelines.cora.edges", None, delete=True)
    no_rho["pipelines"]["cora"]["dataset"]["rho"] = 0.0
    no_rho["pipelines"]["cora"]["budget"] = {"features": 1.0}
    d = disclosure_of(parse_config(no_rho), "cora")
    assert "private_nodes" not in d.manifest_section() and d.private_scopes() == ("features",)


def test_attacks_take_names_or_mappings_and_refuse_mistakes_with_their_path():
    from typing import get_args

    from privgraph.evaluate.attacks.link_stealing import DISTANCES
    from privgraph.config.evaluate import LinkStealingAttack

    ev = parse_config(_with("pipelines.cora.evaluate", {"attacks": ["linkteller", {"name": "membership", "signal": "entropy"}]}))
    attacks = ev.get("cora").evaluate.attacks
    assert [(a.name, getattr(a, "max_pairs", None)) for a in attacks] == [("linkteller", 500), ("membership", None)]
    assert attacks[1].signal == "entropy"
    assert get_args(LinkStealingAttack.model_fields["metric"].annotation) == DISTANCES  # one list of distances
    for attacks, says in (
        (["attribute_v2"], "pipelines.cora.evaluate.attacks.0"),
        (["linkteller", "linkteller"], "listed twice"),
        ([{"name": "linkteller", "max_pairs": True}], "pipelines.cora.evaluate.attacks.0.linkteller.max_pairs"),
        ([{"name": "link_stealing", "metric": "jaccard"}], "pipelines.cora.evaluate.attacks.0.link_stealing.metric"),
        ([{"name": "membership", "rounds": 3}], "rounds"),
    ):
        msg = _error(_with("pipelines.cora.evaluate", {"attacks": attacks}))
        assert says in msg, msg


def test_a_comparison_attacks_models_only():
    """``attribute`` attacks a release: refused in a comparison's own evaluate (with its path),
    left out of the pipeline's evaluate that a comparison inherits."""
    d = _with("pipelines.cora.evaluate", {"attacks": ["linkteller", "attribute"]})
    d["comparisons"] = {"edges": {"pipeline": "cora", "scope": "edges", "target": "dprr",
                                  "mechanisms": {"dprr": {}, "warner_rr": {}}, "epsilons": [1.0]}}
    cfg = parse_config(d)
    inherited = cfg.comparison("edges").evaluate_settings(cfg.get("cora"))
    assert [a.name for a in inherited.attacks] == ["linkteller"]
    assert [a.name for a in cfg.get("cora").evaluate.attacks] == ["linkteller", "attribute"]  # the pipeline keeps it
    d["comparisons"]["edges"]["evaluate"] = {"attacks": ["attribute"]}
    msg = _error(d)
    assert "comparisons.edges" in msg and "'attribute' attacks a release" in msg, msg


def test_a_key_given_twice_is_refused_naming_both_lines(tmp_path):
    """PyYAML keeps the last of two equal keys silently: a pipeline defined twice ran its second
    definition (issue 27: one published at epsilon 8). Refused, at the second line, naming the
    first; a merge key (<<) may still be overridden."""
    base = BASE["pipelines"]["cora"]
    one = yaml.safe_dump({"cora": base}, sort_keys=False)
    other = yaml.safe_dump({"cora": {**base, "features": {**base["features"], "epsilon": 8.0}}}, sort_keys=False)
    p = tmp_path / "twice.yaml"
    p.write_text("pipelines:\n" + "".join("  " + line + "\n" for line in (one + other).splitlines()))
    second = 2 + len(one.splitlines())
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    msg = str(ei.value)
    assert msg == f"{p} line {second}: not valid YAML (duplicate key 'cora', first at line 2)", msg
    nested = tmp_path / "nested.yaml"
    text = yaml.safe_dump(BASE, sort_keys=False)
    assert "      epsilon: 1.0\n" in text  # pipelines.cora.features.epsilon
    nested.write_text(text.replace("      epsilon: 1.0\n", "      epsilon: 1.0\n      epsilon: 8.0\n", 1))
    with pytest.raises(ConfigError, match=r"line 9: not valid YAML \(duplicate key 'epsilon', first at line 8\)"):
        load_config(nested)
    from privgraph.config.loader import _UniqueKeyLoader

    merge = "x: &d {a: 1, b: 2}\ny:\n  <<: *d\n  a: 3\n"
    assert yaml.load(merge, Loader=_UniqueKeyLoader) == {"x": {"a": 1, "b": 2}, "y": {"a": 3, "b": 2}}


@pytest.mark.parametrize(("address", "cleartext_remote"), [
    (None, False), ("tcp://127.0.0.1:8786", False), ("127.0.0.1:8786", False), ("tcp://127.4.5.6:1", False),
    ("tcp://localhost:8786", False), ("tcp://[::1]:8786", False), ("tls://scheduler:8786", False),
    ("tls://10.0.0.5:8786", False), ("tcp://scheduler:8786", True), ("scheduler:8786", True),
    ("tcp://10.0.0.5:8786", True), ("tcp://[fe80::1]:8786", True), ("tcp://dask-scheduler:8786", True),
])
def test_a_cleartext_link_to_another_machine_is_recognised(address, cleartext_remote):
    """dask.address: tcp:// (or no scheme) to a host that is not loopback is what the run warns
    about (docs/production.md: a remote cluster requires tls://); the address is accepted either way."""
    from privgraph.config.pipeline import DaskConfig
    from privgraph.config.pipeline import cleartext_remote as check

    assert DaskConfig(address=address).address == address
    assert check(address) is cleartext_remote
