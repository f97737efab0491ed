"""Artifact manifests: the format (what a version holds and proves) and the checks before one is
written. Building the manifest of a pipeline's run is :mod:`privgraph.publish.publication`'s, above the
store: this module depends on nothing above the ledger.

A manifest is a JSON object. The caller supplies the content below; the store adds ``format``,
``version``, ``created``, ``objects`` (name -> sha256 and size) and ``seal`` (the owner's
signature over all of it, :mod:`privgraph.storage.seal`) when it writes the version.

Required keys:

* ``pipeline``: the pipeline name (must equal the name the version is stored under)
* ``ledger``: :meth:`privgraph.guarantee.ledger.PrivacyLedger.to_dict` of the run
* ``mechanisms``: the mechanisms and their PUBLIC parameters
* ``public_input_fingerprint``: a SHA-256 of the PUBLIC inputs only
  (:meth:`privgraph.config.disclosure.Disclosure.fingerprint`), never of private data
* ``public``: what the pipeline declares public, each with the YAML path that declares it
  (:meth:`privgraph.config.disclosure.Disclosure.manifest_section`)
* ``code_version``: :func:`code_version`
* ``validation``: the validation results

A manifest never holds a seed: a seed plus the raw data replays the noise. Any key, at any depth,
whose name contains ``seed`` (case-insensitive) is refused.

Every other field is either configuration, public by the pipeline's declaration, or a function of
the stored objects (``graph``: their counts; ``metrics``: a model trained on them): the
non-interference test (tests/test_non_interference.py) checks this byte for byte on neighbouring
inputs, and recomputes those two sections from the stored objects alone.
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any


from privgraph.errors import ArtifactError
from privgraph.guarantee.ledger import PrivacyLedger

__all__ = [
    "REQUIRED_KEYS",
    "STORE_KEYS",
    "MANIFEST_FORMAT",
    "READABLE_MANIFEST_FORMATS",
    "validate_manifest",
    "manifest_bytes",
    "seed_key_paths",
    "code_version",
]

MANIFEST_FORMAT = "privgraph.manifest/2"
#: Formats a store still reads (published versions never change). Version 1 manifests carried an
#: unsalted hash of the raw input (``input_fingerprint``) and the clean graph's accuracy: versions
#: written before privgraph 0.1's issue-9 fixes; they stay readable, not re-checkable.
READABLE_MANIFEST_FORMATS: tuple[str, ...] = ("privgraph.manifest/1", MANIFEST_FORMAT)

#: Keys every manifest must carry (supplied by the caller).
REQUIRED_KEYS: tuple[str, ...] = (
    "pipeline",
    "ledger",
    "mechanisms",
    "public_input_fingerprint",
    "public",
    "code_version",
    "validation",
)

#: Keys the store sets when it writes a version; a caller may not supply them.
STORE_KEYS: tuple[str, ...] = ("format", "version", "created", "objects", "seal")


def seed_key_paths(obj: Any, path: str = "") -> list[str]:
    """Paths (``a.b[0].c``) of every key whose name contains ``seed`` (case-insensitive)."""
    found: list[str] = []
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            p = f"{path}.{k}" if path else str(k)
            if isinstance(k, str) and "seed" in k.lower():
                found.append(p)
            found += seed_key_paths(v, p)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            found += seed_key_paths(v, f"{path}[{i}]")
    return found


def _non_str_key_paths(obj: Any, path: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            p = f"{path}.{k}" if path else str(k)
            if not isinstance(k, str):
                found.append(p)
            found += _non_str_key_paths(v, p)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            found += _non_str_key_paths(v, f"{path}[{i}]")
    return found


def validate_manifest(manifest: Any, *, allow_store_keys: bool = False) -> None:
    """Refuse a manifest that holds a seed, is not plain JSON, or lacks a required key.

    Args:
        manifest: the caller's manifest (a dict).
        allow_store_keys: accept the keys the store adds (for re-validating a stored manifest)
            (default: ``False``).

    Raises:
        ArtifactError: naming the seed key path, the non-JSON value, or the missing keys.
    """
    if not isinstance(manifest, Mapping):
        raise ArtifactError(f"a manifest must be a dict, got {type(manifest).__name__}")
    seeds = seed_key_paths(manifest)
    if seeds:
        raise ArtifactError(
            "manifests never hold seeds (a seed plus the raw data replays the noise); "
            f"found key {seeds[0]!r}" + (f" (and {len(seeds) - 1} more)" if len(seeds) > 1 else "")
        )
    bad_keys = _non_str_key_paths(manifest)
    if bad_keys:
        raise ArtifactError(f"manifest keys must be strings; not a string: {bad_keys[0]!r}")
    try:
        json.dumps(manifest, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ArtifactError(f"manifest is not JSON-serialisable: {err}") from None
    missing = [k for k in REQUIRED_KEYS if k not in manifest]
    if missing:
        raise ArtifactError(f"manifest lacks required keys {missing} (required: {list(REQUIRED_KEYS)})")
    if not allow_store_keys:
        reserved = [k for k in STORE_KEYS if k in manifest]
        if reserved:
            raise ArtifactError(f"manifest keys {reserved} are set by the store; leave them out")
    if not isinstance(manifest["pipeline"], str):
        raise ArtifactError(f"manifest 'pipeline' must be a str, got {manifest['pipeline']!r}")
    try:
        PrivacyLedger.from_dict(manifest["ledger"])
    except (TypeError, ValueError) as err:
        raise ArtifactError(
            f"manifest 'ledger' is not a PrivacyLedger.to_dict(): {err}"
        ) from None


def manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    """The bytes of a stored ``manifest.json`` (format :data:`MANIFEST_FORMAT`): key-sorted JSON
    indented by 2, ASCII with escapes, no NaN, one trailing newline. The store writes exactly
    these, and refuses to read a manifest of the current format whose bytes are not
    ``manifest_bytes`` of its own parsed content (whitespace, key order, escapes, number
    spellings or repeated keys would carry what the parsed manifest never shows); manifests of
    the older :data:`READABLE_MANIFEST_FORMATS` stay readable without that check.

    Raises:
        ValueError: a NaN or infinite number; TypeError: not JSON content.
    """
    return (json.dumps(manifest, sort_keys=True, indent=2, allow_nan=False) + "\n").encode()


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        res = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() if res.returncode == 0 else None


def _package_version() -> str:
    try:
        return version("privgraph")
    except PackageNotFoundError:
        return "unknown"


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """The code that produced an artifact: ``<commit sha>[-dirty]`` or the package version.

    Uses git when the package directory is inside a git work tree where it is not ignored (an
    installed copy in a virtual environment inside some repository is not that repository's
    code); ``-dirty`` is appended when tracked files have uncommitted changes. Otherwise the
    installed package version (``"unknown"`` when not installed). Cached per process.
    """
    return _code_version_at(Path(__file__).resolve().parent.parent)


def _code_version_at(pkg: Path) -> str:
    sha = _git(["rev-parse", "HEAD"], pkg)
    if sha and _git(["check-ignore", "-q", str(pkg)], pkg) is None:
        status = _git(["status", "--porcelain", "--untracked-files=no"], pkg)
        return f"{sha}-dirty" if status else sha
    return _package_version()
