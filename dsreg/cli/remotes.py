"""Remote commands: remote add / ls / remove, push, pull, clone, import-dvc."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsreg.api import remotes as remotes_api
from dsreg.cli._command import command
from dsreg.cli._common import (
    emit_json,
    json_shown,
    logged_run,
    out,
    say,
    short,
    table,
)

if TYPE_CHECKING:
    from dsreg.api import CloneResult, ImportResult, PullResult, PushResult, RemoteConfig


def size(n: float) -> str:
    """A byte count as shown: B, KB, MB or GB (powers of 1000)."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


@command(
    remotes_api.remote_add,
    name="add",
)
def remote_add(*, json: bool, **options: Any) -> None:
    """Add a remote (recorded in config.toml; nothing is contacted)."""
    res = remotes_api.remote_add(**options)
    if json_shown(res, json=json):
        return
    say(f"Added remote {res.name} -> {res.url}" + (" (default)" if res.default else ""))


@command(
    remotes_api.remote_ls,
    name="ls",
)
def remote_ls(*, json: bool, **options: Any) -> None:
    """List remotes: name, URL, options; * marks the default."""
    show_remotes(remotes_api.remote_ls(**options), json=json)


def show_remotes(remotes: list[RemoteConfig], *, json: bool) -> None:
    if json:
        emit_json([r.to_dict() for r in remotes])
        return
    if not remotes:
        say("No remotes: add one with 'dsreg remote add NAME URL'.")
        return
    rows = [
        [
            ("* " if r.default else "  ") + r.name,
            r.url,
            " ".join(f"{k}={v}" for k, v in sorted(r.options.items())),
        ]
        for r in remotes
    ]
    out(table(rows, ["  NAME", "URL", "OPTIONS"]))


@command(
    remotes_api.remote_remove,
    name="remove",
)
def remote_remove(*, json: bool, **options: Any) -> None:
    """Forget a remote (nothing on the remote is deleted)."""
    res = remotes_api.remote_remove(**options)
    if json_shown(res, json=json):
        return
    say(f"Removed remote {res.name} ({res.url})")


@command(
    remotes_api.push,
)
def push(specs: list[str] | None, *, quiet: bool, json: bool, **options: Any) -> None:
    """Send revisions, everything they reach, then their tags; nothing the remote holds."""
    res = logged_run(remotes_api.push, specs, quiet=quiet, lazy_bar=True, **options)
    show_pushed(res, json=json)


@command(
    remotes_api.publish,
)
def publish(to: str | None, *, quiet: bool, json: bool, **options: Any) -> None:
    """Push every tag, then write a static website of the registry there (index, a page per
    dataset and per tag, Croissant JSON-LD and the files it names); the pages link relatively,
    for any static server or file://, and with --url the Croissant documents load by URL."""
    res = logged_run(remotes_api.publish, to, quiet=quiet, lazy_bar=True, **options)
    if json_shown(res, json=json):
        return
    show_pushed(res.push, json=False)
    site = res.site
    say(
        f"Published {len(site.datasets)} datasets, {len(site.pages)} pages; the index is "
        f"{res.push.url.rstrip('/')}/{site.index}; the pages name {site.url}"
    )
    if not site.absolute:
        say(
            "Note: without --url the Croissant documents link their files relative to "
            "themselves, so they load from a copy on disk, not by URL; publish again with "
            "--url URL (where readers reach the site) for documents that load by URL"
        )


@command(
    remotes_api.pull,
)
def pull(specs: list[str] | None, *, quiet: bool, json: bool, **options: Any) -> None:
    """Fetch revisions and what they reach that is missing here, verified; then set the tags."""
    res = logged_run(remotes_api.pull, specs, quiet=quiet, lazy_bar=True, **options)
    show_pulled(res, json=json)


@command(
    remotes_api.clone,
)
def clone(url: str, path: Path | None, *, quiet: bool, json: bool, **options: Any) -> None:
    """A new registry with the remote's tags, logs and manifests; payloads come on demand
    (pull, checkout or dsreg.open(..., remote=))."""
    res = logged_run(remotes_api.clone, url, path, quiet=quiet, lazy_bar=True, **options)
    show_cloned(res, json=json)


def show_cloned(res: CloneResult, *, json: bool) -> None:
    if json_shown(res, json=json):
        return
    out(res.registry)
    say(
        f"Cloned {len(res.refs)} tags from {res.url} into {res.registry} (remote {res.remote}, "
        f"default); payloads are fetched on demand: 'dsreg pull' fetches them all"
    )


@command(
    remotes_api.import_dvc,
    name="import-dvc",
)
def import_dvc(repo: str, path: str, *, quiet: bool, json: bool, **options: Any) -> None:
    """Import a DVC-tracked ImageFolder tree (or label file) at a git revision as a snapshot,
    with its provenance: repository, requested rev, commit, path and DVC's md5."""
    res = logged_run(remotes_api.import_dvc, repo, path, quiet=quiet, **options)
    show_imported(res, f"{path} of {repo}", json=json)


def show_imported(res: ImportResult, what: str, *, json: bool) -> None:
    if json_shown(res, json=json):
        return
    add = res.add
    out(add.revision)
    at = f"{add.dataset}@{add.tag}" if add.tag else add.dataset
    say(
        f"Imported {what} at {res.rev} (commit {res.commit[:12]}) as {at}: "
        f"{add.rows} examples, {len(add.classes)} classes; snapshot "
        f"{short(add.snapshot)}, revision {short(add.revision)}"
    )


# -- renderers shared by push, pull and publish ----------------------------------------------


def show_pushed(res: PushResult, *, json: bool) -> None:
    if tags_moved(res, json=json):
        return
    deleted = [f"{r.dataset}@{r.tag}" for r in res.refs if r.status == "deleted"]
    if deleted:
        say(f"Deleted {', '.join(deleted)} on {res.remote}; its log keeps what they named")
        return
    written = sum(r.status != "unchanged" for r in res.refs)
    say(
        f"Pushed {len(res.revisions)} revisions to {res.remote}: {res.sent} objects sent "
        f"({size(res.bytes)}), {res.already} already there; {written} tags written"
    )


def show_pulled(res: PullResult, *, json: bool) -> None:
    if tags_moved(res, json=json):
        return
    say(
        f"Pulled {len(res.revisions)} revisions from {res.remote}: {res.fetched} objects "
        f"fetched ({size(res.bytes)}), all verified"
    )


def tags_moved(res: PushResult | PullResult, *, json: bool) -> bool:
    """What push and pull both print first: with ``--json`` the whole result, else each tag
    written as a line of data (``dataset@tag<TAB>revision<TAB>status``). True when the JSON is
    all there is to print."""
    if json_shown(res, json=json):
        return True
    for r in res.refs:
        out(f"{r.dataset}@{r.tag}\t{r.revision}\t{r.status}")
    return False
