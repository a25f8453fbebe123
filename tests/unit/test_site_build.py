"""The site builder on a small hand-written database (no TensorFlow, no browser): the
export's records, releases labelled from their records, file names, change phrases."""
from __future__ import annotations

import json

import pytest
from documents import document as _document  # tests/unit is on sys.path
from documents import op as _op

from opregistry.db.engine import make_engine
from opregistry.db.loader import load
from opregistry.db.location import resolve
from opregistry.errors import OpregistryError, SiteError
from opregistry.registry.history import _records
from opregistry.site import build_site
from opregistry.site.export import _compact, as_script, from_script
from opregistry.site.html import file_names
from opregistry.site.op_page import changes


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("site") / "small.sqlite"
    engine = make_engine(resolve(path), create=True)
    load(engine, _document("2.1.0", [
        _op("Floor", "registered", "none", [("x", "none")]),
        _op("MatMul", "registered", "differentiable", [("a", "gradient"), ("b", "gradient")]),
        _op("_Hidden", "missing", public=False)]))
    load(engine, _document("2.2.0", [
        _op("Floor", "registered", "none", [("x", "none")]),
        _op("MatMul", "registered", "partial", [("a", "gradient"), ("b", "none")]),
        _op("NewOp", "missing")]))
    engine.dispose()
    return path


def test_the_export_has_one_record_per_op_with_an_entry_per_release(small_db, tmp_path):
    built = build_site(tmp_path / "site", db=small_db)
    assert (built.ops, built.releases) == (4, 2)
    data = json.loads((tmp_path / "site" / "data" / "ops.json").read_text())
    assert data["schema"] == "opregistry-site/1"
    assert list(data["ops"]) == ["Floor", "MatMul", "NewOp", "_Hidden"]  # hidden ops last
    matmul = data["ops"]["MatMul"]["releases"]
    assert matmul["2.2.0"]["state"] == "partial"
    assert [(i["position"], i["result"]) for i in matmul["2.2.0"]["inputs"]] == [
        (0, "gradient"), (1, "none")]
    assert set(data["ops"]["NewOp"]["releases"]) == {"2.2.0"}  # absent: no entry
    assert data["ops"]["_Hidden"]["hidden"] and not data["ops"]["Floor"]["hidden"]
    assert data["ops"]["Floor"]["python_names"] == {"tf.math.floor": [["2.1.0", "2.2.0"]]}
    page = (tmp_path / "site" / "ops" / "MatMul.html").read_text()
    assert "effective differentiable → partial" in page and "input b gradient → none" in page
    diff = (tmp_path / "site" / "diff" / "2.1.0--2.2.0.html").read_text()
    assert 'data-count="1"><h2 id="added">' in diff


def test_a_previous_site_is_replaced_and_anything_else_refused(small_db, tmp_path):
    build_site(tmp_path / "site", db=small_db)
    build_site(tmp_path / "site", db=small_db)  # a previous site: replaced
    (tmp_path / "site" / "stale.html").write_text("not ours")
    with pytest.raises(SiteError, match=r"does not prove opregistry wrote \(stale.html\)"):
        build_site(tmp_path / "site", db=small_db)
    assert (tmp_path / "site" / "stale.html").read_text() == "not ours"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "thesis.tex").write_text("mine")
    with pytest.raises(SiteError, match="holds no site manifest"):
        build_site(tmp_path / "other", db=small_db, force=True)
    assert issubclass(SiteError, OpregistryError)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "site"]


def test_releases_are_grouped_and_labelled_from_their_records():
    def row(version, package, library="", library_version=""):
        return {"id": len(version), "version": version, "package": package,
                "library": library, "library_version": library_version}

    records = _records([
        row("2.21.0", "tensorflow-cpu", "tensorflow-text", "2.21.1"),
        row("2.22.0.dev20260101", "tf-nightly"), row("2.9.3", "tensorflow-cpu"),
        row("2.16.0rc0", "tensorflow-cpu"), row("2.10.1", "tensorflow-cpu"),
        row("2.10.1", "tensorflow"), row("2.20.0", "tensorflow-cpu", "tensorflow-text", "2.20.0")])
    assert [(r.key, r.library, r.prerelease) for r in records] == [
        ("2.9.3", "tensorflow", False), ("2.10.1:tensorflow", "tensorflow", False),
        ("2.10.1:tensorflow-cpu", "tensorflow", False), ("2.16.0rc0", "tensorflow", True),
        ("2.22.0.dev20260101", "tensorflow", True),
        ("tensorflow-text-2.20.0", "tensorflow-text", False),
        ("tensorflow-text-2.21.1", "tensorflow-text", False)]
    assert records[1].label == "2.10.1 (tensorflow)"
    assert (records[-1].label, records[-1].short) == ("tensorflow-text 2.21.1", "2.21.1")


def test_file_names_are_safe_and_unique_without_case():
    names = file_names(["Foo", "foo", "a/b", "FOO", "2.10.1:tensorflow"])
    assert names == {"Foo": "Foo", "foo": "foo-2", "a/b": "a_b", "FOO": "FOO-3",
                     "2.10.1:tensorflow": "2.10.1_tensorflow"}


def test_a_data_script_holds_its_json_exactly():
    data = {"ops": {"__proto__": {"q": "it's \\'quoted\\' \\\\ \"and\" \u2028 </script>"}}}
    script = as_script("X", data)
    assert script.startswith("window.X=JSON.parse('") and "\n" not in script[:-1]
    assert from_script(script) == data


def test_compact_keeps_zeros_and_drops_empty_values():
    assert _compact({"position": 0, "error": 0.0, "x": None, "flag": False, "l": [],
                     "s": ""}) == {"position": 0, "error": 0.0}


def test_change_phrases():
    before = {"gradient": "missing", "state": "missing", "public": True}
    after = {"gradient": "registered", "effective": "differentiable", "state": "differentiable",
             "public": True, "function": {"source_hash": "a"}}
    assert changes(before, after, ((), ("tf.x",))) == [
        "gradient missing → registered", "effective — → differentiable", "Python names +tf.x"]
    assert changes(after, None, ((), ())) == ["removed"]
    assert changes(after, dict(after, function={"source_hash": "b"}), ((), ())) == [
        "gradient function changed"]


def test_op_pages_show_their_remedies(small_db, tmp_path):
    """Floor's page has its straight-through remedy with the catalogue's snippet; a
    missing op's page points at the template; MatMul's page has no Remedies section."""
    from opregistry.remedies import catalogue

    build_site(tmp_path / "site", db=small_db)
    floor = (tmp_path / "site" / "ops" / "Floor.html").read_text()
    assert '<h2 id="remedies">Remedies</h2>' in floor
    snippet = catalogue().remedy("ste-floor").snippet
    assert "tf.stop_gradient(tf.floor(x) - x)" in snippet
    assert "tf.stop_gradient(tf.floor(x) - x)" in floor and "Straight-through floor" in floor
    new_op = (tmp_path / "site" / "ops" / "NewOp.html").read_text()
    assert "<code>opregistry explain NewOp</code> prints the template" in new_op
    assert 'id="remedies"' not in (tmp_path / "site" / "ops" / "MatMul.html").read_text()
