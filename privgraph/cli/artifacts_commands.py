"""The ``privgraph artifacts`` subcommands: ``list``, ``show``, ``verify``, ``public-key`` and
``gc`` (registered on ``artifacts_app`` in :mod:`privgraph.cli`), and the store and trusted keys
they read."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from privgraph.cli.console import err, out
from privgraph.cli.failures import exit_on_failure
from privgraph.cli.options import PRIVATE_RECORDS_HELP, PUBLIC_KEY_HELP, default_store
from privgraph.cli.tables import print_ledger, print_metrics
from privgraph.errors import ArtifactIntegrityError, ConfigError, InfrastructureError, one_line


def _published_store(uri: str | None) -> Any:
    """The store a reading command (``artifacts list / show / verify / gc``) reads: a directory
    store that does not exist is a mistyped path, not an empty store (exit 2, as a missing S3
    bucket is)."""
    from privgraph.storage import open_store  # lazy: CLI start-up (the store loads pyarrow)
    from privgraph.storage.local import LocalStore  # lazy: CLI start-up

    st = open_store(uri or default_store())
    if isinstance(st, LocalStore) and not st.root.is_dir():
        raise ConfigError(f"--store {uri or default_store()}: no such directory ({st.root}); nothing was published there")
    return st


def _trusted_keys(public_keys: list[str] | None, private_records: str) -> list[str] | None:
    """The public keys whose seals a reader trusts: the ones given, else the owner's own key when
    this machine holds it, else ``None`` (a seal is checked only against the key it names)."""
    from privgraph.storage.private_record import owner_public_key  # lazy: CLI start-up

    keys = [k.strip().lower() for k in public_keys or []]
    for k in keys:
        if len(k) != 64 or not set(k) <= set("0123456789abcdef"):
            raise ConfigError(f"--public-key {k[:70]!r}: expected 64 hex digits (an Ed25519 public key)")
    if keys:
        return keys
    own = owner_public_key(private_records)
    return None if own is None else [own]


def _note_untrusted(trusted: list[str] | None) -> None:
    """Say on stderr, once per command, that seals are checked only against the key they name."""
    if trusted is None:
        err.print(
            "note: no trusted public key (--public-key, or the owner's key under --private-records): "
            "each seal is checked against the key it names, which shows no edit since signing, not who signed",
            highlight=False, soft_wrap=True,
        )


def artifacts_list(
    store: str | None = typer.Option(None, "--store", help="artifact store URI"),
    pipeline: str | None = typer.Option(None, "--pipeline", help="only this pipeline"),
    as_json: bool = typer.Option(False, "--json"),
    public_key: list[str] | None = typer.Option(None, "--public-key", help=PUBLIC_KEY_HELP),
    private_records: str = typer.Option("./private-records", "--private-records", help=PRIVATE_RECORDS_HELP),
) -> None:
    """List the published versions (a version without a manifest does not exist), each ledger's
    seal checked (against a trusted key when one is at hand); a version whose manifest cannot be
    read, does not match its seal, or does not list everything the version holds is left out and
    fails the command."""
    with exit_on_failure():
        trusted = _trusted_keys(public_key, private_records)
        _note_untrusted(trusted)
        broken: list[str] = []
        st = _published_store(store)
        rows = []
        for info in st.list_versions(pipeline, broken=broken):
            where = f"{info.pipeline}/{info.version}"
            try:  # the seal against the trusted keys (or the key it names), and the content hash
                signer = st.read_manifest(info.pipeline, info.version, trusted=trusted, sealed=True)["seal"]["public_key"]
            except ArtifactIntegrityError as exc:
                why = one_line(exc)
                broken.append(why if why.startswith(f"{where} ") else f"{where}: {why}")
                continue
            rows.append({**info.to_dict(), "seal": {"signer": signer, "trusted_key": trusted is not None}})
        if as_json:
            print(json.dumps(rows, sort_keys=True))
        elif not rows:
            out.print("no versions")
        else:
            t = Table("pipeline")
            t.add_column("version", no_wrap=True)
            t.add_column("created (UTC)", no_wrap=True)
            t.add_column("epsilon")
            t.add_column("seal", no_wrap=True)
            for r in rows:
                seal = f"{r['seal']['signer'][:16]}... " + ("trusted" if trusted is not None else "(unchecked signer)")
                t.add_row(escape(r["pipeline"]), r["version"], r["created"][:19], escape(r.get("epsilon_summary", "")), seal)
            out.print(t)
        if broken:
            for line in broken[1:]:
                err.print(f"broken: {escape(line)}", highlight=False, soft_wrap=True)
            raise ArtifactIntegrityError(
                f"{len(broken)} version(s) whose manifest cannot be read, does not match its seal or does not list "
                f"everything the version holds left out of the listing: {broken[0]}"
            )


def artifacts_show(
    version: str = typer.Argument(..., help="version id (see `privgraph artifacts list`)"),
    store: str | None = typer.Option(None, "--store", help="artifact store URI"),
    as_json: bool = typer.Option(False, "--json"),
    public_key: list[str] | None = typer.Option(None, "--public-key", help=PUBLIC_KEY_HELP),
    private_records: str = typer.Option("./private-records", "--private-records", help=PRIVATE_RECORDS_HELP),
) -> None:
    """Show a version's manifest: ledger, parameters, validation, metrics (after verifying its
    seal and every object)."""
    with exit_on_failure():

        trusted = _trusted_keys(public_key, private_records)
        _note_untrusted(trusted)
        st = _published_store(store)
        pipeline, version = st.find_version(version)
        # the seal, every object present with the manifest's checksum
        st.verify_version(pipeline, version, trusted=trusted, sealed=True)
        manifest = st.read_manifest(pipeline, version, trusted=trusted, sealed=True)
    if as_json:  # the manifest, and (beside it, not part of it) what this command checked
        checked = {"seal": True, "objects": True, "signer": manifest["seal"]["public_key"],
                   "signer_trusted": trusted is not None}
        print(json.dumps({**manifest, "checked": checked}, sort_keys=True))
        return
    out.print(f"[bold]{escape(pipeline)}/{escape(version)}[/]  created {manifest.get('created', '?')}  code {manifest.get('code_version', '?')}")
    out.print(f"public input fingerprint {str(manifest.get('public_input_fingerprint', '?'))[:16]}...")
    signer = str(manifest["seal"]["public_key"])[:16]
    out.print(f"seal: signed by {signer}... " + (
        "(a trusted key)" if trusted is not None else "(not checked against a trusted key: see the note above)"),
        highlight=False)
    print_ledger(manifest["ledger"])
    val = manifest.get("validation") or {}
    out.print(f"validation: {'passed' if val.get('success') else 'FAILED'}")
    if manifest.get("metrics"):
        print_metrics(manifest["metrics"])


def artifacts_verify(
    version: str | None = typer.Argument(None, help="version id (see `privgraph artifacts list`)"),
    all_versions: bool = typer.Option(False, "--all", help="verify every published version"),
    store: str | None = typer.Option(None, "--store", help="artifact store URI"),
    public_key: list[str] | None = typer.Option(None, "--public-key", help=PUBLIC_KEY_HELP),
    private_records: str = typer.Option("./private-records", "--private-records", help=PRIVATE_RECORDS_HELP),
    accept_unchecked_signer: bool = typer.Option(
        False, "--accept-unchecked-signer",
        help="with no trusted key at hand, accept a seal checked only against the key it names (no edit since "
             "signing, but not who signed); without it such a version is 'unchecked' and the command fails"),
) -> None:
    """Check stored versions: the owner's seal over the manifest (an edited ledger fails), the
    content hash in the version id, every object's sha256 and size, and that the manifest and
    every object are exactly the bytes privgraph writes for their content (nothing beside it),
    that the version holds nothing its manifest does not list, and the objects exactly those
    graph.json lists; with --all a version whose manifest cannot be read fails too."""
    with exit_on_failure():
        if (version is None) == (not all_versions):
            raise ConfigError("artifacts verify: give a VERSION or --all (not both)")
        trusted = _trusted_keys(public_key, private_records)
        _note_untrusted(trusted)
        st = _published_store(store)
        unreadable: list[str] = []  # --all: a version whose manifest cannot be read fails too
        if version is not None:
            targets = [st.find_version(version)]
        else:
            targets = [(i.pipeline, i.version) for i in st.list_versions(broken=unreadable)]
        failed: list[str] = []
        unchecked: list[str] = []  # sealed, but by a key nobody said to trust
        for what in unreadable:
            failed.append(what.split(":", 1)[0])
            err.print(f"[bold red]FAILED[/] {escape(' '.join(what.split()))} (its manifest cannot be read)", highlight=False,
                      soft_wrap=True)
        for pipeline, v in targets:
            try:
                r = st.verify_version(pipeline, v, trusted=trusted, sealed=True)
            except ArtifactIntegrityError as exc:
                failed.append(f"{pipeline}/{v}")
                err.print(f"[bold red]FAILED[/] {escape(one_line(exc))}", highlight=False, soft_wrap=True)
                continue
            word, whose = (("ok", "a trusted key") if trusted is not None else
                           ("ok", "signer not checked: accepted") if accept_unchecked_signer else
                           ("unchecked", "signer not checked against a trusted key"))
            if word == "unchecked":
                unchecked.append(f"{pipeline}/{v}")
            out.print(
                f"{word} {escape(pipeline)}/{escape(v)} ({r['objects']} objects, {r['bytes']} bytes, "
                f"sealed by {r['signer'][:16]}..., {whose})", highlight=False,
            )
        if failed:
            raise ArtifactIntegrityError(
                f"{len(failed)} of {len(targets) + len(unreadable)} versions failed verification: {', '.join(failed)}"
            )
        if unchecked:
            raise ArtifactIntegrityError(
                f"{len(unchecked)} version(s) intact but sealed by a key not checked against a trusted one "
                f"({', '.join(unchecked)}): pass --public-key (the owner's, from `privgraph artifacts public-key`), "
                "--private-records with the owner's key, or --accept-unchecked-signer"
            )
        if not targets:
            out.print("no versions")


def artifacts_public_key(
    private_records: str = typer.Option("./private-records", "--private-records", help=PRIVATE_RECORDS_HELP),
) -> None:
    """Print the owner's public signing key (64 hex), for consumers to pin with --public-key."""
    with exit_on_failure():
        # lazy: CLI start-up
        from privgraph.storage.private_record import owner_public_key, owner_signing_key_path

        key = owner_public_key(private_records)
        if key is None:
            raise ConfigError(
                f"no signing key at {owner_signing_key_path(private_records)}: it is created by the first "
                "`privgraph run` with these private records"
            )
    print(key)


