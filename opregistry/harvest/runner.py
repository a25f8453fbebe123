"""Run the collector in a TensorFlow environment (an interpreter, or a cached venv
built from a recipe) and load what it reports.

The collector always runs in a subprocess under the target interpreter, so a
crash or a hang in TensorFlow cannot take the caller down, and the caller never
imports TensorFlow itself.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from opregistry.db.location import DbLike
from opregistry.db.name_reads import traced_name
from opregistry.db.records import Document
from opregistry.errors import HarvestError, OpregistryError
from opregistry.files import write_atomically
from opregistry.harvest.environments import discard_venv, ensure_venv, last_error_line
from opregistry.harvest.recipes import (
    RECIPES,
    Recipe,
    is_requirement,
    library_for,
    recipe_for,
)
from opregistry.shown import Shown

__all__ = ["DEVICES", "RECIPES", "HarvestOutcome", "HarvestTarget", "Libraries", "NameTrace",
           "Recipe", "collect", "collector_command", "harvest", "iter_harvest", "recipe_for",
           "trace_names"]

# the in-environment harvester's entry point, run by path (inenv/__init__.py)
COLLECTOR = Path(__file__).resolve().parent / "inenv" / "__main__.py"
COLLECTOR_TIMEOUT_S = 30 * 60
# compiling ~420 ops and their gradients with XLA took over 30 minutes on a busy 2-core
# machine (2.19 under `nice -n 19`): a harvest with --xla gets longer
COLLECTOR_TIMEOUT_XLA_S = 3 * 60 * 60
# tracing every public name of a release: ~15 CPU seconds for TF 2.21's 2,185
TRACE_TIMEOUT_S = 30 * 60
COLLECTOR_NO_TF = 3  # the collector's exit code when TensorFlow cannot be imported
COLLECTOR_NO_PLUGIN = 5  # ... and when a plugin cannot be imported
# where a harvest compiles with XLA: the CPU here, a GPU on a host with one (``--device``)
DEVICES = ("CPU", "GPU")


# ------------------------------------------------------------------------- collecting


@dataclass(frozen=True)
class Libraries:
    """What a library harvest loads: modules or ``.py`` files to import, ``.so`` files
    to load, and optionally the name and version to store the release under."""

    plugins: tuple[str, ...] = ()
    op_libraries: tuple[str, ...] = ()
    name: str | None = None
    version: str | None = None

    def __bool__(self) -> bool:
        return bool(self.plugins or self.op_libraries)

    def arguments(self) -> list[str]:
        """The collector's arguments for them."""
        out: list[str] = []
        for path in self.op_libraries:
            out += ["--op-library", str(Path(path).resolve())]
        for spec in self.plugins:
            out += ["--plugin", str(Path(spec).resolve()) if spec.endswith(".py") else spec]
        if self.name:
            out += ["--library-name", self.name]
        if self.version:
            out += ["--library-version", self.version]
        return out


def collect(python: str | os.PathLike[str] | None = None, *, extra_imports: bool = True,
            probes: bool = True, numeric: bool = True,
            libraries: Libraries | None = None, xla: bool = False,
            device: str = "CPU") -> dict[str, Any]:
    """Run the collector under ``python`` (default: this interpreter); return its document.

    With ``probes`` every registered gradient function is also called on a symbolic
    op (and, with ``numeric``, checked against finite differences). With ``libraries``
    the document holds what those op libraries add. With ``xla`` (and ``probes``) each
    probed op and its gradient are also compiled with XLA on ``device`` (``GPU``: a
    device harvest, whose document the loader adds to the CPU harvest's release)."""
    interpreter = str(python or sys.executable)
    if not Path(interpreter).exists() and not shutil.which(interpreter):
        raise HarvestError(f"no such interpreter: {interpreter}")
    with tempfile.TemporaryDirectory(prefix="opregistry-") as tmp:
        out = Path(tmp) / "harvest.json"
        cmd, env = collector_command(interpreter, out, extra_imports=extra_imports,
                                     probes=probes, numeric=numeric, libraries=libraries,
                                     xla=xla, device=device)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                  timeout=collector_timeout(xla and probes),
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise HarvestError(f"{interpreter}: the collector timed out after "
                               f"{collector_timeout(xla and probes):.0f} s") from None
        except OSError as exc:
            raise HarvestError(f"{interpreter}: cannot run: {exc.strerror or exc}") from None
        if done.returncode == COLLECTOR_NO_TF:
            raise HarvestError(f"{interpreter} cannot import TensorFlow "
                               f"({last_error_line(done.stderr).split(': ', 1)[-1]})")
        if done.returncode == COLLECTOR_NO_PLUGIN:
            raise HarvestError(f"{interpreter}: "
                               f"{last_error_line(done.stderr).split(': ', 1)[-1]}")
        if done.returncode != 0 or not out.exists():
            reason = last_error_line(done.stderr)
            if done.returncode < 0:
                reason = f"killed by signal {-done.returncode}"
            raise HarvestError(f"{interpreter}: the collector failed: {reason}")
        try:
            document: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
            return document
        except ValueError as exc:
            raise HarvestError(f"{interpreter}: the collector wrote invalid JSON: {exc}") from None


