"""The "Your own graph" worked example (docs/your-own-graph.md, linked from the README), run
exactly as written.

The document's code blocks are read from docs/your-own-graph.md (not copied here): the export
script, the pipeline file and the read-back script are written to a fresh directory under the
names the document gives them, and the bash block's commands run there one by one with
``.venv/bin/`` pointing at this interpreter's directory. A change to the document that breaks the
example fails this test. Then the same files without labels and split: ``run --no-evaluate`` publishes and says
that evaluation needs labels and a split, and ``run`` refuses in one line before privatizing.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.flow


#: the document that holds the worked example (the README links to it)
DOC = REPO / "docs" / "your-own-graph.md"


def _section() -> str:
    text = DOC.read_text()
    return text[text.index("# Your own graph\n"):]


def _blocks(section: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w+)\n(.*?)```", section, re.S)]


def _example_files(section: str) -> tuple[dict[str, str], list[str]]:
    """``{file name: content}`` of the section's python and yaml blocks, and the bash commands."""
    files: dict[str, str] = {}
    commands: list[str] = []
    for lang, body in _blocks(section):
        if lang == "python":
            name = re.match(r"# (\S+\.py):", body)
            assert name, f"a python block of the example must start with '# NAME.py: ...': {body[:60]!r}"
            files[name.group(1)] = body
        elif lang == "yaml":
            files["karate.yaml"] = body
        elif lang == "bash":
            commands += [ln for ln in body.splitlines() if ln.strip()]
    return files, commands


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PRIVGRAPH_DEBUG", None)
    env["PRIVGRAPH_CACHE_DIR"] = str(tmp / "cache")
    return env


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    argv = shlex.split(command)
    if argv[0].startswith(".venv/bin/"):
        argv[0] = str(BIN / argv[0].removeprefix(".venv/bin/"))
    return subprocess.run(argv, cwd=cwd, env=_env(cwd), capture_output=True, text=True, timeout=900)


def test_the_worked_example_runs_as_written(tmp_path: Path) -> None:
    files, commands = _example_files(_section())
    assert set(files) == {"export_karate.py", "karate.yaml", "read_karate.py"}, sorted(files)
    assert [c.split()[0] for c in commands] == [".venv/bin/python", ".venv/bin/privgraph",
                                                ".venv/bin/privgraph", ".venv/bin/python"]
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    outputs = []
    for command in commands:
        r = _run(command, tmp_path)
        assert r.returncode == 0, f"{command}\n{r.stderr[-3000:]}"
        outputs.append(r.stdout)
    run_out, list_out, read_out = outputs[1], outputs[2], outputs[3]
    assert "published karate/" in run_out
    assert "model chosen by validation accuracy" in run_out  # it evaluated: labels and split file
    version = re.search(r"published karate/(\S+)", run_out).group(1)
    assert version in list_out.replace("\n", "") or version[:20] in list_out
    # the read-back: every node is there (34), the 16 features, and the release's edge count
    first = read_out.split()
    assert first[0] == version and first[1] == "34" and "(34, 16)" in read_out, read_out
    # the private record stayed with the owner; the store holds the manifest
    assert list((tmp_path / "private-records" / "karate").glob("*.json"))
    assert list((tmp_path / "artifacts").rglob("manifest.json"))


@pytest.mark.usefixtures("shared_prefect_server")  # the worked example above runs with the temporary server
def test_without_labels_no_evaluate_publishes_and_says_why(tmp_path: Path) -> None:
    files, commands = _example_files(_section())
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    assert _run(commands[0], tmp_path).returncode == 0  # the export
    cfg = yaml.safe_load(files["karate.yaml"])
    options = cfg["pipelines"]["karate"]["dataset"]["options"]
    del options["labels"], options["split"]
    (tmp_path / "karate.yaml").write_text(yaml.safe_dump(cfg))
    r = _run(".venv/bin/privgraph run karate --config karate.yaml", tmp_path)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert r.returncode == 2 and len(errors) == 1, r.stderr[-3000:]
    assert "has no labels (y), train_mask, val_mask, test_mask: evaluation needs labels and a train/val/test split" \
        in errors[0] and "--no-evaluate" in errors[0]
    assert not (tmp_path / "artifacts").exists() or not list((tmp_path / "artifacts").rglob("*.npy"))
    r = _run(".venv/bin/privgraph run karate --config karate.yaml --no-evaluate", tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "published karate/" in r.stdout
    said = " ".join(r.stdout.split())  # Rich wraps long lines
    assert ("not evaluated: dataset 'generic' has no labels (y), train_mask, val_mask, test_mask: evaluation "
            "needs labels and a train/val/test split") in said, r.stdout
    assert list((tmp_path / "artifacts").rglob("manifest.json"))
    # evaluating that version later needs them too: one line, exit 2
    version = re.search(r"published karate/(\S+)", r.stdout).group(1)
    r = _run(f".venv/bin/privgraph evaluate {version} --config karate.yaml", tmp_path)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert r.returncode == 2 and len(errors) == 1 and "evaluation needs labels" in errors[0], r.stderr[-3000:]
