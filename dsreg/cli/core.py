"""Registry commands: init, add, ls, show, log, tag, checkout, verify, gc."""

from __future__ import annotations

import json as _json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsreg import api
from dsreg._util.lazy import lazy_imports
from dsreg.api import registry as registry_api
from dsreg.cli._command import command
from dsreg.cli._common import (
    command_line,
    emit_json,
    json_shown,
    lazy_progress_bar,
    logged_run,
    out,
    printable,
    progress_bar,
    say,
    short,
    table,
    write_json,
)

# The label-quality lines only a show prints.
with lazy_imports():
    from dsreg.cli import evaltext

if TYPE_CHECKING:
    from dsreg.api import (
        AddResult,
        CheckoutResult,
        GcResult,
        ObjectInfo,
        RefLog,
        Registry,
        RevisionInfo,
        TagList,
        TagResult,
        VerifyResult,
    )


@command(
    registry_api.init,
)
def init(*, json: bool, **options: Any) -> None:
    """Create a registry: --registry PATH, else $DSREG_HOME, else ./.dsreg."""
    show_registry(registry_api.init(**options), json=json)


def show_registry(reg: Registry, *, json: bool) -> None:
    if json:
        emit_json({"registry": str(reg.root)})
        return
    out(str(reg.root))
    say(f"Initialised a dsreg registry at {reg.root}")


@command(
    registry_api.add,
)
def add(dataset: str, path: Path | None, *, quiet: bool, json: bool, **options: Any) -> None:
    """Add a test set as an immutable snapshot (content-addressed, deduplicated)."""
    show_added(logged_run(registry_api.add, dataset, path, quiet=quiet, **options), json=json)


def show_added(res: AddResult, *, json: bool) -> None:
    if json_shown(res, json=json):
        return
    out(res.revision)
    at = f"{res.dataset}@{res.tag}" if res.tag else res.dataset
    say(
        f"Added {at}: {res.rows} examples, {len(res.classes)} classes, {res.files} files "
        f"({res.new_objects} new); snapshot {short(res.snapshot)}, revision {short(res.revision)}"
    )
    if not res.tag:
        # Tags are the roots: say what an untagged revision means and how to name it.
        say(
            "Not tagged: 'dsreg ls' does not list it and 'dsreg gc' may remove it; name it "
            f"with: dsreg tag {res.dataset}@<tag> {res.revision}"
        )


@command(
    registry_api.ls,
)
def ls(
    *, remote: str | None, registry: Path | None, quiet: bool, json: bool, **options: Any
) -> None:
    """List datasets, their tags and short revision digests (with --remote, a remote's)."""
    with lazy_progress_bar(quiet=quiet) as hook:
        tags = registry_api.ls(remote=remote, registry=registry, progress=hook, **options)
    # Datasets whose every tag was deleted are not listed, but their revisions remain (gc
    # keeps what a log line younger than its expiry names): say so rather than "no datasets".
    listed = remote is not None or json
    untagged = [] if listed else registry_api.untagged_datasets(registry=registry)
    show_tags(tags, untagged, remote=remote, json=json)


def show_tags(tags: TagList, untagged: list[str], *, remote: str | None, json: bool) -> None:
    if tags.omitted:
        say(
            f"Listed the first {tags.named - tags.omitted:,} of the {tags.named:,} tags remote "
            f"{remote} names (by dataset and tag); --max-tags N or $DSREG_MAX_TAGS raises the "
            "cap (0: no cap)."
        )
    for ds, r in tags.retired.items():
        say(f"Dataset {ds} is retired: {printable(r['reason'])}; use {r['successor']} instead")
    for name, why in tags.unusable.items():
        say(f"Not applied: the mark of {name} on remote {remote} {printable(why)}")
    if json:
        emit_json([r.to_dict() for r in tags])
        return
    if tags:
        rows = [
            [r.dataset, r.tag + (" (yanked)" if r.yanked else ""), short(r.revision)] for r in tags
        ]
        out(table(rows, ["DATASET", "TAG", "REVISION"]))
    elif not untagged:
        say("No datasets yet: add one with 'dsreg add'.")
    if untagged:
        names, first = ", ".join(untagged), untagged[0]
        say(
            (
                f"Not listed, having a ref log but no tag left: {names}. "
                if tags
                else f"No tags: {names} {'has' if len(untagged) == 1 else 'have'} a ref log "
                "but no tag left. "
            )
            + "What a deleted tag named stays until no log line younger than gc's log expiry "
            f"names it: 'dsreg log {first}' shows what each tag named, and "
            f"'dsreg tag {first}@NAME {first}@DIGEST' brings one back."
        )


