"""Byte-level mutations of protobuf files: flips, truncations, insertions, deleted and
duplicated chunks, and varints (values and lengths) set to huge or negative numbers,
found by walking the wire format (nested messages included)."""
from __future__ import annotations

import random

# values a varint is set to: limits of int32/int64/uint64, -1 (ten bytes), lengths far
# past the end of any file
HUGE = (2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 32 - 1, 2 ** 63 - 1, 2 ** 64 - 1, 1 << 20,
        (1 << 20) + 1, 10 ** 9, 10 ** 12, 0, 1, 127, 128, 255)
INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0x0A, 0x12, 0x08, 0x3A)


def encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative numbers as protobuf writes them: ten bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("bad varint")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        shift += 7
        if not byte & 0x80:
            return value, pos


def varints(data: bytes, limit: int = 4000) -> list[tuple[int, int, bool]]:
    """(start, end, is_length) of varints in ``data`` read as a protobuf message, nested
    length-delimited fields read as messages where they parse as one."""
    found: list[tuple[int, int, bool]] = []
    stack = [(0, len(data), 0)]
    while stack and len(found) < limit:
        start, end, depth = stack.pop()
        pos, local = start, []
        try:
            while pos < end:
                _, after = _varint(data, pos)
                tag = data[pos]
                pos = after
                wire = tag & 7
                if wire == 0:
                    _, after = _varint(data, pos)
                    local.append((pos, after, False))
                    pos = after
                elif wire == 2:
                    length, after = _varint(data, pos)
                    local.append((pos, after, True))
                    if after + length > end:
                        raise ValueError("past the end")
                    if depth < 12 and length:
                        stack.append((after, after + length, depth + 1))
                    pos = after + length
                elif wire == 1:
                    pos += 8
                elif wire == 5:
                    pos += 4
                else:
                    raise ValueError("wire type")
            if pos != end:
                raise ValueError("overrun")
        except (ValueError, IndexError):
            if depth:  # a string, not a message: no varints in it
                continue
        found.extend(local)
    return found


def flip_bits(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def set_bytes(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        out[rng.randrange(len(out))] = rng.choice(INTERESTING_BYTES)
    return bytes(out)


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[:rng.randrange(len(data))]


def insert(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data) + 1)
    junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    return data[:at] + junk + data[at:]


def delete_chunk(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + data[at + rng.randint(1, max(1, len(data) // 8)):]


def duplicate_chunk(data: bytes, rng: random.Random) -> bytes:
    """A chunk copied elsewhere (sometimes many times: repeated fields grow)."""
    at = rng.randrange(len(data))
    chunk = data[at:at + rng.randint(1, max(1, min(4096, len(data) // 4)))]
    where = rng.randrange(len(data) + 1)
    return data[:where] + chunk * rng.choice((1, 1, 2, 16, 256)) + data[where:]


def huge_varint(data: bytes, rng: random.Random) -> bytes:
    """One varint (a value, or the length of a nested message) set to a limit."""
    found = varints(data)
    if not found:
        return flip_bits(data, rng)
    start, end, is_length = rng.choice(found)
    if is_length and rng.random() < 0.5:
        value = _varint(data, start)[0] + rng.choice((1, 2, 7, -1, -2))
    else:
        value = rng.choice(HUGE) if rng.random() < 0.8 else -rng.randint(1, 2 ** 40)
    return data[:start] + encode_varint(value) + data[end:]


def swap_chunks(data: bytes, rng: random.Random) -> bytes:
    """A length-delimited field moved after another (order of repeated fields)."""
    found = [v for v in varints(data) if v[2]]
    if len(found) < 2:
        return truncate(data, rng)
    a, b = sorted(rng.sample(found, 2))
    return data[:a[0]] + data[b[0]:b[1]] + data[a[1]:b[0]] + data[a[0]:a[1]] + data[b[1]:]


MUTATORS = {f.__name__: f for f in (flip_bits, set_bytes, truncate, insert, delete_chunk,
                                    duplicate_chunk, huge_varint, huge_varint, swap_chunks)}


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, list[str]]:
    """One to three byte mutations of ``data``, and their names."""
    names = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        if not data:
            break
        name = rng.choice(list(MUTATORS))
        data = MUTATORS[name](data, rng)
        names.append(name)
    return data, names
