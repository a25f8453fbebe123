"""Is this file a model, by its content? For ``check-files`` (the pre-commit hook),
which is handed every file a commit touches: a SavedModel's ``saved_model.pb``, a
GraphDef whatever its name (``frozen_graph.pb``), a text GraphDef, a Keras file are
models; anything else (source, images, a SavedModel's ``fingerprint.pb`` and variables)
is not, and is left alone. Static: nothing is executed, TensorFlow is not imported."""
from __future__ import annotations

import re
import zipfile
from pathlib import Path

from opregistry.model.graph import ModelError
from opregistry.model.kinds import model_kind
from opregistry.model.readers import savedmodel
from opregistry.model.readers.structure import InvalidGraph

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
ZIP_MAGIC = b"PK\x03\x04"
# the first field of a text GraphDef (comments and blank lines before it)
_TEXT_GRAPH = re.compile(rb"\A(?:\s|#[^\n]*\n)*(?:node|library|versions)\s*:?\s*[{<]")
_HEAD = 4096
# the tag a serialized GraphDef (node, library, version, versions) or SavedModel
# (saved_model_schema_version, meta_graphs) starts with: writers emit fields in order
_FIRST_TAGS = frozenset({0x0A, 0x12, 0x18, 0x22, 0x08})


def model_of(path: str | Path) -> str | None:
    """The model ``path`` belongs to (a SavedModel's directory for its
    ``saved_model.pb``, else the file), or None when its content is no model. A path
    that does not exist, or a directory, is returned as it is: ``check`` judges it."""
    path = Path(path)
    if not path.exists() or path.is_dir():
        return str(path)  # check says what is wrong with it, or reads the directory
    if not path.is_file():
        return None  # a FIFO, a device: never read
    if model_kind(path) == "savedmodel":  # its saved_model.pb: the directory is the model
        return str(path.parent)
    try:
        with open(path, "rb") as file:
            head = file.read(_HEAD)
    except OSError:
        return None
    if model_kind(path) == "keras":  # check reads these by name: Keras content only
        return str(path) if _is_keras(path, head) else None
    if model_kind(path) == "pbtxt":
        return str(path) if _TEXT_GRAPH.match(head) else None
    if not head or head[0] not in _FIRST_TAGS:
        return None
    try:
        savedmodel.read(path)
    except InvalidGraph:
        return str(path)  # a model TF refuses: check says so (a forged file is not skipped)
    except ModelError:
        return None
    return str(path)


def _is_keras(path: Path, head: bytes) -> bool:
    if head.startswith(HDF5_MAGIC):
        return True
    if not head.startswith(ZIP_MAGIC):
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            return "config.json" in archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return False
