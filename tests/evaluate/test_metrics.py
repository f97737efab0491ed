"""Whether a graph can be evaluated (privgraph.evaluate.metrics.check_evaluable): one line naming
what is missing and, when the dataset's options made the node split, those options as its cause."""

from __future__ import annotations

import numpy as np
import pytest

from privgraph.errors import GraphValidationError
from privgraph.evaluate.metrics import check_evaluable, evaluation_problem
from privgraph.ingest.datasets import load_dataset


@pytest.fixture
def root(tmp_path):
    n = 30
    (tmp_path / "edges.csv").write_text("src,dst\n" + "".join(f"{i},{(i + 1) % n}\n" for i in range(n)))
    np.save(tmp_path / "x.npy", np.random.default_rng(0).random((n, 4)))
    np.save(tmp_path / "y.npy", np.arange(n) % 3)
    return tmp_path


def _refusal(root, **options) -> str:
    graph = load_dataset("generic", root=root, edges="edges.csv", features="x.npy", **options)
    with pytest.raises(GraphValidationError) as exc:
        check_evaluable(graph, "generic", options)
    assert "\n" not in str(exc.value) and str(exc.value).endswith("or run with --no-evaluate")
    return str(exc.value)


@pytest.mark.parametrize(("options", "says"), [
    # issue 57 (7): the options' split leaves a part empty: they are the cause, and the way out
    ({"labels": "y.npy", "train": 0.9, "val": 0.01},
     "has an empty val_mask in the node split that dataset.options.train and dataset.options.val made: evaluation "
     "needs labels and a train/val/test split; change dataset.options.train and dataset.options.val"),
    ({"labels": "y.npy", "val": 0.01}, "in the node split that dataset.options.val made"),
    # a split but no labels: the options split the nodes; no split is what to add
    ({"train": 0.5, "val": 0.25}, "has no labels (y) (dataset.options.train and dataset.options.val split the "
                                  "nodes; there is nothing to train on): evaluation needs labels and a train/val/test "
                                  "split; give the dataset labels"),
    # no split, no options: add one (as before)
    ({"labels": "y.npy"}, "has no train_mask, val_mask, test_mask: evaluation needs labels and a train/val/test "
                          "split; add a split (e.g. dataset.options: {train: 0.5, val: 0.25}"),
])
def test_a_refusal_names_the_options_that_made_the_split(root, options, says):
    assert says in _refusal(root, **options)


def test_the_same_problem_without_the_options_is_not_blamed_on_them(root):
    graph = load_dataset("generic", root=root, edges="edges.csv", features="x.npy", labels="y.npy", train=0.9, val=0.01)
    assert evaluation_problem(graph, "generic") == ("dataset 'generic' has an empty val_mask: evaluation needs labels "
                                                    "and a train/val/test split")
