#!/usr/bin/env bash
# Set up privgraph from nothing: a .venv with torch (pinned, installed first), the pinned
# dependencies, and privgraph itself in editable mode. Idempotent: a second run changes nothing.
# Needs Python 3.11 and the package registries; no GPU, no other network access.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' \
  || { echo "privgraph needs Python 3.11 (found: $("$PYTHON" --version 2>&1))" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=".venv/bin/python -m pip"
$PIP install --quiet --upgrade "pip>=24"

# torch first and pinned: a loose requirement would pull a different (multi-GB) build.
# torch 2.14.1 + torchvision 0.29.1 are one CUDA build that also runs on the CPU.
if ! .venv/bin/python -c 'import torch, torchvision, sys; sys.exit(0 if (torch.__version__.startswith("2.14.1") and torchvision.__version__.startswith("0.29.1")) else 1)' 2>/dev/null; then
  $PIP install --quiet torch==2.14.1 torchvision==0.29.1
fi
$PIP install --quiet -r requirements.txt
$PIP install --quiet --no-deps --no-build-isolation -e .
.venv/bin/python -c 'import privgraph, torch, torch_geometric, prefect, distributed; print(f"privgraph ready: torch {torch.__version__}, PyG {torch_geometric.__version__}, prefect {prefect.__version__}")'
