"""The attack stage of an evaluation: every configured attack, on the clean and the private model.

Three GNNs, same split and seed, so that they differ only in the data: one on the raw graph
(``clean``: the attack's strength), one on the raw graph without its private edges
(``without_private_edges``: what an attack still finds from the features and the public edges,
the best any edge mechanism can reach), one on the private version (``private``: what the version
leaves; with the pipeline's denoising options, as for utility). The same candidate pairs (drawn
once from the raw graph's private edges) are scored for all three. Ground truth is raw data, so
everything returned is PRIVATE evaluation (the owner's record).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from privgraph.evaluate.attacks.attribute import attribute_inference
from privgraph.evaluate.attacks.link_stealing import link_stealing_supervised, link_stealing_unsupervised, pair_distances
from privgraph.evaluate.attacks.linkteller import linkteller, linkteller_scores
from privgraph.evaluate.attacks.membership import membership_inference, membership_scores, membership_shadow, shadow_split
from privgraph.evaluate.attacks.pairs import PairSample, private_edge_pairs, public_edge_pairs
from privgraph.evaluate.attacks.scoring import roc_auc
from privgraph.errors import ConfigError, GraphValidationError
from privgraph.graph import GraphData
from privgraph.evaluate.progress import ProgressCallback, ProgressTracker
from privgraph.seeding import as_seed_sequence
from privgraph.evaluate.training import DENOISING_OPTIONS, fit_node_classifier

__all__ = ["AttackProbe", "run_attacks"]

NOTE = ("PRIVATE: attack scores against the raw graph (ground truth), covered by no guarantee; "
        "clean = a model trained on the raw graph (the attack's strength), without_private_edges = on the raw "
        "graph minus its private edges (the floor an edge mechanism can reach), private = on the version")
#: the models attacked: (row, which graph, which of its edges)
ROWS = (("clean", "clean", "all"), ("without_private_edges", "clean", "public"), ("private", "private", "all"))


def run_attacks(
    private: GraphData,
    clean: GraphData,
    attacks: Sequence[Any],
    *,
    seed_sequence: np.random.SeedSequence | int,
    progress: ProgressCallback | None = None,
    feature_mechanism: Any | None = None,
    public_feature_rows: np.ndarray | None = None,
    **train_kwargs: Any,
) -> dict[str, Any]:
    """Run ``attacks`` (``evaluate.attacks`` entries of :mod:`privgraph.config.pipeline`) on both models.

    Returns ``{"note", "models": {row: {test_acc, train_acc, device}}, row: {attack: AttackResult
    dict}}`` for each row of :data:`ROWS`. An attack that cannot run on this graph (no private
    edges, no public edges for the supervised variant) is reported with ``skipped`` and why.
    ``attribute`` needs no model: it is scored once, in the ``private`` row, from the released
    features, ``feature_mechanism`` (the one that made them, rebuilt from its public parameters)
    and ``public_feature_rows``.

    Raises:
        GraphValidationError: the graphs have no split (membership and training need one).
    """
    if not attacks:
        return {}
    ss = as_seed_sequence(seed_sequence)
    train_seed, pair_seed, score_seed, attribute_seed, shadow_seed = ss.spawn(5)
    samples = _pair_samples(clean, attacks, pair_seed)
    # progress in PUBLIC units only: the number of LinkTeller's query nodes is drawn from the raw
    # private edges, and progress lines reach Prefect's logs (issue 24, leak 2)
    ticks = QUERY_TICKS if any(a.name == "linkteller" for a in attacks) else 0
    tracker = ProgressTracker("attacks", len(ROWS) * (len(attacks) + ticks), progress)
    out: dict[str, Any] = {"note": NOTE, "models": {}}
    for which, source, edges in ROWS:
        graph = private if source == "private" else clean
        kwargs = train_kwargs if which == "private" else {k: v for k, v in train_kwargs.items() if k not in DENOISING_OPTIONS}
        model = fit_node_classifier(graph, seed=train_seed, edges=edges, **kwargs)
        out["models"][which] = {k: model.result[k] for k in ("test_acc", "train_acc", "device")}
        post = model.query()
        rng = np.random.default_rng(score_seed)  # the same bootstrap draws for both rows
        results: dict[str, Any] = {}
        for a in attacks:
            sample = samples.get(a.name)
            if a.name == "attribute":
                if which == "private":
                    results[a.name] = _attribute(private, clean, a, feature_mechanism, public_feature_rows, attribute_seed)
            elif a.name == "linkteller":
                queries = PublicTicks(tracker, f"linkteller queries, {which} model")
                results[a.name] = ({"skipped": sample} if isinstance(sample, str) else
                                   linkteller(model, sample, rng, delta=a.delta, progress=queries).to_dict())
                queries.finish()
            elif isinstance(sample, str):
                results[a.name] = {"skipped": sample}
            elif a.name == "link_stealing":
                results.update(_link_stealing(a, post, sample, clean, pair_seed, rng))
            elif a.name == "membership":
                labels = clean.y if a.signal == "true_label" else None
                results[a.name] = membership_inference(post, graph.train_mask, graph.test_mask, rng,
                                                       signal=a.signal, labels=labels).to_dict()
                if a.shadow:
                    results["membership_shadow"] = _membership_shadow(graph, edges, post, shadow_seed, rng, kwargs, labels)
            else:  # the configuration admits no other name
                raise ValueError(f"unknown attack {a.name!r}")
            tracker.advance(detail=f"{a.name}, {which} model")
        out[which] = results
    return out


def _pair_samples(clean: GraphData, attacks: Sequence[Any], pair_seed: np.random.SeedSequence) -> dict[str, PairSample | str]:
    """The candidate pairs of each edge attack (``linkteller``, ``link_stealing``), each drawn from
    ``clean``'s private edges with a generator of ``pair_seed`` (the same pairs for every model),
    or why there are none (the attack is then reported as skipped)."""
    samples: dict[str, PairSample | str] = {}
    for a in attacks:
        if a.name not in ("linkteller", "link_stealing"):
            continue
        try:
            samples[a.name] = private_edge_pairs(clean, np.random.default_rng(pair_seed), max_positive=a.max_pairs)
        except GraphValidationError as exc:
            samples[a.name] = str(exc)
    return samples


def _link_stealing(
    a: Any, post: Any, sample: PairSample, clean: GraphData, pair_seed: np.random.SeedSequence, rng: np.random.Generator,
) -> dict[str, Any]:
    """Link stealing on one model's posteriors ``post``: the unsupervised attack, and with
    ``a.supervised`` the attack trained on shadow pairs of ``clean``'s PUBLIC edges."""
    out = {a.name: link_stealing_unsupervised(post, sample, rng, metric=a.metric).to_dict()}
    if a.supervised:
        try:
            shadow = public_edge_pairs(clean, np.random.default_rng(pair_seed), max_positive=a.max_pairs)
        except GraphValidationError as exc:
            out["link_stealing_supervised"] = {"skipped": f"no shadow pairs: {exc}"}
        else:
            out["link_stealing_supervised"] = link_stealing_supervised(post, sample, post, shadow, rng).to_dict()
    return out


