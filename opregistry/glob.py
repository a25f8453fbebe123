"""Shell-style globs (``*``, ``?``, ``[seq]``, ``[!seq]``, as ``fnmatch.fnmatchcase``)
compiled in time linear in the pattern and matched without backtracking.

``fnmatch.translate`` looks for the closing ``]`` of every ``[`` from scratch, so a
pattern of 100,000 ``[`` took minutes to compile. Here the pattern is cut at its ``*``
into segments of fixed length (a literal, ``?`` or a set per character); a name matches
when the first segment matches at its start, the last at its end, and the others in
order, each at the leftmost place it fits (which finds a match whenever one exists).
Each segment is a regular expression without repetition, so matching costs at most
(name length x pattern length).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

_SPECIAL = frozenset("*?[")


class GlobError(ValueError):
    """A set in a glob that is not a valid character set (``[z-a]``)."""


@lru_cache(maxsize=1024)
def compile_glob(pattern: str) -> Callable[[str], bool]:
    """A function telling whether a name matches ``pattern`` (case-sensitive)."""
    if not _SPECIAL.intersection(pattern):  # a plain name
        return pattern.__eq__
    segments = _segments(pattern)
    try:
        compiled = [(re.compile(regex, re.DOTALL), width) for regex, width in segments]
    except re.error as exc:
        raise GlobError(f"not a valid glob: {exc}") from None
    if len(compiled) == 1:
        whole = compiled[0][0]
        return lambda name: whole.fullmatch(name) is not None
    (first, first_width), middle, (last, last_width) = compiled[0], compiled[1:-1], compiled[-1]

    def matches(name: str) -> bool:
        end = len(name) - last_width
        if end < first_width or first.match(name) is None or last.match(name, end) is None:
            return False
        position = first_width
        for segment, width in middle:
            found = segment.search(name, position, end)
            if found is None:
                return False
            position = found.start() + width
        return True

    return matches


def _segments(pattern: str) -> list[tuple[str, int]]:
    """(regex, width) of each part of ``pattern`` between its ``*``."""
    closing = _next_closing(pattern)
    segments: list[tuple[str, int]] = []
    regex: list[str] = []
    width = 0
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        i += 1
        if char == "*":
            segments.append(("".join(regex), width))
            regex, width = [], 0
            while i < n and pattern[i] == "*":
                i += 1
            continue
        width += 1
        if char == "?":
            regex.append(".")
        elif char == "[":
            start = i + (1 if i < n and pattern[i] == "!" else 0)
            start += 1 if start < n and pattern[start] == "]" else 0
            end = closing[start] if start < n else n
            if end >= n:  # no closing bracket: a literal [
                regex.append("\\[")
                continue
            regex.append(_set(pattern, i, end))
            i = end + 1
        else:
            regex.append(re.escape(char))
    segments.append(("".join(regex), width))
    return segments


def _set(pattern: str, i: int, j: int) -> str:
    """The set ``pattern[i:j]`` (between its brackets) for ``re``, read exactly as
    ``fnmatch.translate`` reads it (ranges, reversed ranges dropped, '-' and set
    operators escaped); linear in the set's length."""
    stuff = pattern[i:j]
    if "-" not in stuff:
        stuff = stuff.replace("\\", r"\\")
    else:
        chunks = []
        k = i + 2 if pattern[i] == "!" else i + 1
        while True:
            k = pattern.find("-", k, j)
            if k < 0:
                break
            chunks.append(pattern[i:k])
            i = k + 1
            k = k + 3
        chunk = pattern[i:j]
        if chunk:
            chunks.append(chunk)
        else:
            chunks[-1] += "-"
        for k in range(len(chunks) - 1, 0, -1):  # empty ranges are invalid in re
            if chunks[k - 1][-1] > chunks[k][0]:
                chunks[k - 1] = chunks[k - 1][:-1] + chunks[k][1:]
                del chunks[k]
        stuff = "-".join(s.replace("\\", r"\\").replace("-", r"\-") for s in chunks)
    stuff = re.sub(r"([&~|])", r"\\\1", stuff)
    if not stuff:
        return "(?!)"  # an empty range: never matches
    if stuff == "!":
        return "."
    if stuff[0] == "!":
        return "[^" + stuff[1:] + "]"
    if stuff[0] in ("^", "["):
        return "[\\" + stuff + "]"
    return "[" + stuff + "]"


def _next_closing(pattern: str) -> list[int]:
    """For each position, the index of the next ``]`` at or after it (len: none)."""
    result = [len(pattern)] * (len(pattern) + 1)
    for index in range(len(pattern) - 1, -1, -1):
        result[index] = index if pattern[index] == "]" else result[index + 1]
    return result
