"""Mutations of text GraphDefs (``.pbtxt``): numbers and strings replaced by limits,
escapes that decode to invalid UTF-8, lines deleted or duplicated, braces unbalanced,
deep nesting, raw bytes that are not UTF-8."""
from __future__ import annotations

import random
import re

NUMBERS = ("1e400", "-1", "99999999999999999999", "0x7fffffffffffffff", "nan", "-inf",
           "1048576", "1000000000", "2147483648", "-9223372036854775809", "DT_INVALID",
           "DT_FLOAT_REF", "9999")
STRINGS = (r'"\377\376"', r'"\300"', '"x:abc"', '"x:"', '"y:1:2"', '""', '"^"', '"x:-1"',
           '"' + "a" * 10_000 + '"', r'"\u00e9"', '"unterminated')
_NUMBER = re.compile(r"(?<=: )-?[0-9][0-9.e+-]*|(?<=: )DT_[A-Z0-9_]+")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def _replace(text: str, pattern: re.Pattern[str], choices: tuple[str, ...],
             rng: random.Random) -> str:
    spots = list(pattern.finditer(text))
    if not spots:
        return text + "\n" + rng.choice(choices)
    for spot in rng.sample(spots, min(len(spots), rng.choice((1, 1, 3)))):
        start, end = spot.span()
        if text[start:end] == spot.group(0):  # still where it was (replacements shift)
            text = text[:start] + rng.choice(choices) + text[end:]
    return text


def t_number(text: str, rng: random.Random) -> str:
    return _replace(text, _NUMBER, NUMBERS, rng)


def t_string(text: str, rng: random.Random) -> str:
    return _replace(text, _STRING, STRINGS, rng)


def t_lines(text: str, rng: random.Random) -> str:
    lines = text.splitlines()
    if not lines:
        return text
    at = rng.randrange(len(lines))
    span = rng.randint(1, max(1, min(60, len(lines) - at)))
    roll = rng.random()
    if roll < 0.4:
        del lines[at:at + span]
    elif roll < 0.8:
        lines[at:at] = lines[at:at + span] * rng.choice((1, 2, 50))
    else:
        lines.insert(at, rng.choice(("{", "}", "node {", "attr {", "input: ", ":", "<")))
    return "\n".join(lines)


def t_nesting(text: str, rng: random.Random) -> str:
    """Deeply nested messages (the text parser recurses once per level)."""
    depth = rng.choice((50, 1000, 100_000))
    nested = "node { attr { key: \"a\" value { list { func { " + \
        "attr { key: \"b\" value { func { " * depth + "} } } " * depth + "} } } } }"
    return text + "\n" + nested


def t_truncate(text: str, rng: random.Random) -> str:
    return text[:rng.randrange(len(text) + 1)]


MUTATORS = [t_number, t_number, t_string, t_string, t_lines, t_lines, t_nesting, t_truncate]


def mutate(text: str, rng: random.Random) -> tuple[bytes, list[str]]:
    """One to three text mutations; sometimes raw bytes that are not UTF-8 as well."""
    names = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        mutator = rng.choice(MUTATORS)
        text = mutator(text, rng)
        names.append(mutator.__name__)
    data = text.encode("utf-8", "surrogatepass")
    if rng.random() < 0.05:
        at = rng.randrange(len(data) + 1)
        data = data[:at] + b"\xff\xc3(" + data[at:]
        names.append("raw bytes")
    return data, names
