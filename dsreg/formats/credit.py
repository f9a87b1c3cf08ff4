"""The dataset creators' reference and the licence a snapshot carries (``source.credit``,
``source.license``), so that every citation of every revision of it repeats both.

``credit`` is an object of one or both of ``bibtex`` (the entries of a ``.bib`` file, rewritten
in one canonical layout so that the same references give the same snapshot digest) and ``text``
(a plain-text reference). A snapshot without credit has no ``credit`` key at all: adding the
field changed no digest of existing snapshots.

The BibTeX reader takes what reference managers and publishers write: ``@type{key, name =
{braced {nested}} | "quoted" | 2021, …}``; ``@comment``, ``@preamble`` and ``@string`` blocks and
text between entries are skipped; ``#`` concatenation is not supported (refused).

A dataset's licence, as its snapshot records it (``source.license``, from ``dsreg add
--license``) or ``dsreg publish --license`` gives it: one identifier of the SPDX licence list,
in its canonical case (``CC-BY-4.0``, ``MIT``), or the ``http(s)`` URL of a licence not on it.

A snapshot made without a licence has no ``license`` key, so the digests of snapshots made
before the key existed are unchanged; the same data with another licence is another snapshot,
as with another credit. packaging's copy of the SPDX list (the one PEP 639 metadata is checked
against) says which identifiers exist and their canonical case, so a misspelt identifier is
refused rather than published. Expressions (``MIT OR Apache-2.0``) and ``LicenseRef-`` ids are
refused: the Croissant, CFF and DataCite fields a licence fills each take one licence, and a
licence the list lacks is named by its URL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dsreg._util.lazy import lazy_imports
from dsreg.errors import InvalidInputError

# packaging parses the SPDX list on import: imported when a licence is checked.
with lazy_imports():
    from packaging import licenses

__all__ = [
    "MAX_CREDIT",
    "SPDX_LIST",
    "BibEntry",
    "cff_reference",
    "check_license",
    "entry_text",
    "format_bibtex",
    "is_url",
    "license_url",
    "make_credit",
    "parse_bibtex",
    "plain",
]

# A reference, not a bibliography: a snapshot manifest stays small.
MAX_CREDIT = 16_384
_SKIPPED = frozenset({"comment", "preamble", "string"})
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_:.+-]*")
_KEY = re.compile(r"[^\s,{}()\"#%'=\\~]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class BibEntry:
    """One BibTeX entry: its type (lower case), key and fields in the order written."""

    type: str
    key: str
    fields: tuple[tuple[str, str], ...]

    def get(self, name: str) -> str | None:
        return next((v for k, v in self.fields if k == name), None)


class _Reader:
    def __init__(self, text: str, what: str) -> None:
        self.text = text
        self.i = 0
        self.what = what

    def fail(self, message: str) -> InvalidInputError:
        line = self.text.count("\n", 0, self.i) + 1
        return InvalidInputError(
            f"{self.what}, line {line}: {message}; give BibTeX entries such as "
            "@article{key, author = {…}, title = {…}, year = {2021}}"
        )

    def skip_space(self) -> None:
        while self.i < len(self.text) and self.text[self.i].isspace():
            self.i += 1

    def expect(self, ch: str) -> None:
        self.skip_space()
        if self.text[self.i : self.i + 1] != ch:
            found = self.text[self.i : self.i + 1] or "the end"
            raise self.fail(f"expected {ch!r}, found {found!r}")
        self.i += 1

    def match(self, pattern: re.Pattern[str], what: str) -> str:
        self.skip_space()
        m = pattern.match(self.text, self.i)
        if m is None:
            raise self.fail(f"expected {what}")
        self.i = m.end()
        return m.group()

    def braced(self) -> str:
        """The text inside ``{…}`` (nested braces kept), the opening brace at ``i``."""
        return self._delimited("}")

    def quoted(self) -> str:
        """The text inside ``"…"`` (braces in it kept), the opening quote at ``i``."""
        return self._delimited('"')

    def _delimited(self, close: str) -> str:
        """The text from the opening delimiter at ``i`` to ``close`` outside any inner braces
        (a backslash escapes the next character); ``i`` is left just after it."""
        start = self.i
        self.i += 1
        # Braces nest in both; a braced value's own brace is the first level.
        depth = 1 if close == "}" else 0
        while self.i < len(self.text):
            ch = self.text[self.i]
            if ch == "\\":
                self.i += 2
                continue
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == close and depth == 0:
                self.i += 1
                return self.text[start + 1 : self.i - 1]
            self.i += 1
        self.i = start
        raise self.fail(f"a '{self.text[start]}' is never closed")

    def value(self) -> str:
        self.skip_space()
        ch = self.text[self.i : self.i + 1]
        if ch == "{":
            v = self.braced()
        elif ch == '"':
            v = self.quoted()
        else:
            m = re.compile(r"[0-9]+").match(self.text, self.i)
            if m is None:
                raise self.fail("expected a value in braces, in quotes or a number")
            self.i = m.end()
            v = m.group()
        self.skip_space()
        if self.text[self.i : self.i + 1] == "#":
            raise self.fail("'#' concatenation is not supported: write the value in one piece")
        return " ".join(v.split())


def parse_bibtex(text: str, *, what: str = "BibTeX") -> list[BibEntry]:
    """The entries of a BibTeX text, in order; ``InvalidInputError`` naming ``what`` and the
    line if it does not parse."""
    r = _Reader(text, what)
    entries: list[BibEntry] = []
    while True:
        at = text.find("@", r.i)
        if at < 0:
            break
        r.i = at + 1
        kind = r.match(_NAME, "an entry type after '@'").lower()
        r.skip_space()
        if kind in _SKIPPED:
            if r.text[r.i : r.i + 1] == "{":
                r.braced()
            continue
        r.expect("{")
        key = r.match(_KEY, "a citation key")
        fields: list[tuple[str, str]] = []
        seen: set[str] = set()
        while True:
            r.skip_space()
            if r.text[r.i : r.i + 1] == ",":
                r.i += 1
                r.skip_space()
            if r.text[r.i : r.i + 1] == "}":
                r.i += 1
                break
            name = r.match(_NAME, "a field name or '}'").lower()
            r.expect("=")
            value = r.value()
            if name in seen:
                raise r.fail(f"field {name!r} of entry {key!r} is given twice")
            seen.add(name)
            fields.append((name, value))
            r.skip_space()
            if r.text[r.i : r.i + 1] not in (",", "}"):
                raise r.fail(f"expected ',' or '}}' after field {name!r} of entry {key!r}")
        entries.append(BibEntry(type=kind, key=key, fields=tuple(fields)))
    if not entries:
        raise InvalidInputError(
            f"{what} holds no BibTeX entry; give entries such as "
            "@article{key, author = {…}, title = {…}, year = {2021}}"
        )
    keys = [e.key for e in entries]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise InvalidInputError(f"{what} names the key {twice[0]!r} twice; keep one entry per key")
    for e in entries:
        if e.get("title") is None or not any(
            e.get(f) for f in ("author", "editor", "organization")
        ):
            raise InvalidInputError(
                f"{what}: entry {e.key!r} needs a title and an author, editor or organization "
                "(the credit names who made the dataset)"
            )
    return entries


def format_bibtex(entries: list[BibEntry]) -> str:
    """Entries in one layout: ``@type{key,``, a field a line as ``name = {value},``, ``}``."""
    out = []
    for e in entries:
        body = "".join(f"  {k} = {{{v}}},\n" for k, v in e.fields)
        out.append(f"@{e.type}{{{e.key},\n{body}}}\n")
    return "\n".join(out)


def make_credit(
    *, bibtex: str | None = None, text: str | None = None, what: str = ""
) -> dict[str, str]:
    """The ``credit`` object of a snapshot's source, checked: ``bibtex`` rewritten in the
    canonical layout, ``text`` with its whitespace collapsed. Empty when neither is given."""
    credit: dict[str, str] = {}
    if bibtex is not None:
        credit["bibtex"] = format_bibtex(parse_bibtex(bibtex, what=what or "--citation"))
    if text is not None:
        t = " ".join(text.split())
        if not t:
            raise InvalidInputError("--credit is empty; give the dataset creators' reference")
        credit["text"] = t
    size = sum(len(v.encode("utf-8")) for v in credit.values())
    if size > MAX_CREDIT:
        raise InvalidInputError(
            f"the credit is {size} bytes; keep it under {MAX_CREDIT} (the dataset's own "
            "reference, not a bibliography)"
        )
    return credit


def plain(value: str) -> str:
    """A BibTeX value as plain text: braces dropped, the usual escapes undone."""
    value = re.sub(r"\\([&%$#_{}])", r"\1", value)
    value = value.replace("~", " ").replace("{", "").replace("}", "")
    return " ".join(value.split())


def _authors(value: str) -> list[str]:
    return [plain(a) for a in re.split(r"\s+and\s+", value) if a.strip()]


def entry_text(e: BibEntry) -> str:
    """``Authors. Title. Venue, Year.`` for a plain-text citation."""
    who = _authors(e.get("author") or e.get("editor") or e.get("organization") or "")
    names = [" ".join(reversed([p.strip() for p in a.split(",", 1)])) for a in who]
    authors = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    parts = [authors, plain(e.get("title") or "")]
    venue = next(
        (
            e.get(f)
            for f in ("journal", "booktitle", "institution", "school", "publisher", "howpublished")
            if e.get(f)
        ),
        None,
    )
    year = e.get("year")
    tail = ", ".join(plain(x) for x in (venue, year) if x)
    if tail:
        parts.append(tail)
    doi = e.get("doi")
    if doi:
        parts.append(f"doi:{plain(doi)}")
    return ". ".join(p.rstrip(".") for p in parts if p) + "."


_CFF_TYPES = {
    "article": "article",
    "inproceedings": "conference-paper",
    "conference": "conference-paper",
    "book": "book",
    "inbook": "book",
    "incollection": "book",
    "techreport": "report",
    "phdthesis": "thesis",
    "mastersthesis": "thesis",
    "manual": "manual",
    "misc": "generic",
    "online": "website",
    "dataset": "data",
    "software": "software",
    "unpublished": "unpublished",
}


def cff_reference(e: BibEntry) -> dict[str, Any]:
    """A CITATION.cff ``references`` item for one entry (type, authors, title, year, venue)."""
    people: list[dict[str, str]] = []
    for a in _authors(e.get("author") or e.get("editor") or ""):
        if "," in a:
            family, given = (p.strip() for p in a.split(",", 1))
            people.append({"family-names": family, "given-names": given})
        elif " " in a:
            given, family = a.rsplit(" ", 1)
            people.append({"family-names": family, "given-names": given})
        else:
            people.append({"name": a})
    if not people:
        people = [{"name": plain(e.get("organization") or "")}]
    ref: dict[str, Any] = {
        "type": _CFF_TYPES.get(e.type, "generic"),
        "authors": people,
        "title": plain(e.get("title") or ""),
    }
    year = e.get("year")
    if year and year.isdigit():
        ref["year"] = int(year)
    if e.get("journal"):
        ref["journal"] = plain(e.get("journal") or "")
    if e.get("booktitle"):
        ref["collection-title"] = plain(e.get("booktitle") or "")
    for name in ("doi", "url"):
        if e.get(name):
            ref[name] = plain(e.get(name) or "")
    return ref


# -- the licence --------------------------------------------------------------------------------
#: Where the SPDX licence list is, and each licence's page on it.
SPDX_LIST = "https://spdx.org/licenses/"
_MAX = 2048
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*")
_URL = re.compile(r"https?://[!-~]+")  # printable ASCII, no space
_UNSAFE_IN_URL = frozenset('"<>\\^`{|}')


def is_url(license: str) -> bool:
    """Whether a checked licence is a URL (else it is an SPDX identifier)."""
    return license.startswith(("http://", "https://"))


def license_url(license: str) -> str:
    """The URL of a checked licence: its own, or its page on the SPDX list (what Croissant
    recommends for ``license``)."""
    return license if is_url(license) else f"{SPDX_LIST}{license}.html"


def check_license(text: str, *, what: str = "--license") -> str:
    """``text`` as a licence is recorded: an SPDX identifier in its canonical case, or a URL as
    given; ``InvalidInputError`` naming ``what`` for anything else."""
    given = text.strip()
    hint = (
        f"{what} {text!r}: give one SPDX licence identifier (e.g. CC-BY-4.0, MIT; the list is "
        f"at {SPDX_LIST}) or the http(s) URL of the licence"
    )
    if given.startswith(("http://", "https://")):
        if len(given) > _MAX or not _URL.fullmatch(given) or _UNSAFE_IN_URL & set(given):
            raise InvalidInputError(f"{hint}: that URL has a space or a character URLs escape")
        return given
    if not given or len(given) > 100 or "://" in given:
        raise InvalidInputError(hint)
    try:
        canonical = licenses.canonicalize_license_expression(given)
    except licenses.InvalidLicenseExpression:
        raise InvalidInputError(f"{hint}: it is not on the SPDX list") from None
    if not _ID.fullmatch(canonical) or canonical.startswith("LicenseRef-"):
        raise InvalidInputError(
            f"{hint}: one licence, not an expression or a LicenseRef (name a licence the list "
            "lacks by its URL)"
        )
    return canonical
