"""Every (result type, format) pair renders: the pairs come from the registry
(``opregistry.formats.registry.RENDERERS`` and each renderer's ``formats``), so a result
type or a format added tomorrow is tested here, or fails here for want of a sample.

No TensorFlow: check results of hand-written GraphDefs read statically, registry
results from the shipped database, and hand-built results where the real thing needs
TensorFlow (gradcheck)."""
from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_output_file import BLOCKED, CLEAN  # tests/unit is on sys.path

from opregistry.formats import OutputFormat, Renderer, render, renderer_for, summary, table
from opregistry.formats.registry import RENDERERS, load, renderer_class

HERE = Path(__file__).resolve().parent


def _check_results(tmp: Path) -> list[Any]:
    from dataclasses import replace

    from opregistry import check
    from opregistry.model.results import (
        CheckResult,
        Finding,
        GradientStop,
        OutputReport,
        PartialPath,
        Target,
    )

    (tmp / "blocked.pbtxt").write_text(BLOCKED)
    (tmp / "clean.pbtxt").write_text(CLEAN)
    blocked = check(str(tmp / "blocked.pbtxt"), release="2.21.0")
    clean = check(str(tmp / "clean.pbtxt"), release="2.21.0")
    assert blocked.findings and not clean.findings
    # what a static read of a pbtxt cannot give: two MetaGraphs, an op library's op,
    # a partial path, a site, a finding with no op to name, a name with a control
    # character and a quote
    op = GradientStop("am\x1b", "ArgMax", None, "none", site=f"{tmp / 'model.py'}:3")
    library = GradientStop("cf", "CaseFoldUTF8", "f", "missing", library="tensorflow-text 2.21.1")
    rich = CheckResult(
        release="2.21.0", source=str(tmp), unknown_ops=["Mystery\x07Op"],
        findings=[Finding("serving_default", 'y"', "variable", "w", (op, library), "serve"),
                  Finding("train", "loss", "input", "x", (), "train")],
        partial_paths=[PartialPath("serving_default", "z", "variable", "w", (op,), "serve")],
        outputs=[OutputReport("serving_default", 'y"', blocked=["w"], meta_graph="serve"),
                 OutputReport("train", "loss", blocked=["x"], meta_graph="train")],
        targets=[Target("variable", "w")],
        subgraphs=[([("k/am\x1b", "ArgMax", None), ("k/w", "VarHandleOp", "target"),
                     ('k/y"', "Identity", "output")], [("k/w", "k/am\x1b"),
                                                       ("k/am\x1b", 'k/y"')]),
                   ([], [])],
        library_ops={"CaseFoldUTF8": "tensorflow-text 2.21.1"})
    # check --xla: a finding kept, one a policy accepts (rendered with its rule)
    from opregistry.ignore_rules import Ignored, Rule
    from opregistry.model.results import XlaFinding

    fails = XlaFinding("serving_default", 'y"', "k/expm\x1b/while", "StatelessWhile", None,
                       "structure", "fails", "tensor_list_unknown_size", "no\nsize",
                       f"{tmp / 'model.py'}:9", "serve")
    accepted = XlaFinding("serving_default", 'y"', "k/pool", "MaxPoolWithArgmax", "f",
                          "forward", "fails", "MaxPoolWithArgmax", "no kernel")
    under_xla = replace(rich, xla=[fails], ignored=[Ignored(
        "xla", accepted, Rule("xla:op:MaxPool*", 'known"\x1b', origin="p.toml"))],
        outputs=[replace(o, xla="fails") for o in rich.outputs])
    return [blocked, clean, rich, replace(rich, findings=[], partial_paths=[]), under_xla,
            replace(under_xla, xla=[])]


def _gradcheck_results() -> list[Any]:
    from dataclasses import replace

    from opregistry.gradcheck.results import GradcheckResult, TargetCheck, Tolerance
    from opregistry.model.results import GradientStop

    ok = TargetCheck(1, "y", "input", "x", "ok", "jacobian", 1e-9, 1e-8, 1e-6, 2.0, 2.0)
    none = TargetCheck(1, "z", "variable", "w\x1b", "none", "directional", None, None, 1e-6,
                       None, 0.5, gradient="none", note="no gradient path",
                       stops=(GradientStop("am", "ArgMax", "f", "none",
                                                site="model.py:7"),))
    mismatch = TargetCheck(2, "y", "input", "x", "mismatch", "jacobian", 0.5, 0.25, 1e-6,
                           1.0, 1.5)
    result = GradcheckResult(source="model.py:make", dtype="float64", cast_note="",
                             tolerance=Tolerance("float64", 1e-3, 1e-6, 1e-5, "measured"),
                             order=2, seed=0, checks=[ok, none, mismatch], release="2.21.0",
                             forward_passes=12, nondeterminism=1e-12,
                             not_checked={"ref": "a TF1 reference variable"})
    ignored = replace(result, checks=[ok, replace(none, ignored_by="op:ArgMax: metrics")])
    return [result, ignored, replace(result, checks=[])]


