"""data/harvest_name_traces.py on the shipped database, without TensorFlow: which
releases it traces, in which order, with which names (the tracing itself:
tests/test_python_name_traces.py)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "data" / "harvest_name_traces.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("harvest_name_traces", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_tensorflow_release_oldest_first_the_nightly_last(script: ModuleType) -> None:
    found = script.releases()
    assert list(found)[:3] == ["1.13.2", "1.14.0", "1.15.5"]
    assert list(found)[-2:] == ["2.21.0", "2.23.0-dev20261026"]
    assert found["2.21.0"] == "tensorflow-cpu" and found["2.23.0-dev20261026"] == "tf-nightly"
    assert list(found).index("2.9.3") < list(found).index("2.10.1")


def test_a_release_s_names_are_its_public_tf_names_without_raw_ops(script: ModuleType
                                                                    ) -> None:
    names = script.release_names("2.21.0")
    assert len(names) == 2185  # tests/test_python_name_traces.py's figure
    assert "tf.math.add" in names and not any(".raw_ops." in n for n in names)
    assert all(n.startswith("tf.") for n in names)


def test_a_release_the_database_does_not_hold_is_refused(script: ModuleType,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    with pytest.raises(SystemExit) as exit_:
        script.main(["2.99.0", "--out-dir", "/nonexistent"])
    assert exit_.value.code == 2
    assert "not a TensorFlow release of the shipped database: 2.99.0" in capsys.readouterr().err


def test_names_read_again_load_before_their_traces(script: ModuleType, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]
                                                   ) -> None:
    """``--python-names --load-only --db``: a release's names read again (its
    ``.names.json``) replace the database's, then its traces load; a name the first
    reading missed is then a name of that release, traced."""
    import shutil

    from opregistry.db.store import using

    db = tmp_path / "copy.sqlite"
    with using(None) as store:
        assert store.location.sqlite_path is not None
        shutil.copyfile(store.location.sqlite_path, db)
        old = [{"name": r["name"], "op": r["op_name"], "method": r["method"]}
               for r in store.release_python_names()
               if r["release_id"] == store.release("1.14.0").id]
    names = [*old, {"name": "tf.read_again", "op": "MatMul", "method": "calls_wrapper"}]
    (tmp_path / "1.14.0.names.json").write_text(json.dumps(names))
    (tmp_path / "1.14.0.json").write_text(json.dumps(
        {"tf.read_again": {"family": "square", "ops": ["MatMul"]}}))
    assert script.main(["1.14.0", "--python-names", "--load-only", "--out-dir",
                        str(tmp_path), "--db", str(db)]) == 0
    assert (f"1.14.0: {len({n['name'] for n in names})} Python names and 1 traces loaded"
            in capsys.readouterr().out)
    with using(str(db)) as store:
        release = store.release("1.14.0")
        assert "tf.read_again" in store.public_names(release.id)
        assert [t["ops"] for t in store.name_traces(release.id, ["tf.read_again"])] == [
            "MatMul"]
        assert "tf.read_again" not in store.public_names(store.release("1.15.5").id)
    (tmp_path / "1.14.0.names.json").write_text(json.dumps([{"name": "tf.x", "op": "no op"}]))
    assert script.main(["1.14.0", "--python-names", "--load-only", "--out-dir",
                        str(tmp_path), "--db", str(db)]) == 1
    assert "$.python_names[0]" in capsys.readouterr().out  # one line, the release skipped
