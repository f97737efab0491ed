"""What several commands share: the default store and the help texts of their common options."""

from __future__ import annotations

import os

DEFAULT_STORE = "./artifacts"


def default_store() -> str:
    """The store a command uses without ``--store``: $PRIVGRAPH_STORE, else :data:`DEFAULT_STORE`."""
    return os.environ.get("PRIVGRAPH_STORE", DEFAULT_STORE)


PUBLIC_KEY_HELP = (
    "trust manifests sealed by this Ed25519 public key (64 hex; repeatable; see `privgraph artifacts "
    "public-key`); default: the owner's own key, found via --private-records"
)
PRIVATE_RECORDS_HELP = "the owner's private-records directory (its keys/; $PRIVGRAPH_HOME wins when set)"
VERBOSE_HELP = "also print other libraries' INFO logs (Dask's scheduler and workers, great_expectations)"
SHOW_PRIVATE_HELP = ("also print the owner's private evaluation (the clean graph's accuracy, the structure report, "
                     "attack scores) here; off by default: CLI output is a published channel (CI logs, shared terminals)")
