"""The one bounded reader of policy files (``.opregistry.toml``, a ``pyproject.toml``
with ``[tool.opregistry]``, ``--policy FILE``): a policy file is untrusted input.

Before anything is parsed: a regular file only (opened non-blocking and checked on the
open descriptor, so a FIFO or device is refused without blocking), at most
``MAX_BYTES``, UTF-8, brackets nested at most ``MAX_DEPTH`` deep and keys of at most
``MAX_KEY_PARTS`` dotted parts (a linear scan that skips strings and comments). The TOML
parser's own RecursionError or MemoryError is still caught. Then every value read is
type-checked, and a rule's pattern and reason are bounded in length (``Rule`` checks the
pattern, ``load_policy`` the number of rules).
"""
from __future__ import annotations

import datetime
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

from opregistry.errors import PolicyError
from opregistry.text import printable

FILE_NAME = ".opregistry.toml"
MAX_BYTES = 1024 * 1024  # a policy of 10,000 rules is ~0.6 MB
MAX_DEPTH = 32  # arrays and inline tables nested (a policy needs 2)
MAX_KEY_PARTS = 32  # parts of one dotted key or table header (a policy needs 3)
MAX_REASON = 1000  # characters of a reason

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_SPECIAL = re.compile("[\"'#\n\\[\\]{},=.]")  # what _check_shape looks at


def find_policy_file(start: Path) -> Path | None:
    """The nearest ``.opregistry.toml``, else ``pyproject.toml`` with a
    ``[tool.opregistry]`` table, from ``start`` up (as ruff finds its configuration)."""
    for directory in [start, *start.resolve().parents]:
        candidate = directory / FILE_NAME
        if candidate.exists():
            return candidate
        pyproject = directory / "pyproject.toml"
        if pyproject.exists() and _opregistry_table(pyproject, read_toml(pyproject)):
            return pyproject
    return None


def file_entries(path: Path) -> list[dict[str, Any]]:
    """The ``ignore`` entries of a policy file, each checked (a table of a pattern,
    a reason and an optional ``expires`` date, as ``datetime.date``)."""
    data = read_toml(path)
    if path.name == "pyproject.toml":
        table = _opregistry_table(path, data) or {}
        where = f"{_shown(path)}: [tool.opregistry]"
    else:
        table, where = data, _shown(path)
    unknown = set(table) - {"ignore"}
    if unknown:
        raise PolicyError(f"{where}: unknown key {printable(repr(sorted(unknown)[0]))} "
                          "(a policy has 'ignore' rules)")
    entries = table.get("ignore", [])
    if not isinstance(entries, list):
        raise PolicyError(f"{where}: 'ignore' must be a list of rules")
    return [_entry(f"{_shown(path)}: ignore[{index}]", entry)
            for index, entry in enumerate(entries)]


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file read within the limits above, or one PolicyError naming it."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.9/3.10
        import tomli as tomllib
    text = _read_text(path)
    _check_shape(path, text)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"cannot read policy file {_shown(path)}: "
                          f"{printable(str(exc))}") from None
    except (RecursionError, MemoryError):
        raise PolicyError(f"cannot read policy file {_shown(path)}: nested too deeply "
                          "or too large to parse") from None


