"""CellCheckpoint: a comparison's finished cells in the owner's private records (mode 0600), keyed
by an HMAC of everything they depend on, torn last lines dropped, removed with discard()."""

from __future__ import annotations

import re
import stat

import numpy as np
import pytest

from privgraph.errors import exit_code_for, one_line
from privgraph.graph import GraphData
from privgraph.storage.private_record import CellCheckpoint, owner_key_path


def _graph(private_first: bool = False) -> GraphData:
    e = np.array([[0, 1, 2, 3], [1, 2, 3, 0]])
    return GraphData.from_edges(4, e, private=np.array([private_first, False, True, True]))


def test_cells_survive_a_new_process_owner_only(tmp_path, monkeypatch):
    monkeypatch.delenv("PRIVGRAPH_HOME", raising=False)
    ck = CellCheckpoint(tmp_path, "cmp", {"seed": 11}, [_graph()])
    assert len(ck) == 0 and ck.get("a") is None and not ck.path.exists()
    ck.put("a", {"acc": np.float64(0.5), "folds": np.array([1, 2])})
    ck.put("b", {"acc": 0.25})
    assert ck.get("a") == {"acc": 0.5, "folds": [1, 2]}
    back = CellCheckpoint(tmp_path, "cmp", {"seed": 11}, [_graph()])
    assert back.path == ck.path and len(back) == 2 and back.get("b") == {"acc": 0.25}
    assert stat.S_IMODE(ck.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(ck.path.parent.stat().st_mode) == 0o700
    assert ck.path.parent == tmp_path / "checkpoints" / "cmp"
    # the name is an HMAC under the owner's key: nothing of the seed is readable from it, and
    # another owner's key gives another name for the same settings and data
    assert re.fullmatch(r"[0-9a-f]{32}\.jsonl", ck.path.name)
    monkeypatch.setenv("PRIVGRAPH_HOME", str(tmp_path / "other-owner"))
    assert CellCheckpoint(tmp_path, "cmp", {"seed": 11}, [_graph()]).path.name != ck.path.name
    monkeypatch.delenv("PRIVGRAPH_HOME")
    assert owner_key_path(tmp_path).exists()  # the key behind the file name
    back.discard()
    assert not ck.path.exists() and not ck.path.parent.exists()


@pytest.mark.parametrize(
    "settings, graph",
    [({"seed": 12}, _graph()), ({"seed": 11, "code": "other"}, _graph()), ({"seed": 11}, _graph(private_first=True))],
)
def test_other_settings_or_data_get_another_file(tmp_path, monkeypatch, settings, graph):
    monkeypatch.delenv("PRIVGRAPH_HOME", raising=False)
    ck = CellCheckpoint(tmp_path, "cmp", {"seed": 11}, [_graph()])
    ck.put("a", 1)
    other = CellCheckpoint(tmp_path, "cmp", settings, [graph])
    assert other.path != ck.path and len(other) == 0


def test_labels_are_part_of_the_key(tmp_path, monkeypatch):
    monkeypatch.delenv("PRIVGRAPH_HOME", raising=False)
    a = CellCheckpoint(tmp_path, "g", {}, [_graph()], np.array([0]))
    b = CellCheckpoint(tmp_path, "g", {}, [_graph()], np.array([1]))
    assert a.path != b.path


def test_a_torn_last_line_is_dropped_and_appending_goes_on(tmp_path, monkeypatch):
    monkeypatch.delenv("PRIVGRAPH_HOME", raising=False)
    ck = CellCheckpoint(tmp_path, "cmp", {}, [_graph()])
    ck.put("a", 1)
    with ck.path.open("a") as f:
        f.write('{"cell": "b", "val')  # the process died mid-write
    again = CellCheckpoint(tmp_path, "cmp", {}, [_graph()])
    assert len(again) == 1 and again.get("b") is None
    again.put("b", 2)
    assert CellCheckpoint(tmp_path, "cmp", {}, [_graph()]).get("b") == 2
    assert stat.S_IMODE(ck.path.stat().st_mode) == 0o600


def test_a_corrupt_complete_line_names_the_file_and_line(tmp_path, monkeypatch):
    monkeypatch.delenv("PRIVGRAPH_HOME", raising=False)
    ck = CellCheckpoint(tmp_path, "cmp", {}, [_graph()])
    ck.put("a", 1)
    with ck.path.open("a") as f:
        f.write("garbage\n")
    with pytest.raises(ValueError, match=r"\.jsonl:2: not a checkpointed cell .*delete the file") as err:
        CellCheckpoint(tmp_path, "cmp", {}, [_graph()])
    assert exit_code_for(err.value) == 2 and "\n" not in one_line(err.value)


def test_bad_name_refused(tmp_path):
    with pytest.raises(ValueError):
        CellCheckpoint(tmp_path, "../x", {}, [_graph()])
