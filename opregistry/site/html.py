"""Small HTML helpers shared by the pages: escaping, the page layout, status cells and
file names. Plain strings and ``html.escape``: no template engine."""
from __future__ import annotations

import re
from html import escape
from typing import Iterable

from opregistry.site.export import STATES


def esc(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


def layout(title: str, body: str, root: str, *, scripts: Iterable[str] = (),
           page_class: str = "") -> str:
    """A whole page; ``root`` is the relative path to the site's root (``""`` or ``../``),
    so the site works from ``file://`` and from any folder of a static host."""
    tags = "".join(f'<script src="{root}{esc(s)}"></script>' for s in scripts)
    nav = "".join(f'<a href="{root}{href}">{label}</a>' for href, label in (
        ("index.html", "Matrix"), ("releases/index.html", "Releases"),
        ("compare.html", "Compare releases"), ("data.html", "Data")))
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{esc(title)} · opregistry</title>'
            f'<link rel="stylesheet" href="{root}static/style.css"></head>'
            f'<body class="{esc(page_class)}"><a class="skip" href="#main">Skip to content</a>'
            f'<header class="top"><a class="brand" href="{root}index.html">opregistry</a>'
            f'<nav aria-label="Site">{nav}</nav></header>'
            f'<main id="main" tabindex="-1">{body}</main>{tags}</body></html>\n')


def glyph(state: str) -> str:
    """A status as glyph and colour together (the colour alone would say nothing to a
    reader who cannot tell the colours apart, or to a screen reader)."""
    _, mark, label = STATES[state]
    return (f'<span class="s s-{esc(state)}" title="{esc(label)}">'
            f'<span aria-hidden="true">{mark}</span><span class="sr">{esc(state)}</span></span>')


def state_badge(state: str) -> str:
    _, mark, label = STATES[state]
    return (f'<span class="b s-{esc(state)}" title="{esc(label)}">'
            f'<span aria-hidden="true">{mark}</span> {esc(state)}</span>')


def legend() -> str:
    items = "".join(f"<li>{glyph(s)} {esc(label)}</li>" for s, (_, _, label) in STATES.items())
    return f'<ul class="legend" aria-label="Legend">{items}</ul>'


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def file_names(names: Iterable[str]) -> dict[str, str]:
    """name -> a file name (no extension) that is safe on every file system and unique
    even where the file system ignores case (``Foo`` and ``foo`` would collide)."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        base = _UNSAFE.sub("_", name) or "_"
        candidate, n = base, 1
        while candidate.lower() in taken:
            n += 1
            candidate = f"{base}-{n}"
        taken.add(candidate.lower())
        out[name] = candidate
    return out


def table(headers: Iterable[str], rows: Iterable[str], *, caption: str = "",
          cls: str = "") -> str:
    head = "".join(f'<th scope="col">{h}</th>' for h in headers)
    cap = f"<caption>{caption}</caption>" if caption else ""
    return (f'<div class="scroll"><table class="{cls}">{cap}<thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')
