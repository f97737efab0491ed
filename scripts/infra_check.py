#!/usr/bin/env python
"""Check infra/ against pipelines.yaml: the Prefect deployments, and no credential in any file.

``infra/prefect.yaml`` is GENERATED from ``pipelines.yaml`` (through ``privgraph.config.loader.load_config``,
so an invalid configuration fails here with its one-line message): one deployment of the
``privatize`` flow per pipeline, named ``<pipeline>-scheduled`` like ``privgraph serve`` names them
(``flows/schedule.py``), with the pipeline's ``schedule`` (cron and timezone) where it has one and
no schedule otherwise (run on demand, e.g. from CI with ``prefect deployment run``).

    .venv/bin/python scripts/infra_check.py            # exit 0: infra/ matches; 1: it does not
    .venv/bin/python scripts/infra_check.py --write    # regenerate infra/prefect.yaml
    .venv/bin/python scripts/infra_check.py --config prod/pipelines.yaml --prefect-file prod/prefect.yaml

The check also scans every file under infra/ for credential values (a password, key or token
written out rather than taken from the environment). Exit codes: 0 ok, 1 a difference or a
credential found, 2 bad input (configuration or an unreadable prefect.yaml).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: privgraph from this checkout
    sys.path.insert(0, str(ROOT))

PREFECT_VERSION = "3.8.0"  # the lock's prefect; tests/test_infra.py checks the installed one
FLOW_NAME = "privatize"  # @flow(name=...) of flows/privatize.py:privatize_flow
ENTRYPOINT = "flows/privatize.py:privatize_flow"
WORKDIR = "/opt/privgraph"  # the worker image's WORKDIR (infra/Dockerfile): code + pipelines.yaml
#: the variable naming the directory a run moves into (the pull step, resolved by Prefect from the
#: environment of `prefect deploy` or else of the worker): the image sets it to WORKDIR, a checkout
#: exports its own path (docs/production.md, "Without Docker")
WORKDIR_VAR = "PRIVGRAPH_WORKDIR"
CONFIG_PATH = "pipelines.yaml"  # relative to the working directory; compose mounts the production file there
WORK_POOL = {"name": "privgraph-process", "type": "process"}
WORK_QUEUE = "default"
#: as flows/schedule.py's ONE_RUN_AT_A_TIME for `privgraph serve`
CONCURRENCY_LIMIT = {"limit": 1, "collision_strategy": "CANCEL_NEW"}

HEADER = """\
# GENERATED from pipelines.yaml by scripts/infra_check.py --write: do not edit by hand.
# `.venv/bin/python scripts/infra_check.py` fails when this file and pipelines.yaml disagree.
#
# Prefect deployments of the `privatize` flow, one per pipeline, named <pipeline>-scheduled (as
# `privgraph serve` names them): the pipeline's schedule (cron, timezone) where pipelines.yaml has
# one; the others have no schedule and run on demand, e.g. from CI:
#   prefect deployment run "privatize/<pipeline>-scheduled" --watch --watch-timeout 3600
# Registered by the compose service `prefect-deploy`, from the image's WORKDIR:
#   prefect work-pool create privgraph-process --type process
#   prefect --no-prompt deploy --all --prefect-file infra/prefect.yaml
# Runs go to the process work pool `privgraph-process` (definitions.work_pool below; Prefect
# ignores `definitions`, it documents the pool that compose creates). The pull step moves into
# $PRIVGRAPH_WORKDIR, where the entrypoint and pipelines.yaml are: the image sets it to its WORKDIR
# (/opt/privgraph); from a checkout, `export PRIVGRAPH_WORKDIR="$PWD"` before `prefect deploy` and
# `prefect worker start` (docs/production.md, "Without Docker"). Nothing is built or pushed here.
"""


# --------------------------------------------------------------------------- deployments


def expected_document(config_path: str | Path) -> dict[str, Any]:
    """The content infra/prefect.yaml must have, generated from the pipelines file."""
    from privgraph.config.loader import load_config

    cfg = load_config(config_path)
    deployments = []
    for name, p in cfg.pipelines.items():
        schedules = []
        if p.schedule is not None:
            schedules.append({"cron": p.schedule.cron, "timezone": p.schedule.timezone, "active": True})
        deployments.append({
            "name": f"{name}-scheduled",
            "description": p.description or f"privgraph pipeline {name}",
            "tags": ["privgraph", name],
            "entrypoint": ENTRYPOINT,
            "parameters": {"pipeline": name, "config_path": CONFIG_PATH},
            "work_pool": {"name": WORK_POOL["name"], "work_queue_name": WORK_QUEUE, "job_variables": {}},
            # one run of a pipeline at a time: a run that would start while one runs is cancelled
            "concurrency_limit": dict(CONCURRENCY_LIMIT),
            "schedules": schedules,
        })
    return {
        "name": "privgraph",
        "prefect-version": PREFECT_VERSION,
        "definitions": {"work_pool": dict(WORK_POOL)},
        "build": None,
        "push": None,
        "pull": [{"prefect.deployments.steps.set_working_directory": {"directory": "{{ $" + WORKDIR_VAR + " }}"}}],
        "deployments": deployments,
    }


def render(doc: dict[str, Any]) -> str:
    """The file text for ``doc``: the header, then the YAML (keys in the order above)."""
    body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100, allow_unicode=True)
    return HEADER + "\n" + body


def _canonical(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=True, default_flow_style=False, width=100)


def diff_deployments(config_path: str | Path, prefect_file: str | Path) -> list[str]:
    """Unified-diff lines between the generated document and the file (empty: they agree)."""
    expected = expected_document(config_path)
    path = Path(prefect_file)
    if not path.is_file():
        return [f"{path}: missing (run scripts/infra_check.py --write)"]
    try:
        actual = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        return [f"{path}: not valid YAML ({exc})"]
    if actual == expected:
        return []
    return list(difflib.unified_diff(
        _canonical(expected).splitlines(), _canonical(actual).splitlines(),
        fromfile=f"generated from {config_path}", tofile=str(path), lineterm="",
    )) or [f"{path}: differs from the generated document"]


def deployment_summary(doc: dict[str, Any]) -> dict[str, tuple[str, str] | None]:
    """``{deployment name: (cron, timezone) or None}`` of a prefect.yaml document."""
    out: dict[str, tuple[str, str] | None] = {}
    for d in doc.get("deployments") or []:
        scheds = d.get("schedules") or []
        out[d["name"]] = (scheds[0]["cron"], scheds[0].get("timezone", "UTC")) if scheds else None
    return out


# --------------------------------------------------------------------------- credentials

# ${VAR...} (compose, shell), ${{ secrets.X }} (GitHub), $VAR and $$VAR: references, not values
_REFERENCE = re.compile(r"\$\{\{[^}]*\}\}|\$\{[^}]*\}|\$\$?[A-Za-z_][A-Za-z0-9_]*")
_KEY = (r"[A-Za-z0-9_.-]*(?:password|passwd|secret|token|api_?key|access_?key|auth_?string|"
        r"private_?key|credential)[A-Za-z0-9_.-]*")
# a key in assignment position: `KEY: value` (YAML, at the start of a line or in a {flow, map}),
# `KEY=value` (env files, ENV/ARG, shell, `-e KEY=value`); prose such as "no secret: ..." is not
_SECRET_YAML = re.compile(rf"(?i)(?:^\s*(?:-\s+)?|[{{,]\s*)[\"']?({_KEY})[\"']?\s*:(?:\s+|$)(.*)")
_SECRET_ASSIGN = re.compile(rf"(?i)(?:^|[\s\"'{{,;(-])({_KEY})=(\"[^\"]*\"|'[^']*'|[^\s;,}})]*)")
_URL_USERINFO = re.compile(r"[a-z][a-z0-9+.-]*://([^:/@\s'\"]+):([^@\s'\"]+)@")
_KNOWN_SHAPES = {
    "an AWS access key id": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "a private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "MinIO's default credentials": re.compile(r"\bminioadmin\b"),
    "a GitHub token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),
    "a Prefect Cloud API key": re.compile(r"\bpnu_[A-Za-z0-9]{30,}\b"),
}
_REF = "<ref>"
_HARMLESS = {"", _REF, "null", "~", "''", '""', "true", "false"}


def _harmless(value: str) -> bool:
    """A value with its references already replaced: empty, a reference, or a YAML null/bool."""
    v = value.split(" #", 1)[0].strip().strip(",").strip("\"'").strip()
    return v.lower() in _HARMLESS


def scan_text(text: str, where: str = "<text>") -> list[str]:
    """Every line of ``text`` that holds a credential value: ``'<where>:<line>: <why>'``."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        for why, shape in _KNOWN_SHAPES.items():
            if shape.search(line):
                found.append(f"{where}:{n}: {why}")
        bare = _REFERENCE.sub(_REF, line)
        m = _URL_USERINFO.search(bare)
        if m and m.group(2) != _REF:
            found.append(f"{where}:{n}: a password written into a URL")
        for pattern in (_SECRET_YAML, _SECRET_ASSIGN):
            for m in pattern.finditer(bare):
                if not _harmless(m.group(2)):
                    found.append(f"{where}:{n}: {m.group(1)} has a literal value (take it from the environment)")
    return found


