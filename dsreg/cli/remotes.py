"""Remote commands: remote add / ls / remove, push, pull, clone, import-dvc."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import dsreg
from dsreg.cli._common import (
    CONTEXT,
    AllowLookalikeIdsOpt,
    JsonOpt,
    QuietOpt,
    RegistryOpt,
    command_line,
    emit_json,
    lazy_progress_bar,
    out,
    progress_bar,
    say,
    short,
    table,
)

remote_app = typer.Typer(
    name="remote",
    help="Manage remotes: any URL a DVC remote accepts (a folder, s3://, gs://, ssh://, …).",
    context_settings=CONTEXT,
    no_args_is_help=True,
    rich_markup_mode=None,
)

RemoteOpt = Annotated[
    str | None,
    typer.Option(
        "--remote",
        "-r",
        help="Remote name or URL (default: the default remote).",
        show_default=False,
    ),
]
JobsOpt = Annotated[
    int | None,
    typer.Option("--jobs", "-j", help="Parallel transfers (default: per remote type).", min=1),
]
OptionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--option",
        "-o",
        help="A DVC remote option KEY=VALUE (e.g. endpointurl=…, region=…, profile=…); "
        "repeat for several. Secrets belong in the environment, never here.",
    ),
]


def register(app: typer.Typer) -> None:
    app.add_typer(remote_app, name="remote")
    for fn in (push, pull, clone):
        app.command(context_settings=CONTEXT)(fn)
    app.command("import-dvc", context_settings=CONTEXT)(import_dvc)


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return f"{n} B"


@remote_app.command("add", context_settings=CONTEXT)
def remote_add(
    name: Annotated[str, typer.Argument(help="The remote's name, e.g. origin.")],
    url: Annotated[str, typer.Argument(help="A folder path or a URL DVC accepts.")],
    default: Annotated[bool, typer.Option("--default", help="Make it the default remote.")] = False,
    option: OptionOpt = None,
    force: Annotated[bool, typer.Option(help="Replace a remote of that name.")] = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Add a remote (recorded in config.toml; nothing is contacted)."""
    res = dsreg.remote_add(
        name, url, default=default, options=option or [], force=force, registry=registry_path
    )
    if json:
        emit_json(res.to_dict())
        return
    say(f"Added remote {res.name} -> {res.url}" + (" (default)" if res.default else ""))


@remote_app.command("ls", context_settings=CONTEXT)
def remote_ls(registry_path: RegistryOpt = None, json: JsonOpt = False) -> None:
    """List remotes: name, URL, options; * marks the default."""
    rows = dsreg.remote_ls(registry=registry_path)
    if json:
        emit_json([r.to_dict() for r in rows])
        return
    if not rows:
        say("No remotes: add one with 'dsreg remote add NAME URL'.")
        return
    out(
        table(
            [
                [
                    ("* " if r.default else "  ") + r.name,
                    r.url,
                    " ".join(f"{k}={v}" for k, v in sorted(r.options.items())),
                ]
                for r in rows
            ],
            ["  NAME", "URL", "OPTIONS"],
        )
    )


