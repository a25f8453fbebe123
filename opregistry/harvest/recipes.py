"""What to install for a harvest: TensorFlow releases (the newest patch of each minor
line), tf-nightly, and the op libraries that can be harvested beside them.

Facts, not code: each entry was measured by installing it here into a fresh venv and
importing it (``shared/TF_RELEASES.md``, ``data/README.md``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from opregistry.errors import OpregistryError


@dataclass(frozen=True)
class Recipe:
    """How to install one TF release on x86_64 Linux (by default the newest patch of a
    minor line), with the op libraries to install beside it."""

    version: str
    python: str  # a major.minor that has wheels for it
    package: str
    pins: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()  # pip requirements: tensorflow-text==2.21.1

    @property
    def requirements(self) -> list[str]:
        return [f"{self.package}=={self.version}", *self.pins, *self.libraries]

    @property
    def name(self) -> str:
        """The cached venv's directory name: one per distinct set of requirements."""
        base = f"{self.package}-{self.version}-py{self.python}"
        extra = "+".join(re.sub(r"[^A-Za-z0-9.]+", "-", r) for r in self.libraries)
        return base + (f"+{extra}" if extra else "")


# Measured on x86_64 Linux with CPython from pyenv (shared/TF_RELEASES.md): the newest
# patch of each minor line, a Python with wheels for it, and what old releases need
# pinned (protobuf 4+ breaks `import tensorflow` up to 2.5). tensorflow-cpu does not
# exist for 1.13, 1.14, 1.15.5 and 2.0.x.
_PROTOBUF_3 = ("protobuf==3.20.3",)
RECIPES: dict[str, Recipe] = {r.version.rsplit(".", 1)[0]: r for r in (
    Recipe("1.13.2", "3.7", "tensorflow", _PROTOBUF_3),
    Recipe("1.14.0", "3.7", "tensorflow", _PROTOBUF_3),
    Recipe("1.15.5", "3.7", "tensorflow", _PROTOBUF_3),
    Recipe("2.0.4", "3.7", "tensorflow", _PROTOBUF_3),
    Recipe("2.1.4", "3.7", "tensorflow-cpu", _PROTOBUF_3),
    Recipe("2.2.3", "3.8", "tensorflow-cpu", _PROTOBUF_3),
    Recipe("2.3.4", "3.8", "tensorflow-cpu", _PROTOBUF_3),
    Recipe("2.4.4", "3.8", "tensorflow-cpu", _PROTOBUF_3),
    Recipe("2.5.3", "3.8", "tensorflow-cpu", _PROTOBUF_3),
    Recipe("2.6.5", "3.8", "tensorflow-cpu"),
    Recipe("2.7.4", "3.8", "tensorflow-cpu"),
    Recipe("2.8.4", "3.8", "tensorflow-cpu"),
    Recipe("2.9.3", "3.8", "tensorflow-cpu"),
    Recipe("2.10.1", "3.8", "tensorflow-cpu"),
    Recipe("2.11.1", "3.8", "tensorflow-cpu"),
    Recipe("2.12.1", "3.8", "tensorflow-cpu"),
    Recipe("2.13.1", "3.8", "tensorflow-cpu"),
    Recipe("2.14.1", "3.10", "tensorflow-cpu"),
    Recipe("2.15.1", "3.10", "tensorflow-cpu"),
    Recipe("2.16.2", "3.10", "tensorflow-cpu"),
    Recipe("2.17.1", "3.10", "tensorflow-cpu"),
    Recipe("2.18.1", "3.10", "tensorflow-cpu"),
    Recipe("2.19.1", "3.10", "tensorflow-cpu"),
    Recipe("2.20.0", "3.10", "tensorflow-cpu"),
    Recipe("2.21.0", "3.10", "tensorflow-cpu"),
)}


def recipe_for(version: str, package: str | None = None,
               libraries: tuple[str, ...] = ()) -> Recipe:
    """The recipe for ``2.12`` (newest patch), an exact ``2.12.0``, or ``nightly`` /
    ``2.23.0.dev20261026`` (tf-nightly), with ``libraries`` installed beside it (each
    library's own pins added)."""
    from dataclasses import replace

    known = [library_for(lib) for lib in libraries]
    # a library that needs the `tensorflow` package: installing it beside tensorflow-cpu
    # would pull `tensorflow` in as well, two TFs in one directory
    needed = {lib.package for lib in known if lib.package}
    recipe = _tensorflow_recipe(version, package or (needed.pop() if len(needed) == 1 else None))
    pins = tuple(dict.fromkeys(pin for lib in known for pin in lib.pins
                               if pin not in recipe.pins))
    return replace(recipe, pins=recipe.pins + pins, libraries=tuple(libraries))


