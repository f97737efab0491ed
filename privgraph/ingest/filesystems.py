"""Where a graph path lives: a local directory or a URI that ``pyarrow.fs`` opens (``file://``,
``s3://bucket/prefix?endpoint_override=...``), as one file system and a root inside it, for the
partitioned graph's reader, the ingest's destination and its claims alike. A URI pyarrow refuses is
one line naming it redacted (:func:`~privgraph.guarantee.redaction.redact_uri`: no credentials, no
query string); pyarrow's own message, which quotes the whole URI, is never shown.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.fs as pafs

from privgraph.errors import ConfigError
from privgraph.guarantee.redaction import redact_uri

__all__ = ["filesystem_of"]


#: what pyarrow's refusals of a URI mean, by the start of its message (which quotes the whole URI,
#: credentials included, and is never shown)
_FROM_URI_REFUSALS = {
    "Cannot parse URI": "not a valid URI (a '/', '@', ':', '?' or '%' in credentials must be percent-encoded; "
                        "better, leave them to the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)",
    "Unrecognized filesystem type": "pyarrow.fs knows no file system of this scheme (s3://, gs://, hdfs://, file://)",
    "Unexpected query parameter": "a query parameter pyarrow.fs does not take (its S3 options: region, scheme, "
                                  "endpoint_override, ...)",
}


def filesystem_of(path: str) -> tuple[pafs.FileSystem, str]:
    """The file system of ``path`` (a local path, or a URI such as ``file://`` or ``s3://``) and the
    graph's root inside it.

    Raises:
        ConfigError: pyarrow refuses the URI; one line naming it redacted (exit code 2).
    """
    if "://" in path:
        try:
            fs, root = pafs.FileSystem.from_uri(path)
        except (pa.ArrowException, ValueError, TypeError) as exc:
            why = next((w for k, w in _FROM_URI_REFUSALS.items() if str(exc).startswith(k)),
                       f"pyarrow.fs cannot open it ({type(exc).__name__})")
            raise ConfigError(f"{redact_uri(path)}: {why}") from None
        return fs, root.rstrip("/")
    return pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(path))