@command(
    registry_api.show,
)
def show(spec: str, *, json: bool, **options: Any) -> None:
    """Show a revision (manifest, rows, classes, overlays, full digest), or any stored manifest.
    With --remote, a remote's revision: its manifests and tables are fetched, not its payloads."""
    info = registry_api.show(spec, **options)
    if json_shown(info, json=json):
        return
    if isinstance(info, api.ObjectInfo):
        show_object(info)
    else:
        show_revision(info)


def show_revision(info: RevisionInfo) -> None:
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
    for line in _question_lines(info):
        out(line)
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
    if info.marks and "yanked" in info.marks:
        out(f"yanked    {printable(info.marks['yanked']['reason'])}")
    if info.marks and "retired" in info.marks:
        r = info.marks["retired"]
        out(f"retired   {printable(r['reason'])}; successor {r['successor']}")
    for o in info.overlays:
        note = " (unvalidated: corrected by the detector)" if o["kind"] == "detected" else ""
        by = printable(str(o["producer"]))
        out(f"overlay   {o['digest']}  {o['kind']}{note}, {o['rows']} rows, by {by}")
    for line in evaltext.quality_lines(info.label_quality):
        out(line)


def _question_lines(info: RevisionInfo) -> list[str]:
    """A question set's task and first questions, each cut to a line of text."""
    if info.task == "multiclass":
        return []
    how = f", answers compared as {info.normalization}" if info.normalization else ""
    lines = [f"task      {info.task}{how}"]
    for q in info.questions:
        text = " ".join(str(q["question"]).split())
        choices = q.get("choices")
        if choices:
            pairs = zip(info.classes, choices, strict=False)
            text += " " + " ".join(f"({letter}) {' '.join(str(c).split())}" for letter, c in pairs)
        if len(text) > 150:
            text = text[:149] + "…"
        lines.append(f"question  row {q['row']}: {printable(text)} -> {printable(q['label'])}")
    return lines


def show_object(info: ObjectInfo) -> None:
    out(f"{info.type}  {info.digest}")
    if info.dataset is not None:
        out(f"dataset   {info.dataset}")
    if info.manifest is not None:
        write_json(_json.dumps(info.manifest, indent=2, sort_keys=True) + "\n")
    elif info.size is not None:
        out(f"size      {info.size} bytes")


@command(
    registry_api.log,
)
def log(dataset: str, *, json: bool, **options: Any) -> None:
    """Who moved which tag when (the append-only ref log), oldest first. Damaged lines (torn by
    a crash, not UTF-8, of the wrong types) are skipped and counted; 'dsreg verify' names them."""
    show_log(registry_api.log(dataset, **options), json=json)


def show_log(entries: RefLog, *, json: bool) -> None:
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


@command(
    registry_api.tag,
)
def tag(new: str, source: str | None, *, json: bool, **options: Any) -> None:
    """Name a revision, as git tag: the new name first. --delete removes a name."""
    show_tagged(registry_api.tag(new, source, command=command_line(), **options), json=json)


def show_tagged(res: TagResult, *, json: bool) -> None:
    if json_shown(res, json=json):
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


@command(
    registry_api.checkout,
)
def checkout(spec: str, path: Path, *, quiet: bool, json: bool, **options: Any) -> None:
    """Materialise a revision as files plus a pin file PATH/.dsreg.json; switching a checkout
    touches only the files that differ, and finishes one that was interrupted. With --remote,
    what the revision lacks here is fetched from that remote, verified, first."""
    with progress_bar(quiet=quiet) as hook:
        res = registry_api.checkout(spec, path, progress=hook, **options)
    show_checked_out(res, spec, json=json)


def show_checked_out(res: CheckoutResult, spec: str, *, json: bool) -> None:
    if json_shown(res, json=json):
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


@command(
    registry_api.verify,
)
def verify(spec: str | None, *, quiet: bool, json: bool, **options: Any) -> None:
    """Re-hash objects and check manifests against their schemas, and every tag and log line;
    exit 1 on any problem. Payloads a clone has not fetched yet are counted apart: not damage."""
    with progress_bar(quiet=quiet) as hook:
        res = registry_api.verify(spec, progress=hook, **options)
    show_verified(res, json=json)
    if not res.ok:
        sys.exit(1)


def show_verified(res: VerifyResult, *, json: bool) -> None:
    if json_shown(res, json=json):
        return
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


@command(
    registry_api.gc,
)
def gc(*, dry_run: bool, quiet: bool, json: bool, **options: Any) -> None:
    """Remove objects that no tag, and no log line younger than the log's expiry (a moved
    tag's old value, an overlay made), reaches."""
    with progress_bar(quiet=quiet) as hook:
        res = registry_api.gc(dry_run=dry_run, progress=hook, **options)
    show_collected(res, dry_run=dry_run, json=json)


def show_collected(res: GcResult, *, dry_run: bool, json: bool) -> None:
    if json_shown(res, json=json):
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
