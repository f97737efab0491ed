"""S3Store: artifacts in an S3 bucket (or any S3-compatible endpoint such as MinIO).

Keys are ``<prefix>/<pipeline>/<version>/<name>``. Every object is written with a conditional
put (``If-None-Match: *``), so an existing key is never overwritten: S3 answers 412
PreconditionFailed (or 409 ConditionalRequestConflict while a concurrent conditional write of
the same key is in flight), and the store raises
:class:`~privgraph.errors.ArtifactExistsError`. An S3 PUT is atomic: readers see the whole
object or none. The manifest is written last, as for every store.

An endpoint that ignores ``If-None-Match`` would overwrite silently; the write protocol also
checks for an existing manifest before writing, but only a conditional put closes the race
between two writers. Check that your endpoint supports it (AWS S3 since 2024, MinIO, moto).
"""

from __future__ import annotations

from typing import Any

from privgraph.errors import ArtifactError, ArtifactExistsError, StoreUnavailableError, exit_code_for
from privgraph.guarantee.redaction import redact_uri
from privgraph.storage.base import ArtifactStore

__all__ = ["S3Store"]

_EXISTS_CODES = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}
_MISSING_CODES = {"NoSuchKey", "404", "NotFound"}


def _error_code(err: Exception) -> str:
    response = getattr(err, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


class S3Store(ArtifactStore):
    """An S3 (or S3-compatible) artifact store.

    Args:
        bucket (str): the bucket (must exist).
        prefix (str): a key prefix under which the store lives (default: ``""``).
        endpoint_url (str, optional): an S3-compatible endpoint, e.g. ``http://localhost:9000``
            for MinIO (default: ``None``, AWS).
        client (optional): a ready ``boto3`` S3 client; overrides ``endpoint_url``
            (default: ``None``, one is created with boto3's usual credential chain).
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        endpoint_url: str | None = None,
        client: Any = None,
    ) -> None:
        if not isinstance(bucket, str) or not bucket:
            raise ValueError(f"bucket must be a non-empty str, got {bucket!r}")
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
        parts = [p for p in prefix.strip("/").split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise ValueError(f"prefix {prefix!r} must not contain '.' or '..' components")
        self.bucket = bucket
        self.prefix = "/".join(parts)
        self.endpoint_url = endpoint_url
        self._client = self._make_client() if client is None else client

    def _make_client(self) -> Any:
        import boto3  # lazy: boto3, only for an s3:// store

        return boto3.client("s3", endpoint_url=self.endpoint_url)

    # a boto3 client does not pickle: a store sent to another process makes a new one there
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._client = self._make_client()

    def __repr__(self) -> str:
        where = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        return f"S3Store({where!r})" if self.endpoint_url is None else (
            f"S3Store({where!r}, endpoint_url={redact_uri(self.endpoint_url)!r})"
        )

    def _s3_key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def check_writable(self) -> None:
        """``HeadBucket``: the endpoint answers, the credentials are accepted, the bucket exists."""
        from botocore.exceptions import BotoCoreError, ClientError  # lazy: botocore, as boto3

        where = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except ClientError as err:
            code = _error_code(err)
            status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            if code in ("404", "NoSuchBucket", "NotFound"):
                raise ArtifactError(f"artifact store {where}: bucket {self.bucket!r} does not exist") from None
            if code in ("403", "AccessDenied", "Forbidden") or status == 403:
                raise ArtifactError(f"artifact store {where}: access denied (check the credentials)") from None
            if status >= 500:
                raise StoreUnavailableError(f"artifact store {where}: the endpoint answered {status} {code}") from err
            raise ArtifactError(f"artifact store {where}: {code or err}") from None
        except BotoCoreError as err:
            if exit_code_for(err) == 4:
                raise StoreUnavailableError(f"artifact store {where}: {type(err).__name__}: {err}") from err
            raise ArtifactError(f"artifact store {where}: {err}") from None

    # -- primitives -------------------------------------------------------------------------------
    def _put_new(self, key: str, data: bytes) -> None:
        from botocore.exceptions import ClientError  # lazy: botocore, as boto3

        try:
            self._client.put_object(
                Bucket=self.bucket, Key=self._s3_key(key), Body=data, IfNoneMatch="*"
            )
        except ClientError as err:
            if _error_code(err) in _EXISTS_CODES:
                raise ArtifactExistsError(
                    f"s3://{self.bucket}/{self._s3_key(key)} exists already; artifacts are never "
                    f"overwritten"
                ) from None
            raise

    def _get(self, key: str) -> bytes:
        from botocore.exceptions import ClientError  # lazy: botocore, as boto3

        try:
            response = self._client.get_object(Bucket=self.bucket, Key=self._s3_key(key))
        except ClientError as err:
            if _error_code(err) in _MISSING_CODES:
                raise KeyError(key) from None
            raise
        return response["Body"].read()

    def _exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError  # lazy: botocore, as boto3

        try:
            self._client.head_object(Bucket=self.bucket, Key=self._s3_key(key))
        except ClientError as err:
            if _error_code(err) in _MISSING_CODES:
                return False
            raise
        return True

    def _list_prefixes(self, prefix: str) -> list[str]:
        full = self._s3_key(prefix) if prefix else (f"{self.prefix}/" if self.prefix else "")
        names: list[str] = []
        paginator = self._client.get_paginator("list_objects_v2")
        try:
            pages = list(paginator.paginate(Bucket=self.bucket, Prefix=full, Delimiter="/"))
        except Exception as err:  # botocore's ClientError, e.g. NoSuchBucket
            if _error_code(err) == "NoSuchBucket":
                raise ArtifactError(f"{self!r}: bucket {self.bucket!r} does not exist") from None
            raise
        for page in pages:
            for cp in page.get("CommonPrefixes", []):
                names.append(cp["Prefix"][len(full):].rstrip("/"))
        return sorted(n for n in names if n)

    def _list_names(self, prefix: str) -> list[str]:
        full = self._s3_key(prefix)
        paginator = self._client.get_paginator("list_objects_v2")
        names = []
        for page in paginator.paginate(Bucket=self.bucket, Prefix=full, Delimiter="/"):
            names += [o["Key"][len(full):] for o in page.get("Contents", [])]
        return sorted(n for n in names if n)

    def _list_everything(self, prefix: str) -> list[str]:
        """Every key under the prefix, at any depth (``list_objects_v2`` without a delimiter,
        paginated)."""
        full = self._s3_key(prefix)
        names: list[str] = []
        for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full):
            names += [o["Key"][len(full):] for o in page.get("Contents", [])]
        return sorted(names)

    def _copy_new(self, src: str, dst: str) -> None:
        """A server-side copy (boto3's managed ``copy``: CopyObject, or UploadPartCopy above its
        multipart threshold; no byte passes through this process). S3 has no conditional copy:
        ``dst`` is checked first, and its key holds a content hash and a microsecond time, so no
        other writer targets it."""
        if not self._exists(src):
            raise KeyError(src)
        if self._exists(dst):
            raise ArtifactExistsError(
                f"s3://{self.bucket}/{self._s3_key(dst)} exists already; artifacts are never overwritten"
            )
        self._client.copy({"Bucket": self.bucket, "Key": self._s3_key(src)}, self.bucket, self._s3_key(dst))

    def _delete(self, key: str) -> None:
        self._client.delete_object(Bucket=self.bucket, Key=self._s3_key(key))
