"""A ``.keras`` archive or an ``.h5`` file checked before Keras is given it: no member
named outside the archive, and no inflation bomb. Every member is inflated once, in
1 MiB pieces that are counted and dropped (its declared size is never trusted), and the
HDF5 weights (an ``.h5`` file, or the archive's ``model.weights.h5``) are read for their
datasets' sizes, which is what h5py allocates when Keras reads them. No TensorFlow;
h5py (which Keras needs) only for HDF5."""
from __future__ import annotations

import io
import os
import zipfile
import zlib
from typing import Any

from opregistry.errors import first_line
from opregistry.model.graph import ModelError, shown

MIB = 1 << 20
# what inflating may cost beyond the file's own bytes: every member and all of them
# together inflate to at most FLOOR + RATIO x the file's size (Keras stores members
# uncompressed, ratio 1; a re-zipped archive of real weights stays far below 2)
FLOOR, RATIO = 64 * MIB, 2
JSON_LIMIT = 8 * MIB  # config.json, metadata.json, an HDF5 model_config (real: < 2 MB)
_PIECE = MIB
_GZIP, _SHUFFLE = 1, 2  # HDF5 filter ids: deflate, byte shuffle


def limit_for(size: int) -> int:
    return FLOOR + RATIO * size


def check_keras_file(name: str) -> None:
    """Refuse, before Keras opens it, a ``.keras`` archive or ``.h5`` file that would
    write outside the archive or inflate past ``limit_for`` its size."""
    size = os.path.getsize(name)
    if name.endswith(".keras"):
        _check_archive(name, size)
    else:
        check_hdf5(name, name, limit_for(size))


def _check_archive(name: str, size: int) -> None:
    limit = limit_for(size)
    try:
        with zipfile.ZipFile(name) as archive:
            infos = archive.infolist()
            for info in infos:
                _check_name(name, info.filename)
            total = 0
            for info in infos:
                cap = min(limit, JSON_LIMIT) if info.filename.endswith(".json") else limit
                inflated = _inflate(name, archive, info, min(cap, limit - total))
                total += inflated
                if info.filename.endswith(".h5"):
                    with archive.open(info) as member:
                        data = member.read()  # (its size was bounded just above)
                    check_hdf5(name, io.BytesIO(data), limit,
                               f"archive member {shown(info.filename)}: ")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, zlib.error,
            NotImplementedError, RuntimeError) as exc:
        raise ModelError(f"{name}: not a Keras file ({first_line(exc, 200)})") from None
    except OSError as exc:
        raise ModelError(f"{name}: cannot read: {exc.strerror or exc}") from None


def _check_name(name: str, member: str) -> None:
    """A name that is absolute or climbs out (``../x``, ``C:\\x``) is refused (zipfile
    would skip it with a warning and Keras load the rest)."""
    parts = member.replace("\\", "/").split("/")
    if member.startswith(("/", "\\")) or ".." in parts or member[1:2] == ":" or \
            any(ord(c) < 32 for c in member):
        raise ModelError(f"{name}: archive member {shown(member)} would be written "
                         f"outside the archive (refused)")


def _inflate(name: str, archive: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int) -> int:
    """The member's inflated size, counted piece by piece; past ``cap`` a ModelError
    naming it (nothing more is inflated)."""
    total = 0
    with archive.open(info) as member:
        while True:
            piece = member.read(_PIECE)
            if not piece:
                return total
            total += len(piece)
            if total > cap:
                raise ModelError(
                    f"{name}: archive member {shown(info.filename)} inflates to more than "
                    f"{cap:,} bytes (refused: a .keras file of {os.path.getsize(name):,} "
                    f"bytes may inflate to {limit_for(os.path.getsize(name)):,} in all, a "
                    f"JSON member to {JSON_LIMIT:,})")


def check_hdf5(name: str, source: Any, limit: int, where: str = "") -> None:
    """Every dataset of the HDF5 file ``source`` (a path or a file object) holds at
    most ``limit`` bytes, all together too; a compressed one inflates chunk by chunk
    to no more than its chunks' size (deflate and shuffle only: Keras writes no
    filters); a JSON attribute (``model_config``) is at most JSON_LIMIT bytes."""
    try:
        import h5py
    except ImportError:  # pragma: no cover - Keras needs h5py
        raise ModelError(f"{name}: reading .h5 files needs h5py") from None
    total = 0
    try:
        with h5py.File(source, "r") as file:
            found: list[Any] = []
            file.visititems(lambda _, obj: found.append(obj))
            for obj in [file] + found:
                for key in obj.attrs:
                    if _storage_size(obj.attrs.get_id(key)) > JSON_LIMIT:
                        raise ModelError(f"{name}: {where}HDF5 attribute {shown(key)} of "
                                         f"{shown(obj.name)} holds more than {JSON_LIMIT:,} "
                                         f"bytes (refused)")
                if not isinstance(obj, h5py.Dataset):
                    continue
                nbytes = obj.size * obj.dtype.itemsize if obj.shape is not None else 0
                total += nbytes
                if total > limit:
                    raise ModelError(f"{name}: {where}HDF5 dataset {shown(obj.name)} makes "
                                     f"the weights {total:,} bytes, more than the {limit:,} "
                                     f"this file may inflate to (refused)")
                _check_chunks(name, where, obj)
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001 - h5py raises OSError, KeyError, ValueError...
        raise ModelError(f"{name}: {where}not a readable HDF5 file "
                         f"({first_line(exc, 200)})") from None


def _storage_size(attribute: Any) -> int:
    """An attribute's stored bytes; 0 where HDF5 cannot say (an empty one, or one
    whose variable-length data lives in the file's heap: no bigger than the file)."""
    try:
        return int(attribute.get_storage_size())
    except Exception:  # noqa: BLE001 - h5py raises a bare error for a size of 0
        return 0


def _check_chunks(name: str, where: str, dataset: Any) -> None:
    """A filtered dataset's chunks inflate to at most a chunk's size each (HDF5's
    deflate filter would grow its buffer to whatever a chunk holds)."""
    plist = dataset.id.get_create_plist()
    filters = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
    if not filters:
        return
    if set(filters) - {_GZIP, _SHUFFLE}:
        raise ModelError(f"{name}: {where}HDF5 dataset {shown(dataset.name)} uses filters "
                         f"{sorted(filters)} (refused: only deflate and shuffle are read)")
    if _GZIP not in filters:
        return
    chunk = dataset.chunks
    cap = dataset.dtype.itemsize
    for extent in chunk or ():
        cap *= extent
    for index in range(dataset.id.get_num_chunks()):
        offset = dataset.id.get_chunk_info(index).chunk_offset
        mask, raw = dataset.id.read_direct_chunk(offset)
        if mask & 1:  # deflate skipped for this chunk: stored as it is
            continue
        inflater = zlib.decompressobj()
        out = len(inflater.decompress(raw, cap + 1))
        if out > cap or inflater.unconsumed_tail:
            raise ModelError(f"{name}: {where}HDF5 dataset {shown(dataset.name)} has a "
                             f"chunk that inflates to more than its {cap:,} bytes (refused)")
