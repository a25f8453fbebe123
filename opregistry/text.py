"""Untrusted text made safe to print: harvest documents, policy files, model node names
and Python names can hold newlines (a forged ``Error:`` line), terminal escape
sequences or bidirectional overrides. Every table, markdown, CSV and DOT cell and every
stderr line built from such text goes through ``printable``; JSON stays exact (its own
escaping already keeps control characters out of the output)."""
from __future__ import annotations

import re

# C0 and C1 controls and DEL, line/paragraph separators, and the invisible format
# characters a terminal or editor acts on (bidi overrides and isolates, zero widths)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069"
                     "\ufeff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control or invisible format character written as an escape
    (``\\n``, ``\\x1b``, ``\\u202e``): one line, nothing a terminal acts on."""
    return _UNSAFE.sub(_escaped, text)


def markdown_safe(text: str) -> str:
    """``printable(text)`` for markdown prose or a table cell: ``&``, ``<`` and ``>``
    as HTML entities too, so that no tag in a name (``<img onerror=...>``) is rendered
    where the markdown is (a pull-request comment); the entities show as the text."""
    return printable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fenced(text: str, info: str = "") -> str:
    """``text`` as a markdown code block (shown as typed, HTML included), its fence
    longer than any run of backticks in it, so that nothing in it closes the block."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"