def _samples(tmp: Path) -> dict[str, list[tuple[Any, dict[str, Any]]]]:
    """Result type -> (result, renderer options) samples, keyed as RENDERERS is."""
    from opregistry.model.check_files import CheckedModels
    from opregistry.registry import lookup as query
    from opregistry.registry.diff import diff
    from opregistry.registry.listings import Lookups, OpList, ReleaseList
    from opregistry.registry.probe_report import probe_report

    checks = _check_results(tmp)
    changes = diff("2.17.1", "2.18.1", sources=True)
    assert changes.changed_functions  # the source diff is shown
    report = probe_report("2.21")
    from opregistry.remedies.explain import explain
    found = [query.lookup(name) for name in ("ArgMax", "tf.math.floor", "CaseFoldUTF8")]
    return {
        "opregistry.model.results.CheckResult": [(c, {}) for c in checks],
        "opregistry.model.check_files.CheckedModels": [
            (CheckedModels((("a.pbtxt", checks[0]), ("b", checks[2]))), {}),
            (CheckedModels((("a.pbtxt", checks[0]), ("x", checks[4]))), {}),
            (CheckedModels(()), {})],
        "opregistry.gradcheck.results.GradcheckResult": [
            (g, options) for g in _gradcheck_results()
            for options in ({}, {"target": str(HERE / "test_renderers.py")})],
        "opregistry.registry.diff.DiffResult": [
            (changes, {}), (changes, {"source": True}),
            (diff("2.12.1", "2.21.0"), {"source": True, "rows": []}),
            (diff("2.12.1", "2.21.0"), {})],
        "opregistry.registry.probe_report.ProbeReport": [
            (report, {}), (report, {"details": True}),
            (probe_report(library="tensorflow-text"), {})],
        "opregistry.registry.listings.Lookups": [(Lookups(tuple(found)), {}),
                                              (Lookups(tuple(found[2:])), {})],
        "opregistry.registry.lookup.LookupResult": [(one, {}) for one in found],
        "opregistry.registry.listings.OpList": [
            (OpList(query.ops("2.21", status="no_gradient")), {}), (OpList(()), {})],
        "opregistry.registry.listings.ReleaseList": [
            (ReleaseList(query.releases()), {}),
            (ReleaseList(query.releases(library="tensorflow-text")), {}),
            (ReleaseList(query.releases(), xla=True), {})],
        "opregistry.remedies.explain.Explanation": [
            (explain(name), {}) for name in ("Round", "AdjustContrastv2", "integer_edge",
                                            "MatMul", "Shape")],
        **_database_samples(),
    }


def _database_samples() -> dict[str, list[tuple[Any, dict[str, Any]]]]:
    """What harvest, db load and db current show (hand-built: a harvest needs TF)."""
    from opregistry.db.loader import LoadedDocuments, LoadResult
    from opregistry.db.migrate import SchemaRevision
    from opregistry.harvest.runner import Harvested, HarvestOutcome

    ok = HarvestOutcome("tensorflow 2.21.0", True, "2.21.0", "tensorflow-cpu", 1500,
                        seconds=12.345, document_path="h/2.21.0.json")
    text = HarvestOutcome("tensorflow-text\x1b 2.21.1", True, "2.21.0", "tensorflow-cpu",
                          40, replaced=True, library="tensorflow-text 2.21.1")
    failed = HarvestOutcome("tensorflow 1.2.0", False, error="no wheel for Python 3.12")
    loaded = LoadResult("2.21.0", "tensorflow-cpu", 1500, False, 1500, 700)
    return {
        "opregistry.harvest.runner.Harvested": [
            (Harvested((ok, text, failed), "x.db"), {}), (Harvested((ok,), "x.db"), {})],
        "opregistry.db.loader.LoadedDocuments": [
            (LoadedDocuments((("a.json", loaded), ("b\x07.json", loaded))), {})],
        "opregistry.db.migrate.SchemaRevision": [
            (SchemaRevision("0006_xla", ("0006_xla",)), {}),
            (SchemaRevision(None, ("0006_xla",)), {})],
    }


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
    return _samples(tmp_path_factory.mktemp("models"))