def _membership_shadow(
    graph: GraphData, edges: str, post: Any, seed: np.random.SeedSequence, rng: np.random.Generator,
    train_kwargs: dict[str, Any], labels: np.ndarray | None,
) -> dict[str, Any]:
    """The shadow-model attack on one row's model: the adversary's model, same architecture and
    graph, trained on its own split of the nodes outside the target's (its labels: the row's);
    ``labels`` (the target nodes' true labels, for the ``true_label`` signal) add the true
    label's posterior to the attack's features."""
    split_seed, fit_seed = seed.spawn(2)
    if graph.y is None or graph.y.ndim != 1:
        return {"skipped": "the shadow model needs single-label node labels"}
    try:
        s_tr, s_val, s_out = shadow_split(graph.train_mask, graph.test_mask, graph.y >= 0,
                                          np.random.default_rng(split_seed), val_size=int(graph.val_mask.sum()))
    except GraphValidationError as exc:
        return {"skipped": str(exc)}
    shadow = fit_node_classifier(graph.replace(train_mask=s_tr, val_mask=s_val, test_mask=s_out),
                                 seed=fit_seed, edges=edges, **train_kwargs)
    out = membership_shadow(post, graph.train_mask, graph.test_mask, shadow.query(), s_tr, s_out, rng, labels=labels,
                            shadow_labels=None if labels is None else graph.y).to_dict()
    out["shadow_model"] = {k: shadow.result[k] for k in ("test_acc", "train_acc")}
    return out


