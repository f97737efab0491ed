#!/usr/bin/env python3
"""The digests of what each shipped pipeline releases for a fixed seed, as JSON lines: a check that
a refactoring (a move of modules, a split of functions) changed no released byte.

Each pipeline of ``pipelines.yaml`` runs through the CLI (``privgraph run NAME --no-evaluate
--json``, a real Prefect flow on a temporary server) with ``seed`` and ``executor: serial`` set,
into a temporary store; printed per pipeline: the stored objects' sha256 (the manifest's
``objects``), the ledger, the stats and the public input's fingerprint. Run it at two commits and
compare the lines (``diff``). It imports nothing of privgraph, so the same file runs against an
older checkout: ``cd OLD && python3 NEW/scripts/release_digests.py``.

Run: ``PRIVGRAPH_DATA_ROOT=../shared/datasets python3 scripts/release_digests.py [NAME ...] [--seed 7]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml


def digest(name: str, pipeline: dict, seed: int, python: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = {**pipeline, "seed": seed, "executor": "serial", "storage": f"{tmp}/store",
               "private_records": f"{tmp}/private"}
        cfg.pop("schedule", None)
        path = Path(tmp) / "pipelines.yaml"
        path.write_text(yaml.safe_dump({"pipelines": {name: cfg}}))
        r = subprocess.run([python, "-m", "privgraph.cli", "run", name, "--config", str(path), "--no-evaluate", "--json"],
                           capture_output=True, text=True, env={**os.environ, "PRIVGRAPH_STORE": f"{tmp}/store"})
        if r.returncode != 0:
            return {"pipeline": name, "exit": r.returncode, "error": (r.stderr.strip().splitlines() or [""])[-1]}
        version = json.loads(r.stdout.strip().splitlines()[-1])["version"]
        manifest = json.loads(next(Path(tmp, "store").rglob(f"{version}/manifest.json")).read_text())
        return {"pipeline": name, "objects": manifest["objects"], "ledger": manifest["ledger"],
                "stats": manifest["stats"], "public_input_fingerprint": manifest.get("public_input_fingerprint")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pipelines", nargs="*", help="default: every pipeline of pipelines.yaml")
    ap.add_argument("--config", default="pipelines.yaml")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    pipelines = yaml.safe_load(Path(args.config).read_text())["pipelines"]
    for name in args.pipelines or list(pipelines):
        print(json.dumps(digest(name, pipelines[name], args.seed, sys.executable), sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
