from __future__ import annotations

import sys
from functools import partial
from typing import Any, List, Optional

import typer

from opregistry.cli.options import (
    DbOption,
    FormatOption,
    OptionalStr,
    OutputFileOption,
    TableFormat,
)
from opregistry.cli.output import emit, fail, guard_output, note
from opregistry.errors import EXIT_FINDINGS, EXIT_USAGE, OpregistryError
from opregistry.formats import render, summary
from opregistry.harvest.runner import Harvested, HarvestOutcome, HarvestTarget
from opregistry.text import printable


# long: most of its lines declare the command's options
def harvest_command(
    python: OptionalStr = typer.Option(
        None, "--python",
        help="Interpreter whose TensorFlow to harvest; with --tf-version, the Python to build "
             "the venv from."),
    tf_versions: Optional[List[str]] = typer.Option(
        None, "--tf-version",
        help="Install this release (2.12 = newest patch, 2.12.0, or nightly) in a cached venv "
             "and harvest it. Repeatable."),
    plugins: Optional[List[str]] = typer.Option(
        None, "--plugin", metavar="MODULE|FILE.py|PACKAGE==VERSION",
        help="Harvest what an op library adds: import MODULE (or FILE.py) before reading the "
             "registries; with --tf-version, PACKAGE==VERSION is installed beside TensorFlow. "
             "Stored as the library's own release. Repeatable."),
    op_libraries: Optional[List[str]] = typer.Option(
        None, "--op-library", metavar="FILE.so",
        help="Load FILE.so with tf.load_op_library before reading the registries (a library "
             "harvest, as --plugin). Repeatable."),
    imports: Optional[List[str]] = typer.Option(
        None, "--import", metavar="MODULE",
        help="With --plugin: also import MODULE (a library's submodule that registers ops)."),
    library_name: OptionalStr = typer.Option(
        None, "--library-name", help="Store the library release under this name (default: "
                                     "the plugin's distribution, or the .so's file name)."),
    library_version: OptionalStr = typer.Option(
        None, "--library-version", help="... and this version (default: the distribution's, "
                                        "or the .so's sha256 prefix)."),
    all_releases: bool = typer.Option(
        False, "--all-releases", help="Every minor line from 1.13 to 2.21 (newest patches)."),
    all_libraries: bool = typer.Option(
        False, "--all-libraries",
        help="Every op library of the shipped database, each with the TensorFlow it was "
             "measured with (tensorflow-text, -io, -addons, -decision-forests, -quantum, "
             "deepmd-kit)."),
    package: OptionalStr = typer.Option(
        None, "--package", help="tensorflow or tensorflow-cpu (default: per release)."),
    rebuild_env: bool = typer.Option(False, "--rebuild-env",
                                     help="Discard a cached venv and build it again."),
    discard_env: bool = typer.Option(False, "--discard-env",
                                     help="Delete each venv after harvesting it."),
    probes: bool = typer.Option(
        True, "--probes/--no-probes",
        help="Call every registered gradient function on a symbolic op (per-input results, "
             "second order)."),
    numeric: bool = typer.Option(
        True, "--numeric/--no-numeric", help="Check probed gradients against finite differences."),
    xla: bool = typer.Option(
        False, "--xla", help="Also compile each probed op and its gradient with XLA on the "
                             "CPU (about 0.3 s per op)."),
    device: str = typer.Option(
        "CPU", "--device", metavar="CPU|GPU",
        help="With --xla, compile on this device: GPU on a host with one adds GPU rows to "
             "the release already harvested on the CPU (see docs/xla.md)."),
    trace_names: bool = typer.Option(
        True, "--trace-names/--no-trace-names",
        help="Call each public tf.* name with generated arguments and record the ops TF "
             "builds (about 20 s a release): lookup and explain check names against them."),
    save_json: OptionalStr = typer.Option(
        None, "--save-json", metavar="DIR", help="Also keep each harvest document in DIR."),
    fmt: TableFormat = FormatOption,
    output_file: OptionalStr = OutputFileOption,
    db: OptionalStr = DbOption,
) -> None:
    """Harvest TensorFlow's op and gradient registries into a database.

    Without options, harvests the TensorFlow of this interpreter.
    """
    from opregistry.db.location import resolve
    from opregistry.harvest.recipes import LIBRARIES, shipped_library_requirement
    from opregistry.harvest.runner import DEVICES, RECIPES

    guard_output(output_file, db=db, paths=[python] if python else [])
    versions = list(tf_versions or [])
    if all_releases:
        versions += [r.version for r in RECIPES.values()]
    if imports and not (plugins or op_libraries):
        raise fail(OpregistryError("--import needs --plugin or --op-library"))
    if device != "CPU" and not (xla and probes):
        raise fail(OpregistryError("--device needs --xla (it says where XLA compiles) and "
                                   "the probes"))
    if device not in DEVICES:
        raise fail(OpregistryError(
            f"--device {device}: the harvester compiles on CPU or GPU (TPU: not yet, see "
            "docs/xla.md)"))
    target = partial(HarvestTarget, python=python, plugins=tuple(plugins or ()),
                     op_libraries=tuple(op_libraries or ()), imports=tuple(imports or ()),
                     library_name=library_name, library_version=library_version)
    if versions:
        targets = [target(tf_version=v, package=package) for v in versions]
    else:
        targets = [] if all_libraries else [target()]
    if all_libraries:
        targets += [HarvestTarget(python=python, tf_version=lib.tf_version,
                                  plugins=(shipped_library_requirement(lib),))
                    for lib in LIBRARIES.values()]
    try:  # the variables the harvest reads, checked before any work
        from opregistry.harvest.environments import cache_dir
        from opregistry.harvest.runner import collector_timeout

        collector_timeout(xla and probes)
        if any(t.tf_version for t in targets):
            cache_dir()
    except OpregistryError as exc:
        raise fail(exc) from None
    if (rebuild_env or discard_env) and any(t.tf_version for t in targets):
        from opregistry.harvest.environments import cache_dir

        when = "before building it again" if rebuild_env else "after harvesting it"
        note(f"{cache_dir() / 'venvs'}: deleting each release's venv {when} (only "
             "venvs opregistry built there)")  # say it before deleting
    try:
        location = resolve(db).writable()
        outcomes = _harvest(targets, location, dict(
            rebuild_env=rebuild_env, discard_env=discard_env, save_documents=save_json,
            probes=probes, numeric=numeric, xla=xla, device=device, trace_names=trace_names))
    except OpregistryError as exc:
        raise fail(exc) from None
    result = Harvested(tuple(outcomes), location.describe())
    failed = result.failed
    if len(outcomes) == 1 and failed:
        note(f"Error: {failed[0].error}")
        raise typer.Exit(code=EXIT_USAGE)
    if len(failed) < len(outcomes) or output_file is None:  # -o FILE is never written on exit 2
        emit(output_file, render(result, fmt))
    note(summary(result))
    if failed:
        raise typer.Exit(code=EXIT_USAGE if len(failed) == len(outcomes) else EXIT_FINDINGS)