def collector_timeout(xla: bool) -> float:
    """Seconds the collector may take: ``OPREGISTRY_COLLECTOR_TIMEOUT`` if set, else 30
    minutes (3 hours when it compiles with XLA)."""
    from opregistry.settings import COLLECTOR_TIMEOUT, seconds

    # at most a week: subprocess's timeout is a float, but "never" is not a timeout
    return seconds(COLLECTOR_TIMEOUT, float(COLLECTOR_TIMEOUT_XLA_S if xla else
                                            COLLECTOR_TIMEOUT_S), 1, 7 * 86400)


def collector_command(interpreter: str, out: str | os.PathLike[str], *,
                      extra_imports: bool = True, probes: bool = True, numeric: bool = True,
                      libraries: Libraries | None = None, xla: bool = False,
                      device: str = "CPU") -> tuple[list[str], dict[str, str]]:
    """The collector's command line and environment (see ``collect``)."""
    if device not in DEVICES:
        raise HarvestError(f"cannot compile on device {device!r}: {' or '.join(DEVICES)} "
                           "(TPU: not yet, see docs/xla.md)")
    if device != "CPU" and not (xla and probes):
        raise HarvestError(f"a {device} harvest compiles with XLA: it needs --xla and --probes")
    cmd = [interpreter, "-I", str(COLLECTOR), "--out", str(out)]
    if not extra_imports:
        cmd.append("--no-extra-imports")
    if probes:  # --xla: compile each probed op and its gradient with XLA (issue 25)
        # a device harvest keeps only its XLA rows: no numeric check to spend time on
        numeric = numeric and device == "CPU"
        cmd += ["--probes"] + ["--no-numeric"] * (not numeric) + ["--xla"] * xla
        if device != "CPU":
            cmd += ["--xla-device", device]
    if libraries:
        for path in libraries.op_libraries:
            if not Path(path).is_file():
                raise HarvestError(f"no such op library: {path}")
        cmd += libraries.arguments()
    # the CPU harvest hides GPUs (the facts are the CPU's); a GPU harvest needs them
    hidden = {"CUDA_VISIBLE_DEVICES": ""} if device == "CPU" else {}
    return cmd, dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **hidden)


class NameTrace(TypedDict, total=False):
    """What one public name's call builds: the argument family it was traced with and
    the op types of its graph, or ``family`` None and why it cannot be called."""

    family: str | None
    ops: list[str]
    why: str


def trace_names(python: str | os.PathLike[str] | None, names: list[str]
                ) -> dict[str, NameTrace]:
    """Call each public name (``tf.math.add``) under ``python`` with generated arguments
    and return what its call builds: name -> {"family", "ops"} (the op types TF traced),
    or {"family": None, "why"} (inenv/name_traces.py). One process of its own: the
    calls are arbitrary public functions, some of which change TF's global state."""
    interpreter = str(python or sys.executable)
    if not Path(interpreter).exists() and not shutil.which(interpreter):
        raise HarvestError(f"no such interpreter: {interpreter}")
    timeout = trace_timeout()
    try:
        done = subprocess.run([interpreter, "-I", str(COLLECTOR), "--name-traces"],
                              input=json.dumps(names), capture_output=True, text=True,
                              timeout=timeout, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                                                        CUDA_VISIBLE_DEVICES=""))
    except subprocess.TimeoutExpired:
        raise HarvestError(f"{interpreter}: tracing {len(names)} names timed out after "
                           f"{timeout:.0f} s") from None
    except OSError as exc:
        raise HarvestError(f"{interpreter}: cannot run: {exc.strerror or exc}") from None
    if done.returncode != 0:
        reason = last_error_line(done.stderr)
        if done.returncode < 0:
            reason = f"killed by signal {-done.returncode}"
        raise HarvestError(f"{interpreter}: tracing names failed: {reason}")
    try:
        traces: dict[str, NameTrace] = json.loads(done.stdout)
    except ValueError as exc:
        raise HarvestError(f"{interpreter}: the name tracer wrote invalid JSON: {exc}") from None
    return traces