#: the steps in which a loop of private length (LinkTeller's queries) reports its progress
QUERY_TICKS = 20


class PublicTicks:
    """A ``progress(k, N)`` that advances ``tracker`` by exactly :data:`QUERY_TICKS` steps over a
    loop of any length ``N`` (:meth:`finish` completes them, also for a loop that never ran): the
    events (their number, ``done`` and ``total``) are the same whatever ``N``, which is a count of
    private data, so a progress line publishes nothing of it."""

    def __init__(self, tracker: ProgressTracker, detail: str) -> None:
        self.tracker, self.detail, self.done = tracker, detail, 0

    def __call__(self, k: int, n: int) -> None:
        target = QUERY_TICKS * k // n if n > 0 else QUERY_TICKS
        while self.done < min(target, QUERY_TICKS):
            self.tracker.advance(detail=self.detail)
            self.done += 1

    def finish(self) -> None:
        self(1, 1)


class AttackProbe:
    """The configured attacks as one AUC each, for many models on one raw graph (a comparison's
    cells): the candidate pairs are drawn once, so every model is attacked on the same pairs; no
    bootstrap (the spread comes from the comparison's runs). Scored against ``raw``: private
    evaluation."""

    def __init__(self, raw: GraphData, attacks: Sequence[Any], seed_sequence: np.random.SeedSequence | int) -> None:
        self.raw = raw
        self.attacks = list(attacks)
        if any(a.name == "attribute" for a in self.attacks):
            raise ConfigError("evaluate.attacks: 'attribute' attacks a release, not a model; a comparison does not run it "
                              "(use it in a pipeline's evaluate)")
        self.samples: dict[str, PairSample] = {}
        rng_seed = as_seed_sequence(seed_sequence)
        for a in self.attacks:
            if a.name in ("linkteller", "link_stealing"):
                # refused here, before any cell runs: a comparison without private edges has no edge attack
                self.samples[a.name] = private_edge_pairs(raw, np.random.default_rng(rng_seed), max_positive=a.max_pairs)

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.attacks]

    def aucs(self, model: Any) -> dict[str, float]:
        """ROC-AUC of each attack on ``model`` (a :class:`~privgraph.evaluate.training.TrainedClassifier`)."""
        out: dict[str, float] = {}
        post = model.query() if any(a.name != "linkteller" for a in self.attacks) else None
        for a in self.attacks:
            if a.name == "linkteller":
                s = self.samples[a.name]
                out[a.name] = roc_auc(linkteller_scores(model, s.pairs, delta=a.delta), s.labels)
            elif a.name == "link_stealing":
                s = self.samples[a.name]
                out[a.name] = roc_auc(-pair_distances(post, s.pairs, a.metric), s.labels)
            elif a.name == "membership":
                tr, te = self.raw.train_mask, self.raw.test_mask
                if tr is None or te is None:
                    raise GraphValidationError("membership inference: needs training and test nodes (the graph has no split)")
                idx = np.concatenate([np.flatnonzero(tr), np.flatnonzero(te)])
                member = np.concatenate([np.ones(int(tr.sum()), bool), np.zeros(int(te.sum()), bool)])
                labels = self.raw.y if a.signal == "true_label" else None
                out[a.name] = roc_auc(membership_scores(post, a.signal, labels)[idx], member)
            else:
                raise ValueError(f"unknown attack {a.name!r}")
        return out


def _attribute(
    private: GraphData, clean: GraphData, a: Any, mechanism: Any | None, public_rows: np.ndarray | None,
    seed: np.random.SeedSequence,
) -> dict[str, Any]:
    if mechanism is None or public_rows is None:
        return {"skipped": "no feature mechanism made this version's features"}
    if private.x is None or clean.x is None or private.x.shape != clean.x.shape:
        return {"skipped": "the released features do not match the raw ones in shape"}
    try:
        return attribute_inference(clean, private.x, public_rows, mechanism.privatize_rows, np.random.default_rng(seed),
                                   ridge=a.ridge, max_train_rows=a.max_train_rows).to_dict()
    except GraphValidationError as exc:
        return {"skipped": str(exc)}