class _Progress:
    """A one-line progress bar on stderr (a line per step when stderr is not a terminal)."""

    WIDTH = 30

    def __init__(self, total: int):
        self.total, self.finished, self.failed = total, 0, 0
        self.tty = sys.stderr.isatty()

    def _draw(self, text: str) -> None:
        filled = self.WIDTH * self.finished // self.total
        line = (f"[{'#' * filled}{'-' * (self.WIDTH - filled)}] "
                f"{self.finished}/{self.total} {printable(text)}")
        sys.stderr.write(("\r" + line.ljust(100)) if self.tty else line + "\n")
        sys.stderr.flush()

    def start(self, target: HarvestTarget) -> None:
        self._draw(f"harvesting {target.label}")

    def done(self, outcome: HarvestOutcome) -> None:
        self.finished += 1
        if not outcome.ok:
            self.failed += 1
            sys.stderr.write(("\n" if self.tty else "") +
                             printable(f"failed: {outcome.target}: {outcome.error}") + "\n")
        self._draw(f"{outcome.target}: {'ok' if outcome.ok else 'FAILED'}")
        if self.finished == self.total and self.tty:
            sys.stderr.write("\n")


def _harvest(targets: list[HarvestTarget], location: Any, options: dict[str, Any]
             ) -> list[Any]:
    """Harvest every target in turn, with a progress bar when there are several."""
    from opregistry.harvest.runner import iter_harvest

    outcomes = []
    bar = _Progress(len(targets)) if len(targets) > 1 else None
    for outcome in iter_harvest(targets, db=location, on_start=bar.start if bar else None,
                                **options):
        outcomes.append(outcome)
        if bar:
            bar.done(outcome)
    return outcomes