@remote_app.command("remove", context_settings=CONTEXT)
def remote_remove(
    name: Annotated[str, typer.Argument(help="The remote to forget (its data stays where it is).")],
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Forget a remote (nothing on the remote is deleted)."""
    res = dsreg.remote_remove(name, registry=registry_path)
    if json:
        emit_json(res.to_dict())
        return
    say(f"Removed remote {res.name} ({res.url})")


def _tags_moved(res: dsreg.PushResult | dsreg.PullResult, *, json: bool) -> bool:
    """What push and pull both print first: with ``--json`` the whole result, else each tag
    written as a line of data (``dataset@tag<TAB>revision<TAB>status``). True when the JSON is
    all there is to print."""
    if json:
        emit_json(res.to_dict())
        return True
    for r in res.refs:
        out(f"{r.dataset}@{r.tag}\t{r.revision}\t{r.status}")
    return False


def push(
    specs: Annotated[
        list[str] | None,
        typer.Argument(
            help="dataset@tag, a dataset (all its tags) or a digest (default: all tags)."
        ),
    ] = None,
    remote: RemoteOpt = None,
    jobs: JobsOpt = None,
    force: Annotated[
        bool,
        typer.Option(help="Move tags the remote holds at another digest (its log keeps them)."),
    ] = False,
    quiet: QuietOpt = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Send revisions, everything they reach, then their tags; nothing the remote holds."""
    with lazy_progress_bar(quiet=quiet) as hook:
        res = dsreg.push(
            specs,
            remote=remote,
            jobs=jobs,
            force=force,
            progress=hook,
            command=command_line(),
            registry=registry_path,
        )
    if _tags_moved(res, json=json):
        return
    say(
        f"Pushed {len(res.revisions)} revisions to {res.remote}: {res.sent} objects sent "
        f"({_size(res.bytes)}), {res.already} already there; "
        f"{sum(r.status != 'unchanged' for r in res.refs)} tags written"
    )


def pull(
    specs: Annotated[
        list[str] | None,
        typer.Argument(
            help="dataset@tag, a dataset, or a full digest (default: every remote tag)."
        ),
    ] = None,
    remote: RemoteOpt = None,
    jobs: JobsOpt = None,
    force: Annotated[
        bool, typer.Option(help="Move local tags to the remote's digests (the log keeps them).")
    ] = False,
    quiet: QuietOpt = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Fetch revisions and what they reach that is missing here, verified; then set the tags."""
    with lazy_progress_bar(quiet=quiet) as hook:
        res = dsreg.pull(
            specs,
            remote=remote,
            jobs=jobs,
            force=force,
            progress=hook,
            command=command_line(),
            registry=registry_path,
        )
    if _tags_moved(res, json=json):
        return
    say(
        f"Pulled {len(res.revisions)} revisions from {res.remote}: {res.fetched} objects "
        f"fetched ({_size(res.bytes)}), all verified"
    )


def clone(
    url: Annotated[str, typer.Argument(help="The remote: a folder path or a URL DVC accepts.")],
    path: Annotated[
        Path | None, typer.Argument(help="The new registry folder (default: ./.dsreg).")
    ] = None,
    name: Annotated[str, typer.Option(help="Name of the remote in the new registry.")] = "origin",
    option: OptionOpt = None,
    jobs: JobsOpt = None,
    quiet: QuietOpt = False,
    json: JsonOpt = False,
) -> None:
    """A new registry with the remote's tags, logs and manifests; payloads come on demand
    (pull, checkout or dsreg.open(..., remote=))."""
    with lazy_progress_bar(quiet=quiet) as hook:
        res = dsreg.clone(
            url,
            path,
            name=name,
            options=option or [],
            jobs=jobs,
            progress=hook,
            command=command_line(),
        )
    if json:
        emit_json(res.to_dict())
        return
    out(res.registry)
    say(
        f"Cloned {len(res.refs)} tags from {res.url} into {res.registry} (remote {res.remote}, "
        f"default); payloads are fetched on demand: 'dsreg pull' fetches them all"
    )


def import_dvc(
    repo: Annotated[str, typer.Argument(help="A git repository with DVC: a URL or a local path.")],
    path: Annotated[str, typer.Argument(help="The DVC-tracked folder (or file) in it.")],
    as_: Annotated[str, typer.Option("--as", help="The dataset name, e.g. imagenet-val.")],
    rev: Annotated[str, typer.Option(help="A git revision: commit, branch or tag.")] = "HEAD",
    tag: Annotated[str | None, typer.Option(help="Tag the new revision, e.g. original.")] = None,
    force: Annotated[
        bool, typer.Option(help="Move --tag if it exists (the log keeps it).")
    ] = False,
    jobs: JobsOpt = None,
    classes: Annotated[
        Path | None,
        typer.Option(
            help="A label file's class names, one per line (line i is class i), as for "
            "'dsreg add'; a folder's class folders name them."
        ),
    ] = None,
    allow_lookalike_ids: AllowLookalikeIdsOpt = False,
    quiet: QuietOpt = False,
    registry_path: RegistryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Import a DVC-tracked ImageFolder tree (or label file) at a git revision as a snapshot,
    with its provenance: repository, requested rev, commit, path and DVC's md5."""
    with progress_bar(quiet=quiet) as hook:
        res = dsreg.import_dvc(
            repo,
            path,
            dataset=as_,
            rev=rev,
            tag=tag,
            force=force,
            jobs=jobs,
            classes=classes,
            progress=hook,
            command=command_line(),
            registry=registry_path,
            allow_lookalike_ids=allow_lookalike_ids,
        )
    if json:
        emit_json(res.to_dict())
        return
    out(res.add.revision)
    at = f"{as_}@{tag}" if tag else as_
    say(
        f"Imported {path} of {repo} at {rev} (commit {res.commit[:12]}) as {at}: "
        f"{res.add.rows} examples, {len(res.add.classes)} classes; snapshot "
        f"{short(res.add.snapshot)}, revision {short(res.add.revision)}"
    )
