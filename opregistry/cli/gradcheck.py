from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, List, Optional

import typer

from opregistry.cli.options import (
    DbOption,
    IgnoreOption,
    OptionalList,
    OptionalStr,
    OutputFileOption,
    PolicyOption,
    ReleaseOption,
    load_cli_policy,
    report_policy,
)
from opregistry.cli.output import emit, fail, guard_output, note
from opregistry.errors import EXIT_FINDINGS, OpregistryError
from opregistry.formats import OutputFormat, format_choice, summary
from opregistry.formats.gradcheck import GradcheckRenderer
from opregistry.gradcheck.results import GradcheckError


class Mode(str, Enum):
    auto = "auto"
    full = "full"
    directional = "directional"


if TYPE_CHECKING:
    GradcheckFormat = OutputFormat
else:  # the formats a gradcheck result has (its renderer's): table ... sarif
    GradcheckFormat = format_choice("GradcheckFormat", GradcheckRenderer)


class Precision(str, Enum):
    float64 = "float64"
    float32 = "float32"


# long: most of its lines declare the command's options
def gradcheck_command(
    target: str = typer.Argument(
        ..., help="SavedModel directory, .keras / .h5 file, or file.py:function / "
                  "module:function returning (callable, inputs)."),
    signature: OptionalStr = typer.Option(
        None, "--signature", help="SavedModel signature (default: serving_default)."),
    tags: OptionalStr = typer.Option(
        None, "--tags", help="SavedModel MetaGraph tags (default: the only one, or serve)."),
    loss: OptionalStr = typer.Option(
        None, "--loss", help="Keras file: check this built-in Keras loss (e.g. mse) "
                             "against random targets instead of the raw outputs."),
    shape: OptionalList = typer.Option(
        None, "--shape", metavar="INPUT=DIMS",
        help="The shape of an input's sample, e.g. x=2,3 (needed for an input of unknown "
             "rank; fills unknown dimensions, else 1). Repeatable."),
    output: Optional[List[str]] = typer.Option(
        None, "--output", help="Only this output (name as reported). Repeatable."),
    training: bool = typer.Option(
        False, "--training", help="Keras: call the model in training mode (batch norm on "
                                  "batch statistics)."),
    order: int = typer.Option(1, "--order", min=1,
                              help="n: also orders 2 to n, each the gradient of the order "
                                   "below (2: the gradient of the gradient)."),
    precision: Precision = typer.Option(Precision.float64, "--dtype",
                                        help="Working precision to try first."),
    mode: Mode = typer.Option(Mode.auto, "--mode", help="auto: the full Jacobian for a small "
                              "call, random directions for a large one."),
    atol: Optional[float] = typer.Option(None, "--atol", help="Absolute tolerance."),
    rtol: Optional[float] = typer.Option(None, "--rtol", help="Relative tolerance."),
    step: Optional[float] = typer.Option(None, "--step", help="Finite-difference step."),
    directions: int = typer.Option(1, "--directions", min=1,
                                   help="Random directions per directional check."),
    seed: int = typer.Option(0, "--seed", help="Seed of inputs, projections, directions."),
    analysis: bool = typer.Option(True, "--analysis/--no-analysis",
                                  help="Name the ops behind a problem (static analysis)."),
    strict: bool = typer.Option(
        False, "--strict", help="Also exit 1 for policy rules that expired or matched "
                                "nothing."),
    ignore: OptionalList = IgnoreOption,
    policy_file: OptionalStr = PolicyOption,
    release: OptionalStr = ReleaseOption,
    fmt: GradcheckFormat = typer.Option(GradcheckFormat.table, "--format", "-f",
                                        case_sensitive=False, help="Output format."),
    output_file: OptionalStr = OutputFileOption,
    db: OptionalStr = DbOption,
) -> None:
    """Compare TensorFlow's gradients with finite differences, per input and variable:
    ok, mismatch, none, zero or non-smooth, and the ops responsible."""
    from opregistry.gradcheck.api import gradcheck
    from opregistry.gradcheck.targets import load_target, parse_shapes
    from opregistry.ignore_rules import apply_to_gradcheck
    from opregistry.registry.release_choice import choose_release

    guard_output(output_file, db=db, paths=[target_path(target)], policy=(policy_file,))
    policy = load_cli_policy(ignore, policy_file)
    chosen = None
    if release is not None or analysis:  # (a database that cannot answer without --tf:
        try:                             # the check still runs, its ops unnamed, said so)
            chosen = choose_release(release, db)
        except OpregistryError as exc:
            if release is not None:
                raise fail(exc) from None
    try:
        check_target(target)  # before TensorFlow is imported: seconds saved on a typo
        fn, inputs, name = load_target(target, signature=signature, loss=loss, tags=tags,
                                        seed=seed, shapes=parse_shapes(shape or []))
        result = gradcheck(fn, *inputs, order=order, dtype=precision.value, mode=mode.value,
                           atol=atol, rtol=rtol, step=step, directions=directions,
                           seed=seed, analyse=analysis,
                           release=chosen.version if chosen else release, db=db, source=name,
                           outputs=output or None, training=training)
    except OpregistryError as exc:
        raise fail(exc) from None
    result = apply_to_gradcheck(result, policy)
    # SARIF's artifact is the target as given, not the result's display name
    emit(output_file, GradcheckRenderer(target=target).render(result, fmt.value))
    if chosen is not None:
        note(chosen.note)
    note(summary(result))
    report_policy(policy, len(result.ignored))
    if not result.ok or (strict and policy.stale):
        raise typer.Exit(code=EXIT_FINDINGS)


def target_path(target: str) -> str:
    """The file or folder a gradcheck target reads (``file.py`` of ``file.py:f``)."""
    import os

    path, _, function = target.rpartition(":")
    return target if os.path.exists(target) or not path else path


def check_target(target: str) -> None:
    """What ``load_target`` would refuse, said the way ``check`` says it, without
    TensorFlow."""
    import os

    from opregistry.model.kinds import model_file, model_kind, saved_model_dir

    path, _, function = target.rpartition(":")
    if os.path.exists(target) or not path:
        path, function = target, ""
    if function and path.endswith(".py") and not os.path.isfile(path):
        raise GradcheckError(f"{path}: no such file or directory")
    if function:
        return  # module:function, found by import
    if not os.path.exists(target):
        raise GradcheckError(f"{target}: no such file or directory")
    directory = saved_model_dir(target)  # a directory, or its saved_model.pb
    if directory is not None:
        if model_file(directory) == directory:
            raise GradcheckError(f"{target}: not a SavedModel directory (no saved_model.pb)")
    elif model_kind(target) != "keras":
        raise GradcheckError(f"{target}: not a SavedModel directory, .keras / .h5 file or "
                             "file.py:function (a GraphDef has no inputs to give values: "
                             "use check)")
