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
