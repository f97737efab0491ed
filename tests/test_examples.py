"""The ``>>>`` examples in the library's docstrings run, so a docstring is a contract that cannot
drift from the code (PyG's and diffprivlib's docstrings carry examples the same way).

Every module of ``privgraph/`` whose source holds ``>>>`` is found by a scan (a new example is run
without being listed here); each stage of the pipeline carries at least one example.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the stages whose public entry points carry examples (docs/architecture.md, Layout)
STAGES = ("ground", "ingest", "privatize", "validate", "evaluate", "publish")
MIN_EXAMPLES = 20


def _modules_with_examples() -> list[str]:
    out = []
    for f in sorted((ROOT / "privgraph").rglob("*.py")):
        if ">>>" in f.read_text():
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def _stage(module: str) -> str:
    part = module.split(".")[1]
    return part if part in (*STAGES, "config", "cli") else "ground"  # mechanisms/, parts/, storage/: ground


def _finder_examples(module: str) -> list[doctest.DocTest]:
    mod = importlib.import_module(module)
    return [t for t in doctest.DocTestFinder(exclude_empty=True).find(mod, module) if t.examples]


@pytest.mark.parametrize("module", _modules_with_examples())
def test_the_examples_of_a_module_run(module):
    tests = _finder_examples(module)
    assert tests, f"{module} holds '>>>' but no docstring example was found"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for t in tests:
        runner.run(t)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{module}: {result.failed} of {result.attempted} examples failed (output above)"


def test_every_stage_carries_examples():
    counts: dict[str, int] = {}
    for module in _modules_with_examples():
        n = sum(1 for t in _finder_examples(module) for e in t.examples if e.source.strip())
        counts[_stage(module)] = counts.get(_stage(module), 0) + n
    missing = [s for s in STAGES if not counts.get(s)]
    assert not missing, f"no docstring example in {missing}; counts {counts}"
    assert sum(counts.values()) >= MIN_EXAMPLES, counts


def test_a_wrong_example_fails():
    """The runner fails: an example whose stated output is wrong is counted as a failure."""
    t = doctest.DocTestParser().get_doctest(">>> 1 + 1\n3\n", {}, "planted", "planted.py", 0)
    runner = doctest.DocTestRunner()
    runner.run(t, out=lambda s: None)
    assert runner.summarize(verbose=False).failed == 1