def test_every_registered_type_has_a_sample_and_every_sample_a_renderer(samples):
    assert set(samples) == set(RENDERERS)


def _pairs() -> list[tuple[str, OutputFormat]]:
    return [(name, fmt) for name, path in RENDERERS.items() for fmt in load(path).formats]


def _sarif(text: str, result: Any) -> None:
    log = json.loads(text)
    assert log["version"] == "2.1.0" and "\x1b" not in text  # JSON escapes it
    run = log["runs"][0]
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    # a check's: findings, partial paths, XLA findings, and those a policy ignores
    # (suppressed, with the rule's reason)
    expected = (len(result.findings) + len(result.partial_paths) + len(result.xla or ())
                + len(result.ignored) if hasattr(result, "findings")
                else len(result.problems))
    assert len(run["results"]) == expected
    suppressed = [r for r in run["results"] if r.get("suppressions")]
    assert len(suppressed) == (len(result.ignored) if hasattr(result, "findings") else 0)
    for found in suppressed:
        assert [(s["kind"], s["status"]) for s in found["suppressions"]] == [
            ("external", "accepted")]
        assert found["suppressions"][0]["justification"]
    for found in run["results"]:
        assert rule_ids[found["ruleIndex"]] == found["ruleId"]
        assert found["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1


def _dot(text: str, result: Any) -> None:
    assert text.startswith("digraph gradient_findings {") and text.endswith("}")
    # a cluster per finding, and per output with XLA findings (kept or accepted)
    xla = [*(result.xla or ()), *(i.item for i in result.ignored if i.kind == "xla")]
    assert text.count("subgraph cluster_") == len(result.findings) + len(
        {(x.signature, x.output) for x in xla})
    assert text.count("ignored: xla:") == len(xla) - len(result.xla or ())
    assert "\x1b" not in text and "\x07" not in text  # escaped, as every untrusted name


def _rows_format(fmt: OutputFormat) -> Callable[[str, Renderer[Any], Any], None]:
    def checked(text: str, renderer: Renderer[Any], result: Any) -> None:
        rows = renderer.rows(result)
        columns = renderer.columns(result) or (list(rows[0]) if rows else [])
        assert "\x1b" not in text and "\x07" not in text  # control characters escaped
        if fmt is OutputFormat.csv:
            blocks = text.split("\n\n")
            header = next(csv.reader(io.StringIO(blocks[0])), [])
            if len(blocks) == 1 and columns:  # one table: its header is the columns
                assert header[:len(columns)] == columns  # (+ a diff's source_diff)
                assert len(list(csv.DictReader(io.StringIO(text)))) == len(rows)
        elif rows:
            assert all(column in text for column in columns)
            if fmt is OutputFormat.markdown:
                assert "|--" in text
    return checked


@pytest.mark.parametrize("name, fmt", _pairs(), ids=[f"{n.rsplit('.', 1)[1]}-{f.value}"
                                                     for n, f in _pairs()])
def test_every_result_type_renders_in_every_format_of_its_renderer(name, fmt, samples):
    cls = renderer_class(load(name))
    for result, options in samples[name]:
        renderer = cls(**options)
        text = renderer.render(result, fmt)
        assert isinstance(text, str)
        assert text == render(result, fmt, **options)  # the registry finds the same
        if fmt is OutputFormat.json:
            assert json.loads(text) == json.loads(json.dumps(renderer.data(result)))
        elif fmt is OutputFormat.sarif:
            _sarif(text, result)
        elif fmt is OutputFormat.dot:
            _dot(text, result)
        elif type(renderer).rows is Renderer.rows:  # prose, not rows (explain)
            _prose(text, result, fmt)
        elif name.endswith(".SchemaRevision") and fmt is OutputFormat.table:
            assert text == (result.revision or "base")  # the bare revision, for scripts
        else:
            _rows_format(fmt)(text, renderer, result)
        assert isinstance(summary(result), str)


def _prose(text: str, result: Any, fmt: OutputFormat) -> None:
    """A renderer that writes text, not rows: the result's name and every remedy id,
    with each snippet fenced in markdown."""
    assert text.startswith(result.name) or text.startswith(f"reason {result.name}")
    for suggestion in result.suggestions:
        assert f"remedy {suggestion.remedy.id}:" in text
        if suggestion.snippet and fmt is OutputFormat.markdown:
            assert f"```python\n{suggestion.snippet.splitlines()[0]}" in text or \
                f"```toml\n{suggestion.snippet.splitlines()[0]}" in text


@pytest.mark.parametrize("name", sorted(RENDERERS))
def test_a_format_a_renderer_lacks_is_refused(name, samples):
    cls = renderer_class(load(name))
    result, options = samples[name][0]
    for fmt in set(OutputFormat) - set(cls.formats):
        with pytest.raises(ValueError, match=f"no {fmt.value} format"):
            cls(**options).render(result, fmt)


def test_an_unregistered_type_is_a_type_error():
    with pytest.raises(TypeError, match="no renderer for builtins.dict"):
        renderer_for({})


def test_each_command_offers_the_formats_of_its_result():
    """--format's choices come from the renderer: a format added to a renderer is a
    choice of its command, and one that no renderer of the command has is not."""
    from opregistry.cli.app import cli_command
    from opregistry.formats.check import CheckRenderer
    from opregistry.formats.gradcheck import GradcheckRenderer
    from opregistry.formats.remedies import ExplainRenderer

    commands = cli_command().commands

    def choices(command: str) -> list[str]:
        param = next(p for p in commands[command].params if p.name == "fmt")
        return param.metavar.strip("[]").split("|")

    assert choices("check") == [f.value for f in CheckRenderer.formats]
    assert choices("gradcheck") == [f.value for f in GradcheckRenderer.formats]
    assert choices("explain") == [f.value for f in ExplainRenderer.formats]
    for command in ("lookup", "ops", "releases", "diff", "upgrade-check", "probe-report",
                    "check-files"):
        assert choices(command) == [f.value for f in Renderer.formats], command


def _gfm_cells(line: str) -> list[str]:
    """A GitHub-flavoured markdown table row's cells, as GitHub renders them (cmark-gfm):
    a backslash and the next character are one unit, an unescaped ``|`` ends a cell,
    ``\\|`` in a cell is a pipe, then the inline backslash escapes of punctuation."""
    cells, cell, chars = [], "", iter(line.strip()[1:-1])
    for char in chars:
        if char == "\\":
            cell += char + next(chars, "")
        elif char == "|":
            cells.append(cell)
            cell = ""
        else:
            cell += char
    return [re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", c.replace("\\|", "|")).strip()
            for c in [*cells, cell]]


def test_a_name_with_a_pipe_or_backslash_stays_one_markdown_cell():
    names = ["scope|op", "a\\|b", "tail\\", "plain"]
    text = table([{"name": n, "status": "none"} for n in names], style="github")
    assert [_gfm_cells(line) for line in text.splitlines()[2:]] == \
        [[n, "none"] for n in names]


def test_check_files_json_shows_each_model_as_check_json_does(samples):
    """check-files' JSON is check's JSON per model (remedies included), with the path."""
    from opregistry.formats import OutputFormat, render
    from opregistry.model.check_files import CheckedModels

    checks = [c for c, _ in samples["opregistry.model.results.CheckResult"]]
    blocked = next(c for c in checks if c.findings)
    shown = json.loads(render(CheckedModels((("a.pbtxt", blocked),)), OutputFormat.json))
    alone = json.loads(render(blocked, OutputFormat.json))
    assert shown == [{"model": "a.pbtxt", **alone}]
    assert alone["remedies"]  # the blocked model has remedies to show


# -- where users meet a result: str(), repr(), a notebook ----------------------------


@pytest.mark.parametrize("name", sorted(RENDERERS))
def test_every_result_reads_well_in_str_repr_and_a_notebook(name, samples):
    """str() is the command's table (its summary where the table is empty), a
    notebook shows the markdown table and the summary, repr() is one short line."""
    from opregistry.shown import Shown

    assert issubclass(load(name), Shown), f"{name}: add Shown to show it"
    for result, options in samples[name]:
        if options:
            continue  # what a command adds (--source, --details): not the result's own
        said = summary(result)
        text = render(result, "table").rstrip("\n")
        assert str(result) == (text or said or f"{type(result).__name__}: nothing to show")
        markdown = result._repr_markdown_()
        assert markdown.startswith(render(result, "markdown").rstrip("\n")), name
        assert " ".join(said.split())[:40] in " ".join(markdown.split()), name
        shown = repr(result)
        assert "\n" not in shown and len(shown) <= 200, shown
        assert shown.startswith(f"<{type(result).__name__}"), shown
        if said:
            assert " ".join(said.split())[:40] in shown, shown
