"""``benchmarks/release_value.py --library`` runs the budget checkpoint before reading any data, as
``privgraph run`` does: a configuration over its cap exits with the checkpoint's line, with a data
root that holds no dataset (so nothing was read)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_library_path_refuses_a_budget_over_its_cap_before_reading_data(tmp_path: Path) -> None:
    env = {**os.environ, "PRIVGRAPH_DATA_ROOT": str(tmp_path)}  # empty: any read would fail otherwise
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "release_value.py"), "cora", "--library", "--repeats", "1",
         "--set", "edges.mechanism=blink", "--set", "edges.epsilon=4", "--set", "edges.alpha=null",
         "--set", "budget.edges=7.9"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last == ("cora: validation checkpoint failed before reading any data (the configured mechanisms): "
                    "scope edges (edge_dp): spent epsilon 8 exceeds the cap 7.9")
