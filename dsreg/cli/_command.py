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

The typer command is made from that when the command is run (or its help shown), so a run of
one command inspects one signature, however many commands there are: ``Group`` holds the names
and builds a command when click asks for it.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import os
import types
import typing
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import typer
import typer.main
from typer.core import TyperGroup
from typer.models import CommandInfo, TyperInfo

from dsreg.api.options import Arg, Opt
from dsreg.errors import InvalidInputError

__all__ = ["CONTEXT", "Command", "Group", "command", "group"]

CONTEXT = {"help_option_names": ["-h", "--help"]}

JSON = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")]
QUIET = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="No progress on stderr (a bar on a terminal, else a line every few seconds).",
    ),
]
# The library's parameters the command line never offers: the body fills them.
_LIBRARY_ONLY = ("command", "progress")

Body = TypeVar("Body", bound=Callable[..., None])


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


# -- from a signature to typer's parameters ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Param:
    """One parameter of a command: its name (the keyword it is passed as), the marker saying how
    it appears, the type and default the command line has, and the library's type."""

    name: str
    marker: Arg | Opt
    cli_type: Any
    default: Any

    def typer_param(self) -> inspect.Parameter:
        m = self.marker
        if isinstance(m, Arg):
            info: Any = typer.Argument(help=m.help, metavar=m.metavar)
        else:
            info = typer.Option(
                *m.decls,
                help=m.help,
                min=m.min,
                metavar=m.metavar,
                show_default=m.show_default,
            )
        return inspect.Parameter(
            self.name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Annotated[self.cli_type, info],
            default=self.default,
        )

    def value(self, given: Any) -> Any:
        """What the body receives: a comma-separated text split into its items."""
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
    sequence, text where it takes text), optional where ``None`` is."""
    if isinstance(marker, Opt) and marker.comma_list is not None:
        return str | None if _allows_none(hint) else str
    if marker.cli_type is not None:
        return marker.cli_type
    base = typing.get_args(hint)[0] if typing.get_origin(hint) is Annotated else hint
    members = [m for m in _members(base) if m is not type(None)]
    chosen = _simplest(members)
    if chosen is None:
        raise TypeError(f"{where}: give cli_type= for a parameter of type {base}")
    return chosen | None if _allows_none(base) else chosen


def _members(t: Any) -> tuple[Any, ...]:
    if typing.get_origin(t) is Annotated:
        return _members(typing.get_args(t)[0])
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        return tuple(m for a in typing.get_args(t) for m in _members(a))
    return (t,)


def _allows_none(t: Any) -> bool:
    return type(None) in _members(t)


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


# -- a command, built when asked for -------------------------------------------------------------


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


def _signature(
    cmd: Command,
) -> tuple[inspect.Signature, dict[str, _Param], set[str], dict[str, _Grouped]]:
    """typer's view of the command: the library's arguments and options in its order,
    ``--quiet`` where it takes ``progress``, the body's own options before ``--registry``,
    ``--json`` last. Also each parameter by name, the names the body takes by name, and the
    options it takes gathered in a dataclass."""
    library = _params(cmd.function)
    own, groups, rest = _body_params(cmd, library)
    body = inspect.signature(cmd.body).parameters
    ordered: list[_Param | str] = [p for p in library if p != "progress" or "quiet" in body]
    at = next((i for i, p in enumerate(ordered) if getattr(p, "name", "") == "registry"), None)
    ordered[len(ordered) if at is None else at : at] = own
    params = {p.name: p for p in ordered if isinstance(p, _Param)}
    gathered = {name for g in groups.values() for name in g.fields}
    missing = set(params) - set(body) - gathered if not rest else set()
    if missing:
        raise TypeError(f"command {cmd.name}: the body takes neither {missing} nor **options")
    typer_params = [
        inspect.Parameter("quiet", inspect.Parameter.KEYWORD_ONLY, annotation=QUIET, default=False)
        if p == "progress"
        else p.typer_param()  # type: ignore[union-attr]
        for p in ordered
    ]
    if "json" in body:
        typer_params.append(
            inspect.Parameter(
                "json", inspect.Parameter.KEYWORD_ONLY, annotation=JSON, default=False
            )
        )
    return inspect.Signature(typer_params), params, set(body), groups


@cache
def build(cmd: Command) -> Any:
    """The click command of ``cmd``."""
    signature, params, named, groups = _signature(cmd)

    def run(**given: Any) -> None:
        values = {k: params[k].value(v) if k in params else v for k, v in given.items()}
        for name, g in groups.items():
            values[name] = g.cls(**{f: values.pop(f) for f in g.fields})
        by_name = {k: v for k, v in values.items() if k in named}
        cmd.body(**by_name, **{k: v for k, v in values.items() if k not in named})

    run.__signature__ = signature  # type: ignore[attr-defined]
    run.__doc__ = cmd.body.__doc__
    info = CommandInfo(cmd.name, callback=run, context_settings=CONTEXT)
    return typer.main.get_command_from_info(
        info, pretty_exceptions_short=True, rich_markup_mode=None
    )


# -- groups of commands, each built when asked for -----------------------------------------------


class Group(MutableMapping[str, Any]):
    """A group's commands by name, each built when first asked for: ``entries`` maps a name to
    a function giving its ``Command``, or to a ``Group`` (a group of commands of its own)."""

    def __init__(
        self,
        name: str,
        help: str,
        entries: Mapping[str, Callable[[], Command] | Group],
    ) -> None:
        self.name, self.help, self._entries = name, help, entries
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            entry = self._entries[name]
            self._built[name] = group(entry) if isinstance(entry, Group) else build(entry())
        return self._built[name]

    def __setitem__(self, name: str, value: Any) -> None:
        self._built[name] = value

    def __delitem__(self, name: str) -> None:
        raise TypeError("a command cannot be removed")

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def group(commands: Group, *, callback: Callable[..., None] | None = None) -> TyperGroup:
    """The click group of ``commands``; ``callback`` takes the group's own options."""
    app = typer.Typer(
        name=commands.name,
        help=commands.help,
        context_settings=CONTEXT,
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
    )
    if callback is not None:
        app.callback()(callback)
    made = typer.main.get_group_from_info(
        TyperInfo(app),
        pretty_exceptions_short=True,
        suggest_commands=True,
        rich_markup_mode=None,
    )
    made.commands = commands
    return made