def public_names(document: Document) -> list[str]:
    """A harvest document's public ``tf.*`` names, the ones to trace (``tf.raw_ops.*``
    are op names: their op is their name)."""
    return sorted({entry["name"] for entry in document.get("python_names") or ()
                   if traced_name(str(entry.get("name", "")))})


def with_name_traces(python: str | os.PathLike[str] | None, document: Document,
                     trace: bool = True) -> Document:
    """``document`` with ``name_traces``: each public name traced under ``python``
    (what the loader stores, and ``lookup``/``explain`` check names against)."""
    if trace:
        traces = trace_names(python, public_names(document))
        document["name_traces"] = [{"name": name, **found}
                                   for name, found in sorted(traces.items())]
    return document


def trace_timeout() -> float:
    """Seconds tracing a release's names may take: ``OPREGISTRY_TRACE_TIMEOUT`` if set,
    else 30 minutes."""
    from opregistry.settings import TRACE_TIMEOUT, seconds

    return seconds(TRACE_TIMEOUT, float(TRACE_TIMEOUT_S), 1, 7 * 86400)


# ---------------------------------------------------------------------------- harvest


@dataclass(frozen=True)
class HarvestTarget:
    """Something to harvest: an interpreter, or a TF release to install first."""

    python: str | None = None  # interpreter with TF, or the base for a new venv
    tf_version: str | None = None
    package: str | None = None
    # --plugin values: with tf_version, requirements to install (tensorflow-text==2.21.1)
    # or modules; otherwise modules or .py files to import
    plugins: tuple[str, ...] = ()
    op_libraries: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()  # modules to import besides the plugins' own
    library_name: str | None = None
    library_version: str | None = None

    @property
    def label(self) -> str:
        if self.tf_version:
            label = f"TensorFlow {self.tf_version}" + (
                f" ({self.package})" if self.package else "")
        else:
            label = self.python or sys.executable
        extra = [*self.plugins, *(Path(p).name for p in self.op_libraries)]
        return label + (f" + {', '.join(extra)}" if extra else "")

    def requirements(self) -> tuple[str, ...]:
        """The op libraries to install in the release's venv."""
        if not self.tf_version:
            wanted = [p for p in self.plugins if is_requirement(p)]
            if wanted:
                raise OpregistryError(
                    f"--plugin {wanted[0]} names a package to install: add --tf-version to "
                    "build an environment with it, or give the module to import")
            return ()
        return tuple(p if is_requirement(p) else p.replace("_", "-") for p in self.plugins
                     if not p.endswith(".py"))

    def libraries(self) -> Libraries:
        """What the collector loads: each plugin's modules, the .so files, ``imports``."""
        modules: list[str] = []
        for plugin in self.plugins:
            if self.tf_version and not plugin.endswith(".py"):
                modules += library_for(plugin).modules
            else:
                modules.append(plugin)
        modules += self.imports
        return Libraries(tuple(dict.fromkeys(modules)), self.op_libraries,
                         self.library_name, self.library_version)


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
    library: str | None = None  # "tensorflow-text 2.21.1" for an op library's release

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def harvest(targets: Iterable[HarvestTarget] | None = None, *, db: DbLike,
            rebuild_env: bool = False, discard_env: bool = False,
            save_documents: str | os.PathLike[str] | None = None,
            probes: bool = True, numeric: bool = True, xla: bool = False,
            device: str = "CPU", trace_names: bool = True,
            on_start: Callable[[HarvestTarget], None] | None = None) -> list[HarvestOutcome]:
    """Harvest each target into ``db``; a failing target does not stop the others.
    ``trace_names``: also call each public name of TensorFlow as TF traces it (about
    20 s a release), so ``lookup`` and ``explain`` check names against what TF built."""
    return list(iter_harvest(targets, db=db, rebuild_env=rebuild_env, discard_env=discard_env,
                             save_documents=save_documents, probes=probes, numeric=numeric,
                             xla=xla, device=device, trace_names=trace_names,
                             on_start=on_start))


