"""data/harvest_name_traces.py on the shipped database, without TensorFlow: which
releases it traces, in which order, with which names (the tracing itself:
tests/test_python_name_traces.py)."""
from __future__ import annotations

import importlib.util
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
    assert len(names) == 2171  # tests/test_python_name_traces.py's figure
    assert "tf.math.add" in names and not any(".raw_ops." in n for n in names)
    assert all(n.startswith("tf.") for n in names)


def test_a_release_the_database_does_not_hold_is_refused(script: ModuleType,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    with pytest.raises(SystemExit) as exit_:
        script.main(["2.99.0", "--out-dir", "/nonexistent"])
    assert exit_.value.code == 2
    assert "not a TensorFlow release of the shipped database: 2.99.0" in capsys.readouterr().err