def _read_text(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {_shown(path)}: "
                          f"{exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PolicyError(f"cannot read policy file {_shown(path)}: not a regular file")
        if info.st_size > MAX_BYTES:
            raise PolicyError(f"policy file {_shown(path)} is {info.st_size:,} bytes; "
                              f"the limit is {MAX_BYTES:,}")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {_shown(path)}: "
                          f"{exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:  # grew while read
        raise PolicyError(f"policy file {_shown(path)} is over {MAX_BYTES:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(f"cannot read policy file {_shown(path)}: not UTF-8 "
                          f"(byte {exc.start})") from None


def _check_shape(path: Path, text: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH and keys of more than MAX_KEY_PARTS parts,
    in one pass outside strings and comments (where TOML's brackets and dots are)."""
    depth = dots = line = 0
    i, n = 0, len(text)
    while True:
        found = _SPECIAL.search(text, i)
        if found is None:
            return
        i = found.start()
        char = text[i]
        if char in "\"'":
            quote = text[i:i + 3] if text[i:i + 3] in ('"""', "'''") else char
            i = _string_end(text, i + len(quote), quote)
            continue
        if char == "#":
            newline = text.find("\n", i)
            i = n if newline < 0 else newline
            continue
        if char == "\n":
            line += 1
            dots = 0
        elif char in "[{":
            depth += 1
            dots = 0
            if depth > MAX_DEPTH:
                raise PolicyError(f"policy file {_shown(path)}, line {line + 1}: nested "
                                  f"more than {MAX_DEPTH} deep")
        elif char in "]}":
            depth = max(depth - 1, 0)
            dots = 0
        elif char in ",=":
            dots = 0
        else:  # "."
            dots += 1
            _check_key(path, dots, line)
        i += 1


def _check_key(path: Path, dots: int, line: int) -> None:
    # between two separators only a key holds more than one dot (a float or a time
    # holds one), so this counts a dotted key's or a table header's parts
    if dots + 1 > MAX_KEY_PARTS:
        raise PolicyError(f"policy file {_shown(path)}, line {line + 1}: a key of more "
                          f"than {MAX_KEY_PARTS} dotted parts")


def _string_end(text: str, i: int, quote: str) -> int:
    """The index after the string whose body starts at ``i`` (its line's or the text's
    end if it never closes: the parser then says what is wrong)."""
    limit = len(text)
    if len(quote) == 1:  # a one-line string
        newline = text.find("\n", i)
        limit = limit if newline < 0 else newline
    while True:
        end = text.find(quote, i, limit)
        if end < 0:
            return limit
        if quote[0] == '"':  # escapes: a quote after an odd run of backslashes is one
            backslashes = 0
            while end - backslashes - 1 >= i and text[end - backslashes - 1] == "\\":
                backslashes += 1
            if backslashes % 2:
                i = end + 1
                continue
        return end + len(quote)


def _opregistry_table(path: Path, data: dict[str, Any]) -> dict[str, Any] | None:
    """A pyproject.toml's ``[tool.opregistry]`` table, None if it has none."""
    tool = data.get("tool")
    if tool is None:
        return None
    if not isinstance(tool, dict):
        raise PolicyError(f"{_shown(path)}: 'tool' must be a table, not "
                          f"{_type(tool)}")
    table = tool.get("opregistry")
    if table is not None and not isinstance(table, dict):
        raise PolicyError(f"{_shown(path)}: 'tool.opregistry' must be a table, not "
                          f"{_type(table)}")
    return table


def _entry(where: str, entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise PolicyError(f"{where}: a rule is a table with pattern and reason")
    unknown = set(entry) - {"pattern", "reason", "expires"}
    if unknown:
        raise PolicyError(f"{where}: unknown key {printable(repr(sorted(unknown)[0]))}")
    pattern, reason = entry.get("pattern"), entry.get("reason")
    if not isinstance(pattern, str) or not pattern.strip():
        raise PolicyError(f"{where}: missing pattern")
    shown = printable(pattern.strip()[:100])
    if not isinstance(reason, str) or not reason.strip():
        raise PolicyError(f"{where} ({shown}): missing reason (every ignore says why)")
    if len(reason) > MAX_REASON:
        raise PolicyError(f"{where} ({shown}): a reason of {len(reason):,} characters; "
                          f"the limit is {MAX_REASON:,}")
    return {"pattern": pattern, "reason": reason,
            "expires": _date(f"{where} ({shown})", entry.get("expires"))}


def _date(where: str, value: Any) -> datetime.date | None:
    """``expires``: a TOML date (2027-06-30) or the string "2027-06-30", nothing else."""
    if value is None:
        return None
    if isinstance(value, str) and _DATE.fullmatch(value):
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            pass
    elif isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value
    shown = printable(repr(value) if isinstance(value, str) else str(value))[:60]
    raise PolicyError(f"{where}: expires {shown} is not a date (YYYY-MM-DD)")


def _type(value: Any) -> str:
    return {int: "an integer", float: "a float", str: "a string", bool: "a boolean",
            list: "an array"}.get(type(value), type(value).__name__)


def _shown(path: Path) -> str:
    return printable(str(path))
