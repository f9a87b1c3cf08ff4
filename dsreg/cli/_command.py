"""A command built from the library function it calls, and only the command being run.

The library declares each command's arguments and options once, on its function
(``dsreg.api.options``: ``Annotated[T, Arg(...)]`` and ``Opt(...)``). A command here is a
*body* marked with that function: ``@command(api.tag)`` over ``def tag(new, source, *, json,
**options)``. The body's own parameters are what it uses by name; the function's other
options reach it in ``**options``, to pass on. Besides the function's options a command has
what is the command line's alone: ``--json`` (a body parameter ``json``), ``--quiet`` (``quiet``,
in the place of the function's ``progress``), and options the body declares itself with the
same markers (``dsreg diff --pairs``), one parameter each or several as the fields of a
dataclass the body takes as one. The function's ``command`` and ``progress`` the body
fills itself.

Each marker becomes a click parameter (click's public API: ``click.Option``, ``click.Argument``,
a ``click.Group`` whose ``get_command`` builds the command asked for), so a run of one command
inspects one signature, however many commands there are. The help reads as typer's plain
layout: an ``Arguments:`` section of the arguments' help, metavars ``<str>``, ``<path>``.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import inspect
import os
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

import click

from dsreg.api.options import Arg, Opt
from dsreg.errors import InvalidInputError

__all__ = ["CONTEXT", "Command", "LazyGroup", "command"]

CONTEXT: dict[str, Any] = {"help_option_names": ["-h", "--help"]}

_JSON = Opt("--json", help="Machine-readable JSON on stdout.")
_QUIET = Opt(
    "--quiet",
    "-q",
    help="No progress on stderr (a bar on a terminal, else a line every few seconds).",
)
# The library's parameters the command line never offers: the body fills them.
_LIBRARY_ONLY = ("command", "progress")
# What the help calls each type's value.
_METAVARS = {str: "<str>", int: "<int>", float: "<float>", Path: "<path>"}


@dataclass(frozen=True, slots=True)
class Command:
    """A command: its ``body``, the library function whose options it has, and its name."""

    name: str
    body: Callable[..., None]
    function: Callable[..., Any]


def command(function: Callable[..., Any], *, name: str | None = None) -> Callable[..., Command]:
    """Mark a body as the command that calls ``function`` (named as the body, ``_`` as ``-``,
    unless ``name`` is given)."""

    def mark(body: Callable[..., None]) -> Command:
        return Command(name or body.__name__.replace("_", "-"), body, function)

    return mark


# -- from a signature to click's parameters ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Param:
    """One parameter of a command: its name (the keyword it is passed as), the marker saying how
    it appears, the type and default the command line has (``inspect.Parameter.empty``: none,
    so required)."""

    name: str
    marker: Arg | Opt
    cli_type: Any
    default: Any

    def click_param(self) -> click.Parameter:
        m, required = self.marker, self.default is inspect.Parameter.empty
        # No default at all where one is required: click tells a default of None from none.
        default = {} if required else {"default": self.default}
        many = typing.get_origin(self.cli_type) is list
        item = typing.get_args(self.cli_type)[0] if many else self.cli_type
        kind = click.Path(path_type=Path) if item is Path else item
        if isinstance(m, Arg):
            return _Argument(
                [self.name],
                help=m.help,
                metavar=m.metavar,
                type=kind,
                required=required,
                nargs=-1 if many else 1,
                **default,
            )
        decls = m.decls or (f"--{self.name.replace('_', '-')}",)
        if item is bool:
            if not m.decls:
                decls = (f"{decls[0]}/--no-{decls[0][2:]}",)
            return click.Option(
                [*decls, self.name],
                is_flag=True,
                default=bool(self.default),
                help=m.help,
                show_default=m.show_default,
            )
        metavar = m.metavar or _METAVARS[item]
        if m.min is not None:
            kind = click.IntRange(min=m.min) if item is int else click.FloatRange(min=m.min)
            metavar = m.metavar or f"{metavar[:-1]} range>"
        return click.Option(
            [*decls, self.name],
            type=kind,
            multiple=many,
            required=required,
            help=m.help,
            metavar=metavar,
            show_default=m.show_default,
            **default,
        )

    def value(self, given: Any) -> Any:
        """What the body receives: a list for a repeated option or several arguments (``None``
        for none, where that is the default), a comma-separated text split into its items."""
        if isinstance(given, tuple):
            return None if not given and self.default is None else list(given)
        if not isinstance(self.marker, Opt) or self.marker.comma_list is None or given is None:
            return given
        named = self.marker.decls[0] if self.marker.decls else f"--{self.name.replace('_', '-')}"
        return comma_list(given, named, self.marker.comma_list)


def comma_list(text: str, option: str, item: type[int] | type[str]) -> list[Any]:
    """``"1, 5"`` as ``[1, 5]``: the items between commas, stripped, empty ones dropped."""
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise InvalidInputError(f"{option} is empty")
    try:
        return [item(x) for x in items]
    except ValueError:
        raise InvalidInputError(
            f"{option} {text!r}: give comma-separated integers, e.g. 1,5"
        ) from None


def _hint(function: Callable[..., Any], name: str) -> Any:
    """The annotation of ``function``'s parameter ``name``, evaluated in its module (the types
    a function returns are imported only when type checking: their annotations are not)."""
    annotation = inspect.get_annotations(function)[name]
    return eval(annotation, function.__globals__) if isinstance(annotation, str) else annotation


def _marker(hint: Any) -> Arg | Opt | None:
    if typing.get_origin(hint) is not Annotated:
        return None
    return next((m for m in hint.__metadata__ if isinstance(m, Arg | Opt)), None)


def _cli_type(hint: Any, marker: Arg | Opt, where: str) -> Any:
    """The command line's type for a parameter of the library's type ``hint``: the marker's, or
    the simplest the library takes (a path where it takes a path, a list where it takes a
    sequence, text where it takes text)."""
    if isinstance(marker, Opt) and marker.comma_list is not None:
        return str
    if marker.cli_type is not None:
        return marker.cli_type
    base = typing.get_args(hint)[0] if typing.get_origin(hint) is Annotated else hint
    chosen = _simplest([m for m in _members(base) if m is not type(None)])
    if chosen is None:
        raise TypeError(f"{where}: give cli_type= for a parameter of type {base}")
    return chosen


def _members(t: Any) -> tuple[Any, ...]:
    if typing.get_origin(t) is Annotated:
        return _members(typing.get_args(t)[0])
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        return tuple(m for a in typing.get_args(t) for m in _members(a))
    return (t,)


def _simplest(members: list[Any]) -> Any:
    origins = [typing.get_origin(m) or m for m in members]
    if os.PathLike in origins:
        return Path
    for m, origin in zip(members, origins, strict=True):
        if origin in (collections.abc.Sequence, list):
            item = _simplest(list(_members(typing.get_args(m)[0])))
            return None if item is None else list[item]  # type: ignore[valid-type]
    if str in origins or Literal in origins:
        return str
    if len(members) == 1 and members[0] in (int, float, bool, Path):
        return members[0]
    return None


def _params(function: Callable[..., Any]) -> list[_Param | str]:
    """The command's parameters from ``function``, in its order; ``"progress"`` where it takes
    a progress hook (``--quiet`` goes there)."""
    out: list[_Param | str] = []
    for p in inspect.signature(function).parameters.values():
        if p.name in _LIBRARY_ONLY:
            if p.name == "progress":
                out.append(p.name)
            continue
        hint = _hint(function, p.name)
        marker = _marker(hint)
        if marker is None:
            continue
        cli_type = _cli_type(hint, marker, f"{function.__qualname__}({p.name})")
        default = p.default
        if isinstance(marker, Opt) and marker.comma_list is not None and default:
            default = ",".join(str(x) for x in default)
        out.append(_Param(p.name, marker, cli_type, default))
    return out


@dataclass(frozen=True, slots=True)
class _Grouped:
    """A body parameter that takes several of the command line's own options as one value: a
    dataclass whose fields carry the markers (``dsreg review``'s ``NotServing``)."""

    cls: type
    fields: tuple[str, ...]


def _grouped(cls: type, where: str) -> tuple[_Grouped, list[_Param]]:
    """The options of dataclass ``cls``, one per field, and how to gather them back into it."""
    hints = typing.get_type_hints(cls, include_extras=True)
    params = []
    for f in dataclasses.fields(cls):
        marker = _marker(hints[f.name])
        if marker is None:
            raise TypeError(f"{where}: field {f.name} of {cls.__name__} has no marker")
        cli_type = _cli_type(hints[f.name], marker, f"{where}.{f.name}")
        params.append(_Param(f.name, marker, cli_type, f.default))
    return _Grouped(cls, tuple(p.name for p in params)), params


def _body_params(
    cmd: Command, library: list[_Param | str]
) -> tuple[list[_Param], dict[str, _Grouped], bool]:
    """The options the body declares itself (one parameter each, or several as the fields of a
    dataclass it takes, by parameter name), and whether it takes the library's others in
    ``**options``. A body naming a parameter the library does not have, without a marker, is a
    mistake found here."""
    known = {p.name for p in library if isinstance(p, _Param)}
    own: list[_Param] = []
    groups: dict[str, _Grouped] = {}
    rest = False
    for p in inspect.signature(cmd.body).parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            rest = True
        elif p.name not in known and p.name not in ("json", "quiet"):
            hint = _hint(cmd.body, p.name)
            where = f"command {cmd.name}({p.name})"
            if isinstance(hint, type) and dataclasses.is_dataclass(hint):
                groups[p.name], fields = _grouped(hint, where)
                own.extend(fields)
                continue
            marker = _marker(hint)
            if marker is None:
                raise TypeError(f"command {cmd.name}: {p.name} is not an option of the library's")
            own.append(_Param(p.name, marker, _cli_type(hint, marker, where), p.default))
    return own, groups, rest


def _ordered(cmd: Command) -> tuple[list[_Param], dict[str, _Grouped], set[str]]:
    """The command's parameters as the command line shows them: the library's arguments and
    options in its order, ``--quiet`` where it takes ``progress``, the body's own options before
    ``--registry``, ``--json`` last. Also the options the body takes gathered in a dataclass,
    and the names it takes by name."""
    library = _params(cmd.function)
    own, groups, rest = _body_params(cmd, library)
    body = set(inspect.signature(cmd.body).parameters)
    quiet = _Param("quiet", _QUIET, bool, False)
    ordered = [
        quiet if p == "progress" else p for p in library if p != "progress" or "quiet" in body
    ]
    at = next((i for i, p in enumerate(ordered) if getattr(p, "name", "") == "registry"), None)
    ordered[len(ordered) if at is None else at : at] = own
    if "json" in body:
        ordered.append(_Param("json", _JSON, bool, False))
    params = [p for p in ordered if isinstance(p, _Param)]
    gathered = {name for g in groups.values() for name in g.fields}
    missing = {p.name for p in params} - body - gathered if not rest else set()
    if missing:
        raise TypeError(f"command {cmd.name}: the body takes neither {missing} nor **options")
    return params, groups, body


@cache
def build(cmd: Command) -> click.Command:
    """The click command of ``cmd``."""
    params, groups, named = _ordered(cmd)
    by_name = {p.name: p for p in params}

    def run(**given: Any) -> None:
        values = {k: by_name[k].value(v) for k, v in given.items()}
        for name, g in groups.items():
            values[name] = g.cls(**{f: values.pop(f) for f in g.fields})
        own = {k: v for k, v in values.items() if k in named}
        cmd.body(**own, **{k: v for k, v in values.items() if k not in named})

    return _Command(
        cmd.name,
        params=[p.click_param() for p in params],
        callback=run,
        help=inspect.getdoc(cmd.body),
        context_settings=CONTEXT,
    )


# -- how an argument and a command show their help -----------------------------------------------


class _Argument(click.Argument):
    """An argument with help text, listed under ``Arguments:``; named in lower case, as
    ``{name}`` in the usage line where required, ``[name]`` where not."""

    def __init__(self, decls: list[str], *, help: str, **kwargs: Any) -> None:
        super().__init__(decls, **kwargs)
        self.text = help

    def _shown(self) -> str:
        return self.metavar or self.name or ""

    def make_metavar(self, ctx: click.Context | None = None) -> str:
        return self._shown() + ("..." if self.nargs != 1 else "")

    def get_usage_pieces(self, ctx: click.Context) -> list[str]:
        name = self._shown()
        shown = name if name.startswith("[") else f"{{{name}}}" if self.required else f"[{name}]"
        return [shown + ("..." if self.nargs != 1 else "")]

    def get_error_hint(self, ctx: click.Context | None) -> str:
        return f"'{self._shown()}'"

    def get_help_record(self, ctx: click.Context) -> tuple[str, str]:
        return self.make_metavar(ctx), self.text + ("  [required]" if self.required else "")


class _Command(click.Command):
    """A command whose help lists its arguments (with their help), then its options: the whole
    help written here, so that it reads the same whichever click lays out arguments itself."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.format_usage(ctx, formatter)
        self.format_help_text(ctx, formatter)
        records: dict[str, list[tuple[str, str]]] = {"argument": [], "option": []}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                records[param.param_type_name].append(record)
        for title, kind in (("Arguments", "argument"), ("Options", "option")):
            if records[kind]:
                with formatter.section(title):
                    formatter.write_dl(records[kind])


# -- groups of commands, each built when asked for -----------------------------------------------


class LazyGroup(click.Group):
    """A group whose commands are built when first asked for (click's documented way to load
    subcommands lazily): ``entries`` maps a name to a function giving its ``Command``, or to a
    ``LazyGroup``. An unknown command's error suggests the names it resembles."""

    def __init__(
        self,
        name: str,
        help: str,
        entries: Mapping[str, Callable[[], Command] | LazyGroup],
        *,
        params: list[click.Parameter] | None = None,
    ) -> None:
        super().__init__(name, help=help, params=params, context_settings=CONTEXT)
        self.entries = entries

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and not ctx.resilient_parsing:
            # No command is a usage error: the help on stderr, exit status 1, whichever click.
            click.echo(ctx.get_help(), err=True)
            ctx.exit(1)
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.entries)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        entry = self.entries.get(name)
        if entry is None or isinstance(entry, LazyGroup):
            return entry
        return build(entry())

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:
            close = difflib.get_close_matches(args[0], list(self.entries)) if args else []
            if not close:
                raise
            hint = f"Did you mean {', '.join(map(repr, close))}?"
            raise click.UsageError(f"{e.message.rstrip('.')}. {hint}", e.ctx) from None
