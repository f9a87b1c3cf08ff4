"""Registry commands: init, add, ls, show, log, tag, checkout, verify, gc."""

from __future__ import annotations

import json as _json
from pathlib import Path
from typing import Annotated

import typer

import dsreg
from dsreg.cli._common import (
    CONTEXT,
    AllowLookalikeIdsOpt,
    JsonOpt,
    QuietOpt,
    ReadRemoteOpt,
    RegistryOpt,
    command_line,
    emit_json,
    lazy_progress_bar,
    out,
    progress_bar,
    say,
    short,
    table,
    write_json,
)
from dsreg.cli._text import printable
from dsreg.cli.evaltext import quality_lines


def register(app: typer.Typer) -> None:
    for fn in (init, add, ls, show, log, tag, checkout, verify, gc):
        app.command(context_settings=CONTEXT)(fn)


def init(registry_path: RegistryOpt = None, json: JsonOpt = False) -> None:
    """Create a registry: --registry PATH, else $DSREG_HOME, else ./.dsreg."""
    reg = dsreg.init(registry=registry_path)
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
    ids: Annotated[
        Path | None,
        typer.Option(
            help="With --labels: the example ids in row order, ids.txt (one per line) or "
            "ids.json (a list of strings); default: the row numbers."
        ),
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
    citation: Annotated[
        Path | None,
        typer.Option(
            help="The dataset creators' reference, a BibTeX file (.bib): recorded in the "
            "snapshot, repeated by every 'dsreg cite' of its revisions."
        ),
    ] = None,
    credit: Annotated[
        str | None,
        typer.Option(help="The dataset creators' reference as plain text (as --citation)."),
    ] = None,
    allow_lookalike_ids: AllowLookalikeIdsOpt = False,
    quiet: QuietOpt = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Add a test set as an immutable snapshot (content-addressed, deduplicated)."""
    with progress_bar(quiet=quiet) as hook:
        res = dsreg.add(
            dataset,
            path,
            labels=labels,
            table=table_,
            id_column=id_column,
            label_column=label_column,
            files=files,
            classes=classes,
            ids=ids,
            tag=tag,
            force=force,
            citation=citation,
            credit=credit,
            progress=hook,
            command=command_line(),
            registry=registry_path,
            allow_lookalike_ids=allow_lookalike_ids,
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
    if not tag:
        # Tags are the roots: say what an untagged revision means and how to name it.
        say(
            "Not tagged: 'dsreg ls' does not list it and 'dsreg gc' may remove it; name it "
            f"with: dsreg tag {dataset}@<tag> {res.revision}"
        )


def ls(
    remote: ReadRemoteOpt = None,
    max_tags: Annotated[
        int | None,
        typer.Option(
            "--max-tags",
            min=0,
            help="With --remote: read at most N tags, the first by dataset and tag (default "
            "$DSREG_MAX_TAGS, else 10,000; 0 reads every one).",
            show_default=False,
        ),
    ] = None,
    registry_path: RegistryOpt = None,
    quiet: QuietOpt = False,
    json: JsonOpt = False,
) -> None:
    """List datasets, their tags and short revision digests (with --remote, a remote's)."""
    if remote is None and max_tags is not None:
        raise dsreg.InvalidInputError("--max-tags caps a remote's listing: give --remote too")
    with lazy_progress_bar(quiet=quiet) as hook:
        refs = dsreg.ls(remote=remote, max_tags=max_tags, progress=hook, registry=registry_path)
    if refs.omitted:
        say(
            f"Listed the first {refs.named - refs.omitted:,} of the {refs.named:,} tags remote "
            f"{remote} names (by dataset and tag); --max-tags N or $DSREG_MAX_TAGS raises the "
            "cap (0: no cap)."
        )
    if json:
        emit_json([r.to_dict() for r in refs])
        return
    # Datasets whose every tag was deleted are not listed, but their revisions remain (gc
    # keeps what a log line younger than its expiry names): say so rather than "no datasets".
    untagged = [] if remote is not None else dsreg.untagged_datasets(registry=registry_path)
    if refs:
        out(
            table(
                [[r.dataset, r.tag, short(r.revision)] for r in refs],
                ["DATASET", "TAG", "REVISION"],
            )
        )
    elif not untagged:
        say("No datasets yet: add one with 'dsreg add'.")
        return
    if untagged:
        names, first = ", ".join(untagged), untagged[0]
        say(
            (
                f"Not listed, having a ref log but no tag left: {names}. "
                if refs
                else f"No tags: {names} {'has' if len(untagged) == 1 else 'have'} a ref log "
                "but no tag left. "
            )
            + "What a deleted tag named stays until no log line younger than gc's log expiry "
            f"names it: 'dsreg log {first}' shows what each tag named, and "
            f"'dsreg tag {first}@NAME {first}@DIGEST' brings one back."
        )


def show(
    spec: Annotated[str, typer.Argument(help="dataset@tag, dataset@<prefix>, or any digest.")],
    remote: ReadRemoteOpt = None,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Show a revision (manifest, rows, classes, overlays, full digest), or any stored manifest.
    With --remote, a remote's revision: its manifests and tables are fetched, not its payloads."""
    info = dsreg.show(spec, remote=remote, registry=registry_path)
    if json:
        emit_json(info.to_dict())
        return
    if isinstance(info, dsreg.ObjectInfo):
        _render_object(info)
        return
    out(f"revision  {info.revision}")
    out(f"dataset   {info.dataset}" + (f"@{info.tag}" if info.tag else ""))
    out(f"view      {info.view}")
    out(f"snapshot  {info.snapshot}")
    out(f"examples  {info.examples}")
    out(f"rows      {info.rows} of {info.snapshot_rows}")
    if info.several_labels is not None:
        out(f"labels    {info.several_labels} rows with more than one label that fits")
    k = len(info.classes)
    shown = ", ".join(map(printable, info.classes[:10])) + (f", … ({k} in all)" if k > 10 else "")
    out(f"classes   {k}: {shown}")
    source = dict(info.source)
    credit = source.pop("credit", None) or {}
    out(f"source    {source}")
    if "text" in credit:
        out(f"credit    {printable(credit['text'])}")
    if "bibtex" in credit:
        keys = [
            line.split("{", 1)[1].rstrip(",")
            for line in credit["bibtex"].splitlines()
            if line.startswith("@")
        ]
        out(f"credit    BibTeX: {', '.join(map(printable, keys))} (dsreg cite repeats the entries)")
    for o in info.overlays:
        note = " (unvalidated: corrected by the detector)" if o["kind"] == "detected" else ""
        by = printable(str(o["producer"]))
        out(f"overlay   {o['digest']}  {o['kind']}{note}, {o['rows']} rows, by {by}")
    for line in quality_lines(info.label_quality):
        out(line)


def _render_object(info: dsreg.ObjectInfo) -> None:
    out(f"{info.type}  {info.digest}")
    if info.dataset is not None:
        out(f"dataset   {info.dataset}")
    if info.manifest is not None:
        write_json(_json.dumps(info.manifest, indent=2, sort_keys=True) + "\n")
    elif info.size is not None:
        out(f"size      {info.size} bytes")


def log(
    dataset: Annotated[str, typer.Argument(help="Dataset name.")],
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Who moved which tag when (the append-only ref log), oldest first. Damaged lines (torn by
    a crash, not UTF-8, of the wrong types) are skipped and counted; 'dsreg verify' names them."""
    entries = dsreg.log(dataset, registry=registry_path)
    if json:
        emit_json([e.to_dict() for e in entries])
    else:
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
    if entries.damaged:
        n = len(entries.damaged)
        say(
            f"Skipped {n} damaged log line{'s' if n != 1 else ''} (line "
            + ", ".join(str(d.line) for d in entries.damaged[:5])
            + (", …" if n > 5 else "")
            + "); 'dsreg verify' names them."
        )


def tag(
    new: Annotated[str, typer.Argument(help="The tag to create (or delete): dataset@tag.")],
    source: Annotated[
        str | None, typer.Argument(help="What it names: a spec or digest (not with --delete).")
    ] = None,
    overlay: Annotated[
        list[str] | None,
        typer.Option(
            "--overlay",
            help="Add an overlay (digest or prefix); repeat for several, applied in order.",
        ),
    ] = None,
    view: Annotated[
        str | None,
        typer.Option(
            help="original, cleaned, corrected, honeypot or multilabel (default: the source's)."
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option(help="Move the tag if it exists (the log keeps it).")
    ] = False,
    delete: Annotated[
        bool,
        typer.Option(
            "--delete",
            "-d",
            help="Delete the tag, as git tag -d. Logged; no object is removed: gc decides, "
            "once the log line is older than the log's expiry.",
        ),
    ] = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Name a revision, as git tag: the new name first. --delete removes a name."""
    res = dsreg.tag(
        new,
        source,
        overlays=overlay,
        view=view,
        force=force,
        delete=delete,
        command=command_line(),
        registry=registry_path,
    )
    if json:
        emit_json(res.to_dict())
        return
    out(res.revision)
    if res.deleted:
        say(
            f"Deleted tag {res.dataset}@{res.tag} (was {short(res.revision)}); the log keeps it "
            f"and its objects stay until 'dsreg gc' finds nothing else keeps them"
        )
        return
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
        typer.Option(
            help="reflink (copy-on-write, else a copy), copy, hardlink or symlink (default: "
            "config, else reflink). Hard and symbolic links are the store's own files: editing "
            "one corrupts the store."
        ),
    ] = None,
    remote: ReadRemoteOpt = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Re-hash every object before it is linked, even one whose stat is unchanged "
            "since it was last verified (a copy always re-hashes).",
        ),
    ] = False,
    quiet: QuietOpt = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Materialise a revision as files plus a pin file PATH/.dsreg.json; switching a checkout
    touches only the files that differ, and finishes one that was interrupted. With --remote,
    what the revision lacks here is fetched from that remote, verified, first."""
    with progress_bar(quiet=quiet) as hook:
        res = dsreg.checkout(
            spec,
            path,
            link=link,
            remote=remote,
            verify=verify,
            progress=hook,
            registry=registry_path,
        )
    if json:
        emit_json(res.to_dict())
        return
    out(res.revision)
    if res.labels_csv is not None:
        # A label-only set comes back as one file: say which, and what is in it.
        say(
            f"Checked out {spec} at {res.path}: wrote {res.labels_csv} ({res.labels_rows} rows: "
            "row, example_id, label, label_name, given_label, verdict)"
            + (f"; removed {res.removed} files" if res.removed else "")
        )
        return
    say(
        f"Checked out {spec} at {res.path}: {res.files} files "
        f"({res.added} written, {res.removed} removed, {res.unchanged} unchanged, {res.link})"
    )


def verify(
    spec: Annotated[str | None, typer.Argument(help="Verify what this revision reaches.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Verify every object (the default).")] = False,
    quiet: QuietOpt = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Re-hash objects and check manifests against their schemas, and every tag and log line;
    exit 1 on any problem. Payloads a clone has not fetched yet are counted apart: not damage."""
    with progress_bar(quiet=quiet) as hook:
        res = dsreg.verify(spec, all=all_, progress=hook, registry=registry_path)
    if json:
        emit_json(res.to_dict())
    else:
        for p in res.problems:
            out(f"{printable(p.digest)}  {printable(p.problem)}")
        if res.not_fetched:
            n = len(res.not_fetched)
            say(
                f"{n} payload{'s' if n != 1 else ''} not fetched yet: they come from remote "
                f"{res.remote!r} on demand ('dsreg pull' fetches them all)."
            )
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
    prune_log_older_than: Annotated[
        str | None,
        typer.Option(
            "--prune-log-older-than",
            metavar="DURATION",
            help="Let log lines older than DURATION (90d, 2w, 12h, now) keep nothing: what "
            "only they name is removed (default: the config's [gc] log_expiry, else 90d).",
        ),
    ] = None,
    quiet: QuietOpt = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Remove objects that no tag, and no log line younger than the log's expiry (a moved
    tag's old value, an overlay made), reaches."""
    with progress_bar(quiet=quiet) as hook:
        res = dsreg.gc(
            dry_run=dry_run,
            prune_log_older_than=prune_log_older_than,
            progress=hook,
            registry=registry_path,
        )
    if json:
        emit_json(res.to_dict())
        return
    for d in res.removed:
        out(d)
    verb = "Would remove" if dry_run else "Removed"
    kept = f"kept {res.kept}"
    if res.logged:
        age = "" if res.log_expiry == "never" else f" younger than {res.log_expiry}"
        kept += f", {res.logged} named by log lines{age} (--prune-log-older-than lets them go)"
    say(f"{verb} {len(res.removed)} objects ({res.bytes} bytes); {kept}.")
    if res.damaged_log_lines:
        say(f"Skipped {res.damaged_log_lines} damaged log lines; 'dsreg verify' names them.")
