"""The library stays free of orchestration: no module under privgraph/ imports Prefect or Dask
(tasks/ and flows/ wrap it), and only the CLI, the user's entry point, reaches into flows/."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {"prefect", "dask", "distributed"}


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_the_library_imports_neither_prefect_nor_dask():
    files = sorted((ROOT / "privgraph").rglob("*.py"))
    assert len(files) > 40  # not vacuous: the whole package is scanned
    bad = {str(f.relative_to(ROOT)): sorted(_imports(f) & FORBIDDEN) for f in files if _imports(f) & FORBIDDEN}
    assert not bad, bad
    upward = {str(f.relative_to(ROOT)) for f in files if _imports(f) & {"flows", "tasks"} and f.name != "cli.py"}
    assert not upward, upward
    assert "prefect" in _imports(ROOT / "flows" / "server.py")  # the scan sees lazy (function-level) imports too
