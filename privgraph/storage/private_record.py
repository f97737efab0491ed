"""The run's private record: diagnostics computed from private data that no guarantee covers.

Some stages produce useful diagnostics that are NOT differentially private (EdgeRR's MCMC
log-likelihood trace and convergence statistics are computed from the private edges). They are
for the data owner only: written to a local directory (``private_records`` in pipelines.yaml),
never to the artifact store, a manifest or a Prefect artifact.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privgraph.storage.base import check_name, check_version_id

__all__ = ["write_private_record", "read_private_record"]


def _path(directory: str | os.PathLike[str], pipeline: str, version: str) -> Path:
    return Path(directory) / check_name(pipeline, "pipeline") / f"{check_version_id(version)}.json"


def write_private_record(
    directory: str | os.PathLike[str], pipeline: str, version: str, record: Mapping[str, Any]
) -> Path | None:
    """Write ``record`` (JSON) for ``pipeline``/``version`` atomically, readable by the owner only
    (mode 0600); ``None`` (nothing written) for an empty record."""
    if not record:
        return None
    path = _path(directory, pipeline, version)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"pipeline": pipeline, "version": version, "covered_by_guarantee": False, **record}, f,
                      sort_keys=True, indent=1)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_private_record(directory: str | os.PathLike[str], pipeline: str, version: str) -> dict[str, Any]:
    """The private record of ``pipeline``/``version`` (``FileNotFoundError`` when none was written)."""
    return json.loads(_path(directory, pipeline, version).read_text())