def iter_harvest(targets: Iterable[HarvestTarget] | None = None, *, db: DbLike,
                 rebuild_env: bool = False, discard_env: bool = False,
                 save_documents: str | os.PathLike[str] | None = None,
                 probes: bool = True, numeric: bool = True, xla: bool = False,
                 device: str = "CPU", trace_names: bool = True,
                 on_start: Callable[[HarvestTarget], None] | None = None
                 ) -> Iterator[HarvestOutcome]:
    from opregistry.db.engine import make_engine
    from opregistry.db.loader import load
    from opregistry.db.migrate import ensure_current
    from opregistry.db.store import location_of

    location = location_of(db)
    engine = make_engine(location, create=True)
    try:  # a database the load would refuse is refused before minutes of harvesting
        ensure_current(engine)
    except OpregistryError:
        engine.dispose()
        raise
    if save_documents:  # before a harvest that takes a minute, not after it
        _save_directory(Path(save_documents))
    for target in list(targets or [HarvestTarget()]):
        if on_start:
            on_start(target)
        started = time.monotonic()
        try:
            document = _collect_target(target, rebuild_env, discard_env, probes, numeric, xla,
                                       device, trace_names)
            saved = None
            if save_documents:
                saved = _save(document, Path(save_documents))
            result = load(engine, document)
            yield HarvestOutcome(target.label, True, result.release, result.package, result.ops,
                                 result.replaced, None, time.monotonic() - started, saved,
                                 result.library)
        except OpregistryError as exc:
            yield HarvestOutcome(target.label, False, error=str(exc),
                                 seconds=time.monotonic() - started)
    engine.dispose()


def _collect_target(target: HarvestTarget, rebuild_env: bool, discard_env: bool, probes: bool,
                    numeric: bool, xla: bool = False, device: str = "CPU",
                    trace: bool = False) -> dict[str, Any]:
    libraries = target.libraries()
    # TensorFlow's own names, in a CPU harvest (a library's or a device's adds none)
    trace = trace and not libraries and device == "CPU"
    if not target.tf_version:
        target.requirements()  # a requirement without an environment to install it in
        return with_name_traces(target.python, collect(
            target.python, probes=probes, numeric=numeric, libraries=libraries, xla=xla,
            device=device), trace)
    recipe = recipe_for(target.tf_version, target.package, target.requirements())
    python = ensure_venv(recipe, target.python, rebuild=rebuild_env)
    try:
        return with_name_traces(python, collect(
            python, probes=probes, numeric=numeric, libraries=libraries, xla=xla,
            device=device), trace)
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
    rel, library = document["release"], document.get("library")
    name = f"{rel['package']}-{rel['version']}"
    if library:
        name = f"{library['name']}-{library['version']}+{name}"
    path = directory / f"{name}.json"
    if not _replaceable(path):
        raise HarvestError(f"cannot save harvest document {path}: a file that is not a "
                           "harvest document is there; nothing was replaced")
    try:
        write_atomically(path, json.dumps(document, sort_keys=True))
    except OSError as exc:
        raise HarvestError(f"cannot save harvest document {path}: "
                           f"{exc.strerror or exc}") from None
    return str(path)


def _replaceable(path: Path) -> bool:
    """Whether ``path`` is free, or an earlier harvest document we may replace (its
    first bytes say so: documents are written with sorted keys)."""
    if not os.path.lexists(path):
        return True
    if path.is_symlink() or not path.is_file():
        return False
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    from opregistry.harvest.inenv.document import FORMAT

    return head.startswith(b'{"') and f'"format": "{FORMAT}"'.encode() in head


@dataclass(frozen=True, repr=False)
class Harvested(Shown):
    """What ``harvest`` shows: each target's outcome, and the database they went into."""

    outcomes: tuple[HarvestOutcome, ...]
    into: str  # the database, described ("data/opregistry.sqlite")

    @property
    def failed(self) -> list[HarvestOutcome]:
        return [o for o in self.outcomes if not o.ok]