def scan_credentials(root: str | Path) -> list[str]:
    """``scan_text`` over every file under ``root`` (binary files are reported as such)."""
    found = []
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            found.append(f"{path}: binary file in infra/ (cannot be checked for credentials)")
            continue
        found.extend(scan_text(text, str(path)))
    return found


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "pipelines.yaml"), help="pipelines file")
    ap.add_argument("--prefect-file", default=str(ROOT / "infra" / "prefect.yaml"))
    ap.add_argument("--infra", default=str(ROOT / "infra"), help="directory scanned for credentials")
    ap.add_argument("--write", action="store_true", help="regenerate the prefect file, then check")
    args = ap.parse_args(argv)

    from privgraph.errors import PrivgraphError

    try:
        if args.write:
            text = render(expected_document(args.config))
            Path(args.prefect_file).write_text(text)
            print(f"wrote {args.prefect_file}")
        problems = diff_deployments(args.config, args.prefect_file)
    except PrivgraphError as exc:
        print(f"infra_check: {exc}", file=sys.stderr)
        return 2
    if problems:
        print(f"{args.prefect_file} does not match {args.config} (regenerate: scripts/infra_check.py --write):",
              file=sys.stderr)
        print("\n".join(problems), file=sys.stderr)
    creds = scan_credentials(args.infra)
    if creds:
        print("credential values in infra/ (use ${VAR:?message} / ${{ secrets.NAME }} references):",
              file=sys.stderr)
        print("\n".join(creds), file=sys.stderr)
    if problems or creds:
        return 1
    with open(args.prefect_file) as fh:
        summary = deployment_summary(yaml.safe_load(fh))
    for name, sched in summary.items():
        print(f"ok {FLOW_NAME}/{name}: " + (f"cron {sched[0]!r} ({sched[1]})" if sched else "on demand"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
