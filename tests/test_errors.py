"""``data_refusal``: a refusal of the user's data says where and which rule, never a value; the values
become the private detail that the owner's refusal record keeps."""

from __future__ import annotations

import json

import numpy as np

from privgraph.errors import DETAIL_LIMIT, PRIVATE_VALUES_NOTE, GraphValidationError, data_refusal, exit_code_for
from privgraph.storage.private_record import private_refusals_dir, write_private_refusal


def test_the_message_names_the_place_and_the_detail_keeps_the_values(tmp_path):
    labels = np.arange(DETAIL_LIMIT + 5, dtype=np.int64) + 1_000_000
    exc = data_refusal("labels.csv: lines [3]: class ids of 1000 or more", rows=np.arange(labels.size), labels=labels,
                       edge=[np.int64(987654), np.int64(876543)], first=np.float32(2.5))
    assert isinstance(exc, GraphValidationError) and exit_code_for(exc) == 2
    assert str(exc) == f"labels.csv: lines [3]: class ids of 1000 or more ({PRIVATE_VALUES_NOTE})"
    assert "1000000" not in str(exc)
    assert exc.private_detail["labels"] == labels[:DETAIL_LIMIT].tolist()  # plain ints, the first DETAIL_LIMIT
    assert exc.private_detail["edge"] == [987654, 876543] and exc.private_detail["first"] == 2.5
    path = write_private_refusal(tmp_path, "p", exc)  # JSON as it is written for the owner
    assert path.parent == private_refusals_dir(tmp_path, "p")
    assert json.loads(path.read_text())["detail"]["edge"] == [987654, 876543]


def test_without_values_there_is_no_detail():
    assert data_refusal("x.csv: line 2: a rule").private_detail is None
