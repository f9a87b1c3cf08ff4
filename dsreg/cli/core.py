"""Registry commands: init, add, ls, show, log, tag, checkout, verify, gc."""

from __future__ import annotations

import gc as _gc
from pathlib import Path
from typing import Annotated, Any

import typer

from dsreg.cli._common import (
    CONTEXT,
    JsonOpt,
    RegistryOpt,
    command_line,
    emit_json,
    out,
    progress_bar,
    registry,
    say,
    table,
)
from dsreg.errors import InvalidInputError
from dsreg.model.manifests import Overlay, Revision, Snapshot
from dsreg.objects.digest import PREFIX, short
from dsreg.repo.registry import Registry


def register(app: typer.Typer) -> None:
    for fn in (init, add, ls, show, log, tag, checkout, verify, gc):
        app.command(context_settings=CONTEXT)(fn)


def init(registry_path: RegistryOpt = None, json: JsonOpt = False) -> None:
    """Create a registry: --registry PATH, else $DSREG_HOME, else ./.dsreg."""
    reg = Registry.init(registry_path)
    if json:
        emit_json({"registry": str(reg.root)})
    else:
        out(str(reg.root))
        say(f"Initialised a dsreg registry at {reg.root}")


def add(
    dataset: Annotated[str, typer.Argument(help="Dataset name, e.g. imagenet-val.")],
    path: Annotated[
        Path | None, typer.Argument(help="An ImageFolder tree: one folder per class.")
    ] = None,
    labels: Annotated[
        Path | None, typer.Option(help="Label-only set: labels as .npy, .csv or .parquet.")
    ] = None,
    table_: Annotated[
        Path | None, typer.Option("--table", help="A table of examples (.parquet or .csv).")
    ] = None,
    id_column: Annotated[
        str, typer.Option(help="With --table: the example id column.")
    ] = "example_id",
    label_column: Annotated[str, typer.Option(help="With --table: the label column.")] = "label",
    files: Annotated[
        Path | None, typer.Option(help="With --table: payload files, found at FILES/<example id>.")
    ] = None,
    classes: Annotated[
        Path | None, typer.Option(help="Class names, one per line (line i is class i).")
    ] = None,
    tag: Annotated[str | None, typer.Option(help="Tag the new revision, e.g. original.")] = None,
    force: Annotated[
        bool, typer.Option(help="Move --tag if it exists (the log keeps it).")
    ] = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Add a test set as an immutable snapshot (content-addressed, deduplicated)."""
    given = [x for x in (path, labels, table_) if x is not None]
    if len(given) != 1:
        raise InvalidInputError(
            "give exactly one source: a folder PATH (ImageFolder), --labels FILE or --table FILE"
        )
    if files is not None and table_ is None:
        raise InvalidInputError("--files goes with --table; an ImageFolder tree holds its files")
    if path is not None and classes is not None:
        raise InvalidInputError("--classes goes with --labels or --table; folders name classes")
    reg = registry(registry_path)
    if path is not None:
        # The folder's path stays light (no numpy, pyarrow or schema validator) until it must
        # store something: re-adding an unchanged tree is answered from the scan.
        from dsreg.ingest.tree import add_tree
        from dsreg.ingest.treescan import scan_tree

        # Tens of thousands of small records and no cycles among them: the cyclic collector
        # would only walk them, again and again, while they are built.
        gc_was_on = _gc.isenabled()
        _gc.disable()
        try:
            scan = scan_tree(path)
            with progress_bar() as hook:
                res = add_tree(
                    reg, dataset, scan, tag=tag, force=force, progress=hook, command=command_line()
                )
        finally:
            if gc_was_on:
                _gc.enable()
    else:
        from dsreg.ingest import sources
        from dsreg.ingest.snapshot import add_source

        names = sources.read_classes(classes) if classes is not None else None
        if labels is not None:
            src = sources.scan_labels(labels, classes=names)
        else:
            assert table_ is not None
            src = sources.scan_table(
                table_, id_column=id_column, label_column=label_column, classes=names, files=files
            )
        with progress_bar() as hook:
            res = add_source(
                reg, dataset, src, tag=tag, force=force, progress=hook, command=command_line()
            )
    if json:
        emit_json(res.to_dict())
        return
    out(res.revision)
    at = f"{dataset}@{tag}" if tag else dataset
    say(
        f"Added {at}: {res.rows} examples, {len(res.classes)} classes, {res.files} files "
        f"({res.new_objects} new); snapshot {short(res.snapshot)}, revision {short(res.revision)}"
    )


def ls(registry_path: RegistryOpt = None, json: JsonOpt = False) -> None:
    """List datasets, their tags and short revision digests."""
    reg = registry(registry_path)
    rows = [{"dataset": ds, "tag": t, "revision": d} for ds, t, d in reg.refs.all()]
    if json:
        emit_json(rows)
        return
    if not rows:
        say("No datasets yet: add one with 'dsreg add'.")
        return
    out(
        table(
            [[r["dataset"], r["tag"], short(r["revision"])] for r in rows],
            ["DATASET", "TAG", "REVISION"],
        )
    )


def _describe_object(reg: Registry, digest: str) -> dict[str, Any]:
    if not reg.is_manifest(digest):
        return {
            "digest": digest,
            "type": "object",
            "size": reg.store.verified_path(digest).stat().st_size,
        }
    m = reg.manifest(digest)
    d: dict[str, Any] = {
        "digest": digest,
        "type": type(m).__name__.lower(),
        "manifest": m.to_dict(),
    }
    if isinstance(m, Overlay):
        d["dataset"] = reg.snapshot(m.base).dataset
    return d


def show(
    spec: Annotated[str, typer.Argument(help="dataset@tag, dataset@<prefix>, or any digest.")],
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Show a revision (manifest, rows, classes, overlays, full digest), or any stored manifest."""
    from dsreg.views.dataset import Dataset

    reg = registry(registry_path)
    if "@" not in spec:
        digest = reg.resolve_object(spec)
        m = reg.manifest(digest) if reg.is_manifest(digest) else None
        if not isinstance(m, Revision | Snapshot):
            info = _describe_object(reg, digest)
            if json:
                emit_json(info)
            else:
                _render_object(info)
            return
        spec = digest
    ds = Dataset(reg, reg.resolve(spec))
    info = ds.describe()
    if json:
        emit_json(info)
        return
    out(f"revision  {info['revision']}")
    out(f"dataset   {info['dataset']}" + (f"@{info['tag']}" if info["tag"] else ""))
    out(f"view      {info['view']}")
    out(f"snapshot  {info['snapshot']}")
    out(f"examples  {info['examples']}")
    out(f"rows      {info['rows']} of {info['snapshot_rows']}")
    k = len(info["classes"])
    shown = ", ".join(info["classes"][:10]) + (f", … ({k} in all)" if k > 10 else "")
    out(f"classes   {k}: {shown}")
    out(f"source    {info['source']}")
    for o in info["overlays"]:
        note = " (unvalidated: corrected by the detector)" if o["kind"] == "detected" else ""
        out(f"overlay   {o['digest']}  {o['kind']}{note}, {o['rows']} rows, by {o['producer']}")


def _render_object(info: dict[str, Any]) -> None:
    out(f"{info['type']}  {info['digest']}")
    if "dataset" in info:
        out(f"dataset   {info['dataset']}")
    if "manifest" in info:
        import json as _json

        out(_json.dumps(info["manifest"], indent=2, sort_keys=True))
    elif "size" in info:
        out(f"size      {info['size']} bytes")


def log(
    dataset: Annotated[str, typer.Argument(help="Dataset name.")],
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Who moved which tag when (the append-only ref log), oldest first."""
    from dsreg.model.names import check_name

    reg = registry(registry_path)
    check_name(dataset, what="dataset name")
    entries = reg.refs.log(dataset)
    if not entries and dataset not in reg.refs.datasets():
        from dsreg.errors import RevisionNotFoundError

        raise RevisionNotFoundError(
            f"no dataset {dataset!r} in this registry ({reg.root}); see 'dsreg ls'"
        )
    if json:
        emit_json([e.to_dict() for e in entries])
        return
    rows = [
        [
            e.time,
            e.user,
            e.event,
            e.tag or "",
            short(e.old) if e.old else "-",
            short(e.new) if e.new else "-",
            e.command,
        ]
        for e in entries
    ]
    out(table(rows, ["TIME", "USER", "EVENT", "TAG", "OLD", "NEW", "COMMAND"]))


def tag(
    new: Annotated[str, typer.Argument(help="The tag to create: dataset@tag.")],
    source: Annotated[str, typer.Argument(help="What it names: a spec or digest.")],
    overlay: Annotated[
        list[str] | None,
        typer.Option(
            "--overlay",
            help="Add an overlay (digest or prefix); repeat for several, applied in order.",
        ),
    ] = None,
    view: Annotated[
        str | None,
        typer.Option(help="original, cleaned, corrected or honeypot (default: the source's)."),
    ] = None,
    force: Annotated[
        bool, typer.Option(help="Move the tag if it exists (the log keeps it).")
    ] = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Name a revision, as git tag: the new name first."""
    from dsreg.ops.tag import make_tag

    reg = registry(registry_path)
    res = make_tag(
        reg, new, source, overlays=overlay or (), view=view, force=force, command=command_line()
    )
    if json:
        emit_json(res.to_dict())
        return
    out(res.revision)
    moved = (
        f" (moved from {short(res.previous)})"
        if res.previous and res.previous != res.revision
        else ""
    )
    say(f"Tagged {res.dataset}@{res.tag} -> {short(res.revision)} [{res.view}]{moved}")


def checkout(
    spec: Annotated[
        str, typer.Argument(help="The revision: dataset@tag, dataset@<prefix>, blake3:<hex>.")
    ],
    path: Annotated[Path, typer.Argument(help="The folder to fill (created if missing).")],
    link: Annotated[
        str | None,
        typer.Option(help="hardlink, symlink, copy or reflink (default: config, else hardlink)."),
    ] = None,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Materialise a revision as files plus a pin file PATH/.dsreg.json; switching a checkout
    touches only the files that differ. Hard-linked files are read-only: they are the store's."""
    from dsreg.ops.checkout import checkout as do_checkout

    reg = registry(registry_path)
    chosen = link or reg.config.get("core", {}).get("checkout_link", "hardlink")
    if chosen not in ("hardlink", "symlink", "copy", "reflink"):
        raise InvalidInputError(
            f"unknown --link {chosen!r}; choose hardlink, symlink, copy or reflink"
        )
    resolved = reg.resolve(spec)
    with progress_bar() as hook:
        res = do_checkout(reg, resolved, path, link=chosen, progress=hook)  # type: ignore[arg-type]
    if json:
        emit_json(res.to_dict())
        return
    out(res.revision)
    say(
        f"Checked out {spec} at {res.path}: {res.files} files "
        f"({res.added} written, {res.removed} removed, {res.unchanged} unchanged, {res.link})"
    )


def verify(
    spec: Annotated[str | None, typer.Argument(help="Verify what this revision reaches.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Verify every object (the default).")] = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Re-hash objects and check manifests against their schemas; exit 1 on any problem."""
    from dsreg.ops.maintenance import verify as do_verify

    if spec is not None and all_:
        raise InvalidInputError("give a SPEC or --all, not both")
    reg = registry(registry_path)
    with progress_bar() as hook:
        res = do_verify(reg, specs=[spec] if spec else [], progress=hook)
    if json:
        emit_json(res.to_dict())
    else:
        for p in res.problems:
            out(f"{p.digest}  {p.problem}")
        say(
            f"Checked {res.checked} objects: "
            + ("all intact." if res.ok else f"{len(res.problems)} problems.")
        )
    if not res.ok:
        raise typer.Exit(1)


def gc(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")
    ] = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Remove objects that no tag (and no recorded overlay) reaches."""
    from dsreg.ops.maintenance import collect_garbage

    reg = registry(registry_path)
    res = collect_garbage(reg, dry_run=dry_run)
    if json:
        emit_json(res.to_dict())
        return
    for d in res.removed:
        out(d)
    verb = "Would remove" if dry_run else "Removed"
    say(f"{verb} {len(res.removed)} objects ({res.bytes} bytes); kept {res.kept}.")


_ = PREFIX
