"""The bare ``Any`` in the package's signatures (``.ci/count_any.py``) stays at or below
the ceiling: a new seam gets a named type (a project type, a Protocol, or a TensorFlow
object's alias in ``opregistry/tf_types.py``). Lower the ceiling when the count drops."""
from __future__ import annotations

import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CEILING = 294  # issue 38 asked for at most 371 (half of 742); 328 after the thirteenth
# session's merges, 299 once their seams were typed (WalkState, Consumers, Proto, ...),
# 294 once the name queries read Rows (db/name_reads.py)


def test_the_bare_any_count_stays_under_the_ceiling():
    count = runpy.run_path(str(ROOT / ".ci" / "count_any.py"))["count"]
    package = ROOT / "opregistry"
    total = sum(count(path) for path in package.rglob("*.py")
                if "inenv" not in path.relative_to(package).parts[:2])
    assert total <= CEILING, (f"{total} bare Any in signatures (ceiling {CEILING}): "
                              "python .ci/count_any.py --files says where")


def test_the_count_reads_parameters_returns_and_annotated_assignments(tmp_path):
    count = runpy.run_path(str(ROOT / ".ci" / "count_any.py"))["count"]
    source = tmp_path / "m.py"
    source.write_text("from typing import Any\nimport typing\n"
                      "def f(a: Any, *b: 'Any', c: dict[str, typing.Any] = {}) -> Any: ...\n"
                      "x: list[Any] = []\nAlias = Any\n")
    assert count(source) == 5  # the alias assignment is a name, not a bare Any
