"""One name for an op where a gradient stops: ``check``'s findings and partial paths,
``gradcheck``'s checks and the guard's warnings all hold ``GradientStop``, and no other
class of the package repeats its fields. No TensorFlow."""
from __future__ import annotations

import ast
import re
import typing
import warnings
from pathlib import Path

import opregistry
from opregistry.gradcheck.results import GradcheckResult, TargetCheck
from opregistry.guard.actions import GuardPolicy, Lost, NonDifferentiableWarning
from opregistry.guard.graphs import Verdict
from opregistry.model.results import CheckResult, Finding, GradientStop, PartialPath

PACKAGE = Path(opregistry.__file__).parent


def test_check_gradcheck_and_the_guard_hold_the_same_stop_type():
    stops = tuple[GradientStop, ...]
    assert typing.get_type_hints(Finding)["stops"] == stops
    assert typing.get_type_hints(PartialPath)["stops"] == stops
    assert typing.get_type_hints(TargetCheck)["stops"] == stops
    assert typing.get_type_hints(Lost)["stops"] == stops
    assert typing.get_type_hints(Verdict)["stops"] == stops
    for owner in (CheckResult, GradcheckResult):
        hints = typing.get_type_hints(getattr(owner, "stops").fget)
        assert hints["return"] == list[GradientStop], owner


def test_every_collection_of_stops_is_named_stops():
    """One name for the concept in the Python API and so in JSON (``to_dict`` and
    ``asdict`` take field names): every field or property of the package holding
    GradientStops (SecondOrderOps too) is ``stops``, bar the names before 0.5."""
    held = re.compile(r"(tuple|list)\[(GradientStop|SecondOrderOp), \.\.\.\]|"
                      r"list\[(GradientStop|SecondOrderOp)\]")
    old = {"blocking_ops", "stopping_ops", "ops"}  # properties returning ``stops``
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for cls in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(cls, ast.ClassDef):
                continue
            for s in cls.body:
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                    name, annotation = s.target.id, s.annotation
                elif isinstance(s, ast.FunctionDef) and s.returns is not None and any(
                        isinstance(d, ast.Name) and d.id == "property"
                        for d in s.decorator_list):
                    name, annotation = s.name, s.returns
                    if name in old and ast.unparse(s.body[-1]) == "return self.stops":
                        continue
                else:
                    continue
                if held.fullmatch(ast.unparse(annotation)) and name != "stops":
                    found.append(f"{path.relative_to(PACKAGE)}:{cls.name}.{name}")
    assert found == []


def test_the_names_before_0_5_still_read():
    stop = GradientStop("am", "ArgMax", None, "none")
    finding = Finding("s", "y", "variable", "w", (stop,))
    partial = PartialPath("s", "y", "variable", "w", (stop,))
    result = CheckResult("2.21.0", "m", [finding], [], [], partial_paths=[partial])
    assert finding.blocking_ops == finding.stops == (stop,) and partial.ops == (stop,)
    assert result.stopping_ops == result.stops == [stop, stop]
    assert "stops" in result.to_dict()["findings"][0]
    assert "blocking_ops" not in result.to_dict()["findings"][0]


def test_no_other_class_repeats_the_stop_fields():
    """A class with a node, an op and a reason is a second name for GradientStop."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                fields = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign)
                          and isinstance(s.target, ast.Name)}
                if {"node", "op", "reason"} <= fields:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.name}")
    assert found == ["model/results.py:GradientStop"]


def test_a_guard_warning_names_each_stop_with_its_line_and_reason():
    stop = GradientStop("model/ArgMax", "ArgMax", None, "none", site="train.py:12")
    inner = GradientStop("Round", "Round", "step_fn", "none")  # its line unknown
    why = {stop: "none: ArgMax's gradient returns None for every input"}
    lost = Lost("variable 'dense/kernel'", "none", "GradientTape.gradient",
                ("train.py", 20), "Mean 'Mean'", ("train.py", 14), (stop, inner),
                "TensorFlow 2.21.0 from the database", why=why)
    assert lost.keys() == [("variable 'dense/kernel'", "ArgMax", "train.py:12"),
                           ("variable 'dense/kernel'", "Round", None)]
    assert hash(lost) == hash(Lost(**{**lost.__dict__, "why": {}}))  # hashable, as before
    policy = GuardPolicy("warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        policy.handle([lost])
    (warning,) = [w for w in caught if w.category is NonDifferentiableWarning]
    text = str(warning.message)
    assert "  ArgMax 'model/ArgMax' created at train.py:12: none: ArgMax's gradient " \
        "returns None for every input" in text
    # no sentence from the facts: the reason itself; no line: said so
    assert "  Round 'Round' in function step_fn created at an unknown line: none" in text
    summary = policy.summary()
    assert "opregistry.guard: 1 target without a gradient, 2 sites" in summary
    assert "    ArgMax 'model/ArgMax' created at train.py:12: none: ArgMax's" in summary


def test_the_old_name_still_imports():
    """``BlockingOp`` (its name before 0.5) is the same class, outside ``__all__``."""
    from opregistry.model.results import BlockingOp

    assert opregistry.BlockingOp is BlockingOp is GradientStop
    assert "BlockingOp" not in opregistry.__all__
    # the registry's op-level stop: OpStop, Blocker before 0.5
    from opregistry.registry.lookup import Blocker, OpStop

    assert opregistry.Blocker is Blocker is OpStop is opregistry.OpStop
    assert "Blocker" not in opregistry.__all__ and "OpStop" in opregistry.__all__
