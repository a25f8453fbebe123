"""Find or build TensorFlow environments, run the collector in them, load the results.

The collector always runs in a subprocess under the target interpreter, so a
crash or a hang in TensorFlow cannot take the caller down, and the caller never
imports TensorFlow itself.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opregistry.errors import HarvestError, OpregistryError

COLLECTOR = Path(__file__).resolve().parent / "collector.py"
COLLECTOR_TIMEOUT_S = 30 * 60
PIP_TIMEOUT_S = 30 * 60
READY_MARKER = ".opregistry-ready"
COLLECTOR_NO_TF = 3  # the collector's exit code when TensorFlow cannot be imported


@dataclass(frozen=True)
class Recipe:
    """How to install the newest patch of one TF minor line on x86_64 Linux."""

    version: str
    python: str  # a major.minor that has wheels for it
    package: str
    pins: tuple[str, ...] = ()


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


def recipe_for(version: str, package: str | None = None) -> Recipe:
    """The recipe for ``2.12`` (newest patch) or an exact ``2.12.0``."""
    parts = version.strip().split(".")
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


# ---------------------------------------------------------------------- interpreters


def find_python(minor: str) -> Path | None:
    """A CPython ``minor`` (e.g. ``3.7``): pyenv's versions first, then ``pythonX.Y`` on PATH."""
    roots = []
    if os.environ.get("PYENV_ROOT"):
        roots.append(Path(os.environ["PYENV_ROOT"]))
    roots.append(Path.home() / ".pyenv")
    for root in roots:
        versions = root / "versions"
        if not versions.is_dir():
            continue
        found = []
        for entry in versions.iterdir():
            match = re.fullmatch(re.escape(minor) + r"\.(\d+)", entry.name)
            python = entry / "bin" / "python"
            if match and python.exists():
                found.append((int(match.group(1)), python))
        if found:
            return max(found)[1]
    on_path = shutil.which(f"python{minor}")
    return Path(on_path) if on_path else None