def _tensorflow_recipe(version: str, package: str | None) -> Recipe:
    version = version.strip()
    if version == "nightly" or "dev" in version:
        exact = NIGHTLY.version if version == "nightly" else version
        return Recipe(exact, NIGHTLY.python, package or NIGHTLY.package, NIGHTLY.pins)
    parts = version.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise OpregistryError(f"not a TensorFlow version: {version!r}")
    minor = ".".join(parts[:2])
    base = RECIPES.get(minor)
    if base is None:
        raise OpregistryError(
            f"no install recipe for TensorFlow {version} (known: {', '.join(RECIPES)}); "
            "install it yourself and pass --python")
    exact = version if len(parts) > 2 else base.version
    chosen = package or base.package
    if chosen == "tensorflow-cpu" and (minor in ("1.13", "1.14", "2.0") or exact == "1.15.5"):
        raise OpregistryError(f"tensorflow-cpu {exact} does not exist; use --package tensorflow")
    return Recipe(exact, base.python, chosen, base.pins)


# tf-nightly: the version the shipped database was harvested with; ``--tf-version
# nightly`` installs exactly this one (a newer one: ``--tf-version 2.23.0.devYYYYMMDD``).
NIGHTLY = Recipe("2.23.0.dev20261026", "3.11", "tf-nightly")


@dataclass(frozen=True)
class Library:
    """An op library: its distribution, the modules whose import registers its ops and
    gradients (the collector also imports every module of the package that loads a
    .so or registers a gradient, and wakes its lazy loaders), what its install needs
    pinned, and the TensorFlow package it needs (None: either)."""

    distribution: str
    modules: tuple[str, ...]
    pins: tuple[str, ...] = ()
    package: str | None = None
    # the newest release that installs here, and the TF it was measured with
    version: str = ""
    tf_version: str = ""


# Measured here (data/README.md): each library's newest release that installs on x86_64
# Linux with Python 3.10, with the TensorFlow it supports.
LIBRARIES: dict[str, Library] = {lib.distribution: lib for lib in (
    # requires `tensorflow` (not -cpu) in every release
    Library("tensorflow-text", ("tensorflow_text",), package="tensorflow",
            version="2.21.1", tf_version="2.21.0"),
    # 0.37.1 is the last release; its .so files need TF 2.16-2.17 (undefined symbols after)
    Library("tensorflow-io", ("tensorflow_io",), ("tensorflow-io-gcs-filesystem==0.37.1",),
            version="0.37.1", tf_version="2.16.2"),
    # with tensorflow-cpu six of its eight .so files miss __cudaUnregisterFatBinary
    Library("tensorflow-addons", ("tensorflow_addons",), package="tensorflow",
            version="0.23.0", tf_version="2.15.1"),
    # pins tensorflow==2.19.0; ydf 0.16 is protobuf-6 gencode under TF's protobuf 5;
    # with tensorflow-cpu its training.so clashes on a proto descriptor
    Library("tensorflow-decision-forests", ("tensorflow_decision_forests",), ("ydf==0.15.0",),
            package="tensorflow", version="1.12.0", tf_version="2.19.0"),
    # tf-keras 2.18 requires `tensorflow`
    Library("tensorflow-quantum", ("tensorflow_quantum",), package="tensorflow",
            version="0.7.6", tf_version="2.18.1"),
    # the [cpu] extra pins tensorflow-cpu; `import deepmd.tf` loads both .so files and
    # imports deepmd.tf.op, which registers the gradients
    Library("deepmd-kit", ("deepmd.tf",), version="3.2.0", tf_version="2.21.0"),
)}

_REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._\-]*)(\[[A-Za-z0-9_,\-]+\])?\s*"
                          r"(?:(==|>=|<=|~=|!=|<|>)\s*(\S+))?$")


def requirement_name(requirement: str) -> str:
    """``tensorflow-text`` of ``tensorflow-text==2.21.1`` (normalised, PEP 503)."""
    match = _REQUIREMENT.match(requirement.strip())
    if not match:
        raise OpregistryError(f"not a package requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def shipped_library_requirement(library: Library) -> str:
    """What the shipped database installed for ``library`` (``deepmd-kit[cpu]==3.2.0``)."""
    extra = "[cpu]" if library.distribution == "deepmd-kit" else ""
    return f"{library.distribution}{extra}=={library.version}"


def library_for(requirement: str) -> Library:
    """The known library of a requirement, or one whose module is the distribution's
    name with underscores (``my-ops`` -> ``my_ops``)."""
    name = requirement_name(requirement)
    return LIBRARIES.get(name) or Library(name, (name.replace("-", "_"),))


def is_requirement(spec: str) -> bool:
    """Whether a ``--plugin`` value names a distribution to install (``tensorflow-text``,
    ``tensorflow-text==2.21.1``) rather than a module to import (``tensorflow_text``) or
    a ``.py`` file."""
    spec = spec.strip()
    if spec.endswith(".py") or "/" in spec:
        return False
    return bool(_REQUIREMENT.match(spec)) and ("-" in spec or any(
        op in spec for op in ("==", ">=", "<=", "~=", "!=", "<", ">")))
