"""Cost of hostile model files (issue 21): each checked in a fresh process, its time
and peak RSS growth (VmHWM, after a warm-up check of a tiny graph), against the
bound of 200 MB + 10 x the file's size (docs/bad-input.md).

1. A chain of 100,000 objects below a variable (refused at the depth bound).
2. 20,000 objects in a chain and 20,000 variables side by side.
3. A 2 GiB - 1 sparse `saved_model.pb` with a valid first field (refused unread).
4. A 256 MiB sparse file whose first field spans it (read once: its size, not twice).

Run:  python bench/hostile_models.py        (no TensorFlow needed)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "unit"))

from test_hostile_models import _graph_with_input, _saved_model, _write  # noqa: E402
from test_hostile_object_graphs import _MEASURE, _chain, _objects, _sparse  # noqa: E402


def _wide(saved):
    objects = _objects(saved)
    for i in range(20_000):
        objects.nodes[0].children.add(node_id=len(objects.nodes), local_name=f"w{i}")
        variable = objects.nodes.add().variable
        variable.dtype, variable.trainable, variable.name = 1, True, f"w{i}"


def _spanning(path: Path, size: int) -> Path:
    length = size - 5  # a tag and a 4-byte varint: one field spanning the file
    head = bytes([0x12] + [(length >> s) & 0x7F | (0x80 if s < 21 else 0)
                           for s in (0, 7, 14, 21)])
    return _sparse(path, size, head)


def _measure(path: Path, warm: Path) -> tuple[str, int, float]:
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(path), str(warm)],
                          capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    said, growth = json.loads(done.stdout)
    return said, growth, time.monotonic() - started


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        warm = _write(root, _graph_with_input("x"), "warm.pb")
        cases = []
        for name, change in (("chain 100,000", _chain(100_000)), ("chain 20,000", _chain(20_000)),
                             ("20,000 variables", _wide)):
            (root / name).mkdir()
            folder = _saved_model(root / name, change)
            cases.append((name, folder, (folder / "saved_model.pb").stat().st_size))
        sparse = _sparse(root / "sparse" / "saved_model.pb", 2 ** 31 - 1, b"\x0a\x00")
        cases.append(("sparse 2 GiB - 1, valid first field", sparse.parent, 2))
        spanning = _spanning(root / "span" / "saved_model.pb", 256 * 2 ** 20)
        cases.append(("sparse 256 MiB, one spanning field", spanning.parent, 256 * 2 ** 20))
        for name, path, size in cases:
            said, growth, seconds = _measure(path, warm)
            outcome = "checked" if said == "checked" else "Error: " + said.split(": ", 1)[1]
            print(f"{name}: {size / 1e6:.1f} MB, {seconds:.1f} s in all, peak RSS growth "
                  f"{growth / 2 ** 20:.0f} MB ({outcome[:90]})")


if __name__ == "__main__":
    main()