def cache_dir() -> Path:
    explicit = os.environ.get("OPREGISTRY_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "opregistry"


def venv_path(recipe: Recipe) -> Path:
    return cache_dir() / "venvs" / f"{recipe.package}-{recipe.version}-py{recipe.python}"


def _run(cmd: list[str], timeout: int, what: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise HarvestError(f"{what} timed out after {timeout} s") from None
    except OSError as exc:
        raise HarvestError(f"{what} could not start: {exc.strerror or exc}") from None


def _last_error_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith(("ERROR:", "opregistry-collector:")) or "Error" in line:
            return line
    return lines[-1] if lines else "no output"


def ensure_venv(recipe: Recipe, base_python: str | os.PathLike[str] | None = None,
                rebuild: bool = False) -> Path:
    """The cached venv for ``recipe``, built first if needed; returns its python."""
    venv = venv_path(recipe)
    python = venv / "bin" / "python"
    if rebuild and venv.exists():
        shutil.rmtree(venv)
    if (venv / READY_MARKER).exists() and python.exists():
        return python
    if venv.exists():  # an interrupted build: start over
        shutil.rmtree(venv)
    base = Path(base_python) if base_python else find_python(recipe.python)
    if base is None:
        raise HarvestError(
            f"TensorFlow {recipe.version} needs Python {recipe.python}, and none was found "
            f"(looked in pyenv versions and for python{recipe.python} on PATH); "
            f"pass --python /path/to/python{recipe.python}")
    venv.parent.mkdir(parents=True, exist_ok=True)
    made = _run([str(base), "-m", "venv", str(venv)], 600, f"creating a venv with {base}")
    if made.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        raise HarvestError(f"creating a venv with {base} failed: {_last_error_line(made.stderr)}")
    install = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q",
               f"{recipe.package}=={recipe.version}", *recipe.pins]
    done = _run(install, PIP_TIMEOUT_S, f"installing {recipe.package}=={recipe.version}")
    if done.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        raise HarvestError(f"installing {recipe.package}=={recipe.version} failed: "
                           f"{_last_error_line(done.stderr)}")
    (venv / READY_MARKER).write_text(json.dumps(recipe.__dict__) + "\n")
    return python


def discard_venv(recipe: Recipe) -> bool:
    venv = venv_path(recipe)
    if venv.exists():
        shutil.rmtree(venv)
        return True
    return False


# ------------------------------------------------------------------------- collecting


def collect(python: str | os.PathLike[str] | None = None, *, extra_imports: bool = True,
            probes: bool = True, numeric: bool = True) -> dict[str, Any]:
    """Run the collector under ``python`` (default: this interpreter); return its document.

    With ``probes`` every registered gradient function is also called on a symbolic
    op (and, with ``numeric``, checked against finite differences)."""
    interpreter = str(python or sys.executable)
    if not Path(interpreter).exists() and not shutil.which(interpreter):
        raise HarvestError(f"no such interpreter: {interpreter}")
    with tempfile.TemporaryDirectory(prefix="opregistry-") as tmp:
        out = Path(tmp) / "harvest.json"
        cmd = [interpreter, "-I", str(COLLECTOR), "--out", str(out)]
        if not extra_imports:
            cmd.append("--no-extra-imports")
        if probes:
            cmd.append("--probes")
            if not numeric:
                cmd.append("--no-numeric")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                  timeout=COLLECTOR_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise HarvestError(f"{interpreter}: the collector timed out") from None
        except OSError as exc:
            raise HarvestError(f"{interpreter}: cannot run: {exc.strerror or exc}") from None
        if done.returncode == COLLECTOR_NO_TF:
            raise HarvestError(f"{interpreter} cannot import TensorFlow "
                               f"({_last_error_line(done.stderr).split(': ', 1)[-1]})")
        if done.returncode != 0 or not out.exists():
            reason = _last_error_line(done.stderr)
            if done.returncode < 0:
                reason = f"killed by signal {-done.returncode}"
            raise HarvestError(f"{interpreter}: the collector failed: {reason}")
        try:
            return json.loads(out.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise HarvestError(f"{interpreter}: the collector wrote invalid JSON: {exc}") from None


# ---------------------------------------------------------------------------- harvest


@dataclass(frozen=True)
class HarvestTarget:
    """Something to harvest: an interpreter, or a TF release to install first."""

    python: str | None = None  # interpreter with TF, or the base for a new venv
    tf_version: str | None = None
    package: str | None = None

    @property
    def label(self) -> str:
        if self.tf_version:
            return f"TensorFlow {self.tf_version}" + (f" ({self.package})" if self.package else "")
        return self.python or sys.executable


@dataclass(frozen=True)
class HarvestOutcome:
    target: str
    ok: bool
    release: str | None = None
    package: str | None = None
    ops: int = 0
    replaced: bool = False
    error: str | None = None
    seconds: float = 0.0
    document_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def harvest(targets: Iterable[HarvestTarget] | None = None, *, db: Any,
            rebuild_env: bool = False, discard_env: bool = False,
            save_documents: str | os.PathLike[str] | None = None,
            probes: bool = True, numeric: bool = True,
            on_start: Callable[[HarvestTarget], None] | None = None) -> list[HarvestOutcome]:
    """Harvest each target into ``db``; a failing target does not stop the others."""
    return list(iter_harvest(targets, db=db, rebuild_env=rebuild_env, discard_env=discard_env,
                             save_documents=save_documents, probes=probes, numeric=numeric,
                             on_start=on_start))


def iter_harvest(targets: Iterable[HarvestTarget] | None = None, *, db: Any,
                 rebuild_env: bool = False, discard_env: bool = False,
                 save_documents: str | os.PathLike[str] | None = None,
                 probes: bool = True, numeric: bool = True,
                 on_start: Callable[[HarvestTarget], None] | None = None
                 ) -> Iterator[HarvestOutcome]:
    from opregistry.db.engine import make_engine
    from opregistry.db.loader import load
    from opregistry.db.location import DatabaseLocation, resolve

    location = db if isinstance(db, DatabaseLocation) else resolve(db)
    engine = make_engine(location, create=True)
    if save_documents:  # before a harvest that takes a minute, not after it
        _save_directory(Path(save_documents))
    for target in list(targets or [HarvestTarget()]):
        if on_start:
            on_start(target)
        started = time.monotonic()
        try:
            document = _collect_target(target, rebuild_env, discard_env, probes, numeric)
            saved = None
            if save_documents:
                saved = _save(document, Path(save_documents))
            result = load(engine, document)
            yield HarvestOutcome(target.label, True, result.release, result.package, result.ops,
                                 result.replaced, None, time.monotonic() - started, saved)
        except OpregistryError as exc:
            yield HarvestOutcome(target.label, False, error=str(exc),
                                 seconds=time.monotonic() - started)
    engine.dispose()


def _collect_target(target: HarvestTarget, rebuild_env: bool, discard_env: bool, probes: bool,
                    numeric: bool) -> dict[str, Any]:
    if not target.tf_version:
        return collect(target.python, probes=probes, numeric=numeric)
    recipe = recipe_for(target.tf_version, target.package)
    python = ensure_venv(recipe, target.python, rebuild=rebuild_env)
    try:
        return collect(python, probes=probes, numeric=numeric)
    finally:
        if discard_env:
            discard_venv(recipe)


def _save_directory(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HarvestError(f"cannot save harvest documents in {directory}: "
                           f"{exc.strerror or exc}") from None


def _save(document: dict[str, Any], directory: Path) -> str:
    _save_directory(directory)
    rel = document["release"]
    path = directory / f"{rel['package']}-{rel['version']}.json"
    try:
        path.write_text(json.dumps(document, sort_keys=True), encoding="utf-8")
    except OSError as exc:
        raise HarvestError(f"cannot save harvest document {path}: "
                           f"{exc.strerror or exc}") from None
    return str(path)
