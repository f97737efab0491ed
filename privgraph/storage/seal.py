"""Tamper evidence: every published manifest is signed (Ed25519) under the data owner's key.

The version id content-addresses the data objects (their sha256 in the manifest hash into the
id), but it cannot cover the rest of the manifest (the ledger, the validation, the metrics): a
flow measures the staged version before it writes the manifest that records the measurements
(see :mod:`privgraph.storage.base`). The seal covers all of it. ``manifest["seal"]`` is::

    {"algorithm": "ed25519", "public_key": "<64 hex>", "signature": "<128 hex>"}

where the signature is over the canonical JSON (sorted keys, no whitespace) of the whole manifest
as stored, ``seal`` removed, ``version``, ``created`` and ``objects`` included. Editing any byte
that JSON parsing sees (an epsilon 1 -> 0.01, a checksum, a metric) breaks the signature.

The key pair is the owner's (``keys/manifest-ed25519.key`` next to the HMAC key, see
:mod:`privgraph.storage.private_record`); anyone may hold the public key. A signature checked only
against the public key that the manifest itself names proves the manifest was not edited by
someone who lacks *a* key, not who signed it: whoever rewrites a manifest can re-sign it with a
key of their own. :func:`check_seal` therefore takes the trusted public keys (the owner's, or the
ones a consumer pinned) and refuses any other signer.

Signing reveals nothing new: the signature is a function of the manifest (published) and a key
drawn from the OS CSPRNG independently of the data.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from privgraph.errors import ArtifactIntegrityError, ArtifactTamperedError

__all__ = ["SEAL_ALGORITHM", "SEAL_FIELD", "public_key_hex", "seal_manifest", "check_seal", "sealed_payload"]

SEAL_ALGORITHM = "ed25519"
SEAL_FIELD = "seal"
_HEX = set("0123456789abcdef")


def public_key_hex(key: Ed25519PrivateKey) -> str:
    """The 32-byte raw public key of ``key``, as 64 lowercase hex digits."""
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


def sealed_payload(manifest: Mapping[str, Any]) -> bytes:
    """The bytes the seal signs: the canonical JSON of ``manifest`` without its ``seal``."""
    body = {k: v for k, v in manifest.items() if k != SEAL_FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def seal_manifest(manifest: Mapping[str, Any], key: Ed25519PrivateKey) -> dict[str, Any]:
    """A copy of ``manifest`` with its seal (any earlier seal replaced)."""
    body = {k: v for k, v in manifest.items() if k != SEAL_FIELD}
    signature = key.sign(sealed_payload(body)).hex()
    return {**body, SEAL_FIELD: {"algorithm": SEAL_ALGORITHM, "public_key": public_key_hex(key), "signature": signature}}


def _is_hex(s: Any, length: int) -> bool:
    return isinstance(s, str) and len(s) == length and set(s) <= _HEX


def check_seal(
    manifest: Mapping[str, Any], where: str, *, trusted: Collection[str] | None = None, required: bool = False
) -> str | None:
    """Check the seal of ``manifest`` (stored at ``where``); return the signer's public key.

    Args:
        trusted: hex public keys allowed to sign; ``None`` accepts the key the manifest names
            (proves no edit without re-signing, not who signed).
        required: refuse an unsealed manifest (else ``None`` is returned for one).

    Raises:
        ArtifactIntegrityError: the seal is missing (when required or ``trusted`` is given).
        ArtifactTamperedError: the seal is malformed, the signature does not verify (the manifest
            was edited after it was signed), or the signer is not among ``trusted``.
    """
    seal = manifest.get(SEAL_FIELD)
    if seal is None:
        if required or trusted is not None:
            raise ArtifactIntegrityError(f"manifest of {where} is not sealed (no owner's signature): it cannot be trusted")
        return None
    if not (
        isinstance(seal, Mapping) and seal.get("algorithm") == SEAL_ALGORITHM
        and _is_hex(seal.get("public_key"), 64) and _is_hex(seal.get("signature"), 128)
    ):
        raise ArtifactTamperedError(f"manifest of {where} has a malformed seal")
    public = str(seal["public_key"])
    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(public)).verify(
            bytes.fromhex(str(seal["signature"])), sealed_payload(manifest)
        )
    except (InvalidSignature, ValueError):
        raise ArtifactTamperedError(
            f"manifest of {where} does not match its seal: it was changed after the owner signed it"
        ) from None
    if trusted is not None and public not in {k.lower() for k in trusted}:
        raise ArtifactTamperedError(
            f"manifest of {where} is signed by key {public[:16]}..., not by a trusted key "
            f"({', '.join(k[:16] + '...' for k in sorted(trusted)) or 'none given'})"
        )
    return public
