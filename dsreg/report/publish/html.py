"""The HTML of a published registry: one page layout and the pieces pages are made of.

Every text that reaches a page goes through ``esc`` (dataset and tag names, reasons, class
names, model names and citations are user data), and every link is relative (``rel``), so the
site reads the same from any static web server, below any path, and from ``file://``. Pages
load nothing from elsewhere: no script, font or stylesheet but their own inline style.
"""

from __future__ import annotations

import html
import json
import posixpath
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote

__all__ = [
    "code",
    "esc",
    "json_ld",
    "link",
    "page",
    "pre",
    "rel",
    "scroll",
    "section",
    "table",
    "wrap",
]

_STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; margin: 0 auto; max-width: 72rem;
       padding: 1rem 1.5rem 3rem; color: rgb(29, 35, 42); background: rgb(255, 255, 255); }
header { border-bottom: 1px solid rgb(212, 217, 222); margin-bottom: 1rem; padding-bottom: .5rem; }
header a { color: inherit; text-decoration: none; font-weight: 600; }
nav.crumbs { color: rgb(88, 96, 106); font-size: .9rem; }
h1 { font-size: 1.6rem; margin: .5rem 0; word-break: break-all; }
h2 { font-size: 1.15rem; margin: 1.75rem 0 .5rem; border-bottom: 1px solid rgb(234, 237, 240); }
code, pre { font: 13px/1.45 ui-monospace, monospace; }
code { background: rgb(243, 245, 247); padding: 0 .25rem; border-radius: 3px;
       word-break: break-all; }
pre { background: rgb(243, 245, 247); padding: .75rem; overflow-x: auto; white-space: pre-wrap;
      word-break: break-all; border-radius: 4px; }
table { border-collapse: collapse; margin: .5rem 0; }
.scroll { overflow-x: auto; max-width: 100%; }
.scroll th, .scroll td { white-space: nowrap; }
.scroll td code { word-break: normal; }
.scroll .wrap { display: inline-block; white-space: normal; min-width: 14rem; max-width: 36rem; }
.scroll:focus-visible { outline: 2px solid rgb(9, 105, 218); outline-offset: 2px; }
.rank-chart text { font-family: system-ui, sans-serif; }
th, td { border-bottom: 1px solid rgb(234, 237, 240); padding: .3rem .75rem .3rem 0;
         text-align: left; vertical-align: top; }
th { font-weight: 600; color: rgb(59, 67, 76); }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.notice { border-left: 4px solid rgb(201, 55, 44); background: rgb(253, 241, 240);
          padding: .5rem .75rem; margin: .75rem 0; }
.notice.retired { border-color: rgb(161, 92, 0); background: rgb(253, 246, 234); }
.muted { color: rgb(88, 96, 106); }
.tag-yanked { text-decoration: line-through; }
"""


def esc(text: object) -> str:
    """``text`` as HTML text or an attribute value: ``& < > " '`` escaped."""
    return html.escape(str(text), quote=True)


def rel(here: str, target: str) -> str:
    """The relative URL from the page at ``here`` to ``target`` (both paths below the site's
    root, ``/``-separated), each part percent-encoded."""
    start = posixpath.dirname(here) or "."
    path = posixpath.relpath(target, start)
    return quote(path, safe="/.-_~")


def link(href: str, text: object, *, cls: str | None = None) -> str:
    attr = f' class="{esc(cls)}"' if cls else ""
    return f'<a href="{esc(href)}"{attr}>{esc(text)}</a>'


def wrap(text: object) -> str:
    """``text`` escaped, in a table cell that wraps it (a table's cells keep to one line and
    the table scrolls sideways; a long text, a reason or a list of classes, wraps instead)."""
    return f'<span class="wrap">{esc(text)}</span>'


def code(text: object, *, ident: str | None = None) -> str:
    attr = f' id="{esc(ident)}"' if ident else ""
    return f"<code{attr}>{esc(text)}</code>"


def pre(text: object, *, ident: str | None = None) -> str:
    attr = f' id="{esc(ident)}"' if ident else ""
    return f"<pre{attr}>{esc(text)}</pre>"


def section(title: str, *parts: str, ident: str | None = None) -> str:
    attr = f' id="{esc(ident)}"' if ident else ""
    return f"<section{attr}><h2>{esc(title)}</h2>\n" + "\n".join(parts) + "\n</section>"


def scroll(content: str, label: str) -> str:
    """``content`` (a table, a chart) in a box that scrolls sideways when it is wider than the
    screen (a phone's), rather than being cut off; the box takes the keyboard's focus, so it
    scrolls without a pointer, and is named ``label`` for a screen reader."""
    return (
        f'<div class="scroll" role="region" tabindex="0" aria-label="{esc(label)}">{content}</div>'
    )


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    numeric: int = 0,
    label: str | None = None,
) -> str:
    """A table of ``rows`` (cells already HTML: pass text through ``esc``); the last
    ``numeric`` columns are right-aligned. It scrolls sideways on a narrow screen
    (``scroll``), named ``label`` (default: its headers)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cls = ' class="num"' if i >= len(row) - numeric else ""
            cells.append(f"<td{cls}>{cell}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    markup = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return scroll(markup, label or "Table: " + ", ".join(h for h in headers if h))


def json_ld(doc: dict[str, Any]) -> str:
    """``doc`` as a ``<script type="application/ld+json">`` element: JSON whose ``<``, ``>``
    and ``&`` are written as ``\\u`` escapes, so no text in it can end the element."""
    text = json.dumps(doc, indent=1, sort_keys=False, ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/ld+json">\n{text}\n</script>'


def page(
    title: str, body: str, *, here: str, crumbs: Sequence[tuple[str, str]] = (), head: str = ""
) -> bytes:
    """A whole page at ``here`` (its path below the site's root): ``crumbs`` are
    ``(target path, text)`` links above its title; ``head`` goes into ``<head>``."""
    trail = " / ".join(link(rel(here, target), text) for target, text in crumbs)
    nav = f'<nav class="crumbs">{trail}</nav>' if trail else ""
    text = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{esc(title)}</title>
<style>{_STYLE}</style>
{head}
</head>
<body>
<header>{link(rel(here, "index.html"), "dsreg registry")} {nav}</header>
<main>
<h1>{esc(title)}</h1>
{body}
</main>
</body>
</html>
"""
    return text.encode("utf-8")
