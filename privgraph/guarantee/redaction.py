"""The one redaction of a URI for a message, a log line, a returned value or the manifest.

A URI may carry credentials in its userinfo (``s3://KEY:SECRET@bucket/prefix``, which pyarrow
honours) or its query string (``?secret_key=...``), and every channel privgraph writes to is
published (docs/guarantees.md). :func:`redact_uri` keeps the scheme, the host and the path and
drops the rest; every place that shows a URI shows what it returns.
"""

from __future__ import annotations

import os

__all__ = ["REDACTED", "redact_uri"]

#: what stands for the authority and path of a URI whose credentials cannot be told apart from
#: its query string (a ``?`` or ``#`` before the last ``@``)
REDACTED = "(redacted)"


def redact_uri(uri: str | os.PathLike[str]) -> str:
    """``uri`` without its userinfo, query string and fragment: ``scheme://host/path``.

    A string without ``://`` (a local path) is returned as it is. In a URI the userinfo runs up to
    the LAST ``@`` (a secret may hold unencoded ``/``, ``@``, ``:``, ``%``), the query from the
    first ``?`` and the fragment from the first ``#`` after it; where a ``?`` or ``#`` comes before
    the last ``@`` (a secret holding ``?``, or an ``@`` in the query) the two cannot be told apart
    and ``scheme://(redacted)`` is returned. Never under-redacts: a path holding ``@`` loses what
    comes before it. Idempotent.

    >>> redact_uri("s3://KEY:SECRET@bucket/graphs?versionId=3")
    's3://bucket/graphs'
    >>> redact_uri("/data/graph")
    '/data/graph'
    """
    text = os.fspath(uri)
    scheme, sep, rest = text.partition("://")
    if not sep:
        return text
    at = rest.rfind("@")
    cuts = [i for i in (rest.find("?"), rest.find("#")) if i >= 0]
    if at >= 0 and cuts and min(cuts) < at:
        return f"{scheme}://{REDACTED}"
    rest = rest[at + 1:]
    cuts = [i for i in (rest.find("?"), rest.find("#")) if i >= 0]
    return f"{scheme}://{rest[:min(cuts)] if cuts else rest}"