def artifacts_gc(
    min_age_hours: float = typer.Option(24.0, "--min-age-hours", help="only staged versions older than this"),
    dry_run: bool = typer.Option(False, "--dry-run", help="list what would be removed, remove nothing"),
    store: str | None = typer.Option(None, "--store", help="artifact store URI"),
    private_records: str = typer.Option("./private-records", "--private-records", help=PRIVATE_RECORDS_HELP),
) -> None:
    """Remove staged versions a killed run left behind (objects without a manifest), the parts
    areas of partitioned releases never committed, the raw partitioned input a killed run left in
    the owner's staging area, and what a killed `privgraph ingest` left (its temporary directory;
    the range objects under a URI destination without graph.json); published versions and
    ingested graphs are never touched."""
    verb = "would remove" if dry_run else "removed"
    with exit_on_failure():
        if isinstance(min_age_hours, bool) or not min_age_hours >= 0:
            raise ConfigError(f"--min-age-hours must be >= 0, got {min_age_hours}")
        from privgraph.ingest.ingest_claims import sweep_ingests  # lazy: CLI start-up (pyarrow)
        from privgraph.privatize.partitioned import sweep_staging  # lazy: CLI start-up
        from privgraph.storage import gc_staged  # lazy: CLI start-up

        # the owner's raw leftovers first: their removal needs no store
        inputs = sweep_staging(Path(private_records) / "staging", dt.timedelta(hours=min_age_hours), dry_run=dry_run)
        for d in inputs:
            out.print(f"{verb} a killed run's partitioned input {escape(str(d))}", highlight=False)
        ingests = sweep_ingests(private_records, dry_run=dry_run)
        _print_ingests(ingests, dry_run)
        removed = gc_staged(_published_store(store), dt.timedelta(hours=min_age_hours), dry_run=dry_run)
    for p, v in removed:
        out.print(f"{verb} staged {escape(p)}/{v}", highlight=False)
    out.print(f"{len(removed)} staged version(s) {verb}" + (f", {len(inputs)} staged input(s)" if inputs else "")
              + (f", {len(ingests)} killed ingest(s)" if ingests else ""), highlight=False)
    failed = [s for s in ingests if s.error]
    if failed:
        with exit_on_failure():
            raise InfrastructureError(
                f"{failed[0].destination}: the range objects a killed ingest uploaded could not be deleted "
                f"({failed[0].error}); its claim is kept: run `privgraph artifacts gc` again"
                + (f" ({len(failed) - 1} more such ingest(s))" if len(failed) > 1 else ""))


def _print_ingests(ingests: list[Any], dry_run: bool) -> None:
    """One line per killed ingest swept (:func:`privgraph.ingest.ingest_claims.sweep_ingests`)."""
    verb = "would remove" if dry_run else "removed"
    for s in ingests:
        what = [f"its temporary directory {s.temp}"] if s.temp else []
        if s.objects and not s.error:
            what.append(f"{s.objects} range object(s) under it (no graph.json there)")
        out.print(escape(f"{verb} a killed ingest's leftovers in {s.destination}: " + ("; ".join(what) or "none")),
                  highlight=False, soft_wrap=True)
