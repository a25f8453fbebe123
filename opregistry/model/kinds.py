"""What kind of model a path names, decided once for every command and the API: by
its name (a Keras file by suffix, a directory as a SavedModel or a TF Serving base
path, a ``.pbtxt`` as a text GraphDef, any other file as a binary GraphDef). Content is
the sniffer's (``model/sniff.py``) and the readers' to judge; nothing is read here."""
from __future__ import annotations

import os
from typing import Literal

ModelKind = Literal["keras", "savedmodel", "pbtxt", "graphdef"]
KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")


def model_kind(path: str | os.PathLike[str]) -> ModelKind:
    """``keras`` (traced with TensorFlow), ``savedmodel`` (a directory, whatever its
    name, or its ``saved_model.pb``), ``pbtxt`` or ``graphdef`` (read statically)."""
    text = os.fspath(path)
    if os.path.isdir(text) or os.path.basename(text) == "saved_model.pb":
        return "savedmodel"
    if text.endswith(KERAS_SUFFIXES):
        return "keras"
    return "pbtxt" if text.endswith(".pbtxt") else "graphdef"


def saved_model_dir(path: str | os.PathLike[str]) -> str | None:
    """The SavedModel directory ``path`` names: the directory itself, or the folder of
    its ``saved_model.pb``; None for any other kind of model."""
    text = os.fspath(path)
    if model_kind(text) != "savedmodel":
        return None
    return text if os.path.isdir(text) else os.path.dirname(text) or "."


def model_file(path: str | os.PathLike[str]) -> str:
    """The file a model is in, for a report to point at: a SavedModel directory's
    ``saved_model.pb`` (where it has one), else the path itself."""
    text = os.fspath(path)
    saved = os.path.join(text, "saved_model.pb")
    if model_kind(text) == "savedmodel" and os.path.isdir(text) and os.path.exists(saved):
        return saved
    return text
