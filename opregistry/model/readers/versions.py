"""TF Serving's model base paths: a folder of numbered SavedModel versions."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ServingVersion:
    """The version a TF Serving model base path (``base/1``, ``base/2``, ...) serves by
    default: the numerically largest."""

    path: Path
    version: int
    versions: int  # numbered folders in the base path
    ignored: tuple[str, ...]  # folders whose names are no version number

    def to_dict(self) -> dict[str, object]:
        return {"path": str(self.path), "version": self.version, "versions": self.versions,
                "ignored": list(self.ignored)}


def serving_version(path: str | os.PathLike[str]) -> ServingVersion | None:
    """The newest version under a TF Serving model base path: a folder without
    ``saved_model.pb`` whose subfolders are named by number, as TF Serving reads it
    (other names are ignored, ``00000123`` is version 123). None for any other path."""
    base = Path(path)
    try:
        if not base.is_dir() or (base / "saved_model.pb").exists() or \
                (base / "saved_model.pbtxt").exists():
            return None
        numbered, ignored = [], []
        for entry in sorted(os.scandir(base), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            if entry.name.isascii() and entry.name.isdigit():
                numbered.append((int(entry.name), entry.name))
            else:
                ignored.append(entry.name)
    except OSError:  # reported when the folder itself is read
        return None
    if not numbered:
        return None
    version, name = max(numbered)
    return ServingVersion(base / name, version, len(numbered), tuple(ignored))
