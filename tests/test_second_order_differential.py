"""The second-order differential (tests/second_order_differential.py): generated
programs, batched as one SavedModel per save path (``tf.saved_model.save`` and Keras
``model.export``), ``check --order 2``'s verdict for every (output, target) against
TensorFlow on the loaded file: nested tapes eager and traced, float64 central finite
differences deciding (raises, dropped, zero, exact). 0 disagreements, every construct of
the grammar present, its count printed.

Where TF's traced tapes give another number than its eager ones, finite differences
have sided with the eager tapes, and every such pair crosses a max pooling whose output
has its input's size (stride 1, ``SAME``): TF's CPU MaxPoolGradGrad kernel takes the
incoming gradient's buffer for its output when nothing else holds it (only in a graph:
eager, Python holds it) and zeroes it before reading it (docs/second-order.md). Any
other traced difference fails the test.

The developer tier runs the first ``len(TEMPLATES)`` programs (each construct first
once); CI runs the rest to ``COUNT`` (marked ``fuzz``). Cost: see ``render``'s CPU
seconds (docs/second-order.md has the figures)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import second_order_differential as differential  # noqa: E402
import second_order_programs as programs  # noqa: E402

QUICK, COUNT = len(programs.TEMPLATES), 300


def _known_tf_defect(line: str) -> bool:
    """Whether a traced-wrong pair's program has a same-size max pooling."""
    seed = int(line.split()[1])
    return any(t.construct == "max_pool" and "1, 'SAME'" in t.code
               for _, t in programs.generate(seed).statements)


def _judge(report: differential.Report, count: int) -> None:
    print(differential.render(report))
    assert report.programs == count
    assert not report.disagreements, differential.render(report)
    assert all(report.pairs[part] for part in differential.PARTS)
    assert all(map(_known_tf_defect, report.traced_wrong)), report.traced_wrong
    assert all(report.constructs[t.construct] >= count // QUICK
               for t in programs.TEMPLATES), report.constructs


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> differential.Report:
    return differential.run(QUICK, 0, tmp_path_factory.mktemp("second_order_quick"))


def test_check_order_2_agrees_with_tensorflow(quick: differential.Report) -> None:
    _judge(quick, QUICK)
    assert {v for _, v in quick.verdicts} >= {"exact", "zero", "dropped", "raises"}


def test_a_wrong_verdict_is_a_disagreement(quick: differential.Report) -> None:
    """The comparison can fail: each verdict turned around is one disagreement."""
    flipped = {"dropped": "exact", "exact": "dropped", "zero": "dropped", "raises": "exact"}
    assert quick.judged and all(not differential.agrees(flipped[mine], theirs)
                                for mine, theirs in quick.judged)


@pytest.mark.fuzz
def test_check_order_2_agrees_with_tensorflow_ci_sized(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The rest to COUNT programs (the quick slice above makes the first)."""
    report = differential.run(COUNT - QUICK, QUICK,
                              tmp_path_factory.mktemp("second_order_fuzz"))
    _judge(report, COUNT - QUICK)
