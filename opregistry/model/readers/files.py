"""Model files read as untrusted input: their type and size checked on the open file,
the declared lengths of their first top-level fields checked against the file's size
before anything is allocated, and their bytes read once into one buffer."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from opregistry.model.graph import ModelError

MAX_MODEL_BYTES = 2 * 1024 ** 3  # protobuf's own limit for one message
# a text GraphDef: protobuf's text parser is pure Python, ~1-3 MB/s (64 MiB: under a
# minute); larger ones are refused with a hint to write the graph in binary
MAX_TEXT_BYTES = 64 * 1024 ** 2
# top-level fields whose tag and length are checked before a dense file is read (a
# SavedModel has 2-3; a GraphDef one per node, so the walk stops here); a sparse
# file (fewer blocks than bytes) is walked to its end, so holes are never read
FIELDS_CHECKED = 64


def read_bytes(path: Path, text: bool = False) -> bytes:
    """The file's bytes, its type and size checked on the open file before anything is
    read: a regular file (a FIFO or device swapped in after ``is_file`` is refused, the
    open does not block), at most MAX_MODEL_BYTES (MAX_TEXT_BYTES for text); for a
    binary file, its first FIELDS_CHECKED top-level fields (all of them in a sparse
    file) must each be a protobuf field that fits in the file: a zero-filled file, or
    a sparse one whose data ends in a hole, is refused after a few small reads."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ModelError(f"{path}: not a regular file")
            limit = MAX_TEXT_BYTES if text else MAX_MODEL_BYTES
            if info.st_size > limit:
                what = "a text GraphDef may be (write it as a binary .pb)" if text else \
                    "a protobuf message can be"
                raise ModelError(f"{path}: {info.st_size} bytes is larger than {what} "
                                 f"({limit} bytes)")
            if not text:
                sparse = info.st_blocks * 512 < info.st_size
                _check_fields(path, file.fileno(), info.st_size,
                              None if sparse else FIELDS_CHECKED)
            # one buffer: read(n) allocates n bytes and fills them (one more byte asked
            # for, to see the file grow; the result shrinks in place)
            data = file.read(info.st_size + 1)
            if len(data) > limit:
                raise ModelError(f"{path}: larger than {limit} bytes")
            return data
    except OSError as exc:
        raise ModelError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _check_fields(path: Path, fd: int, size: int, fields: int | None) -> None:
    """Walk the first ``fields`` top-level fields (None: all) with small reads: each
    starts with a tag (a field number and a wire type) and ends within the file."""
    pos = count = 0
    while pos < size and (fields is None or count < fields):
        count += 1
        head = os.pread(fd, 20, pos)  # a tag and a length or value: 20 bytes at most
        end = _field_end(head)
        if end is None:
            where = "its first bytes are" if pos == 0 else f"its bytes at offset {pos} are"
            raise ModelError(f"{path}: not a GraphDef or SavedModel ({where} no protobuf "
                             f"field)")
        if pos + end > size:
            what = "its first bytes are no protobuf field" if pos == 0 else \
                f"the field at offset {pos} ends {pos + end - size:,} bytes past the file's end"
            raise ModelError(f"{path}: not a GraphDef or SavedModel ({what})")
        pos += end


def _field_end(head: bytes) -> int | None:
    """The length of the field ``head`` starts (tag, length or value, content); None
    if it is none."""
    tag, pos = _varint(head, 0)
    if tag is None or tag >> 3 == 0:
        return None
    wire = tag & 7
    if wire == 0:
        value, pos = _varint(head, pos)
        return None if value is None else pos
    if wire == 1:
        return pos + 8
    if wire == 5:
        return pos + 4
    if wire == 2:
        length, pos = _varint(head, pos)
        return None if length is None else pos + length
    return None  # groups (3, 4) and the unused 6, 7: not in TensorFlow's messages


def _varint(data: bytes, pos: int) -> tuple[int | None, int]:
    value = shift = 0
    while pos < len(data) and shift < 64:
        value |= (data[pos] & 0x7F) << shift
        pos += 1
        if not data[pos - 1] & 0x80:
            return value, pos
        shift += 7
    return None, pos
