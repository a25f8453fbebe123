"""The in-environment harvester after its split into opregistry/harvest/inenv/ writes the
same document, byte for byte, as the code before it (commit a429843, main before the
split), on the TensorFlow installed next to the tests and (slow tier) on TF 1.15 under
Python 3.7, where the 1.x code paths run (a rename once broke only those).

The base commit's code is taken from git at test time (not a stored golden file, which
would go stale at the next TensorFlow upgrade); both run through the same driver,
tests/harvest_document.py, with the probes limited to the ops below (a fully probed
harvest takes minutes) and the two volatile fields (``collected_at``, ``probes.seconds``)
blanked. The rest of the document (every op, OpDef, gradient entry and function source,
Python name, import) is whole. A change that alters the document on purpose moves BASE
to the commit that makes it (the test then guards the refactors after it), or, where
the change is a known field, says exactly what it is in ``_as_before`` below.

XLA (issue 25) changed the document on purpose: ``format_version`` 2 and ``probes.xla``
(false here: the driver harvests without ``--xla``, so no probe record holds ``xla``).
BASE stays before the split, so the test still proves the split changed nothing else;
moving it past the XLA merge would compare the split code with itself. Per-output facts
(issue 22) changed it again: ``format_version`` 3 and ``outputs`` in the input rows of
ops of several outputs that run no function (none among OPS but the library's: each
removed, checked to be one result per output). Ops compiled alone with XLA (issue 25)
made ``format_version`` 4: without --xla the document has no op-level ``xla``. XLA
verdicts per attribute value (issue 37) made it 5 (inside ``xla``: none here). The
reading of public names (issue 39: a v1 twin's helpers) adds names and ops to
``python_names``: ``_names_as_before`` checks what it adds and compares the rest.

Marked ``slow`` (CI runs it; the developer tier leaves it out): two harvests per release, the base commit's and ours: most of a minute."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("tensorflow")

ROOT = Path(__file__).resolve().parent.parent
BASE = "a429843f204d89c7867bb27823a1f3ff14c28350"  # main before the split
DRIVER = ROOT / "tests" / "harvest_document.py"
# one op per way the probes build, classify and check: plain (MatMul, Tanh, Conv2D), an
# integer input (GatherV2), none/zero (ArgMax, Sign), a flagged check (FakeQuant...), a
# symmetric positive definite input (Cholesky), a function attr (While), a string attr
# (Einsum), a variant (TensorListFromTensor), a resource (ResourceGather), an argument
# family of probe_args (MaxPoolGrad, TensorArrayWriteV3)
OPS = ["MatMul", "Tanh", "Conv2D", "GatherV2", "ArgMax", "Sign", "FakeQuantWithMinMaxArgs",
       "Cholesky", "While", "Einsum", "TensorListFromTensor", "ResourceGather", "MaxPoolGrad",
       "TensorArrayWriteV3"]

# what the document says since the XLA fields (issue 25) and the per-output facts
# (issue 22), on a harvest without --xla; the base commit's values for them
XLA_FORMAT_VERSION, BASE_FORMAT_VERSION = 5, 1


def _as_before(split: bytes, base: bytes) -> bytes:
    """The split harvester's document with the XLA change and the names' reading undone
    (each part of it checked to be exactly what it should be), written as the driver
    writes it."""
    document = json.loads(split)
    _names_as_before(document, json.loads(base))
    assert document["format_version"] == XLA_FORMAT_VERSION
    assert document["probes"].pop("xla") is False
    assert not [op["name"] for op in document["ops"] if "xla" in op.get("probe", {})]
    assert not [op["name"] for op in document["ops"] if "xla" in op]
    for op in document["ops"]:
        for row in op.get("probe", {}).get("inputs", []):
            outputs = row.pop("outputs", None)
            assert outputs is None or len(outputs) > 1
    document["format_version"] = BASE_FORMAT_VERSION
    return json.dumps(document, sort_keys=True).encode()


def _names_as_before(document: dict, base: dict) -> None:
    """Undo issue 39's reading of public names: a v2 function that hands its call to
    its v1 twin (map_fn_v2 -> map_fn) is read as one level, so the twin's helpers are
    read too (names.py's ``_twins``). Every (name, op) the base read is still read, its
    method changed at most to ``_multi`` where the name gained ops; in TF 2 the names
    it missed are found (``tf.nn.embedding_lookup``; ``tf.map_fn`` from 2.13); a
    library's names are as they were. The base's names then stand in for the
    comparison of the rest."""
    before = {(e["name"], e["op"]): e["method"] for e in base["python_names"]}
    after = {(e["name"], e["op"]): e["method"] for e in document["python_names"]}
    assert set(before) <= set(after), sorted(set(before) - set(after))[:5]
    changed = {key: (method, after[key]) for key, method in before.items()
               if after[key] not in (method, method.removesuffix("_multi") + "_multi")}
    assert not changed, sorted(changed.items())[:5]
    gained = {name for name, _ in after} - {name for name, _ in before}
    version = tuple(int(part) for part in document["release"]["version"].split(".")[:2])
    if document.get("library"):  # a library's own functions: no twins among them
        assert not gained, sorted(gained)
    elif version >= (2, 0):
        assert "tf.nn.embedding_lookup" in gained, sorted(gained)
    if version >= (2, 13) and not document.get("library"):
        assert "tf.map_fn" in gained, sorted(gained)
    document["python_names"] = base["python_names"]


# registered ops that a release has no gradient for (so nothing to probe)
_NOT_IN = {"1.15.5": {"Einsum"}}


def _base_harvest_dir(tmp_path: Path) -> Path:
    if shutil.which("git") is None or subprocess.run(
            ["git", "-C", str(ROOT), "cat-file", "-e", f"{BASE}^{{commit}}"],
            capture_output=True).returncode != 0:
        pytest.skip(f"commit {BASE[:7]} is not in this checkout (a shallow clone?)")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", BASE, "opregistry/harvest"],
                             capture_output=True, check=True).stdout
    tmp_path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive, check=True)
    return tmp_path / "opregistry" / "harvest"


# a library harvest (plugins.py, the workers' --plugin arguments, the library's names):
# a plugin that gives an op without a gradient (in 1.15 and 2.x) one
PLUGIN = """
import tensorflow as tf


@tf.RegisterGradient("AdjustContrastv2")
def _adjust_contrast_grad(op, grad):
    return [grad * op.inputs[1], None]
"""


@pytest.mark.parametrize("release, library", [
    (None, False), (None, True), pytest.param("1.15.5", False, marks=pytest.mark.slow)],
    ids=["installed", "installed-library", "1.15.5"])
def test_documents_are_byte_identical_before_and_after_the_split(release, library, tmp_path):
    python = sys.executable
    if release is not None:
        from opregistry.harvest.environments import ensure_venv
        from opregistry.harvest.recipes import recipe_for

        python = str(ensure_venv(recipe_for(release)))
    base_dir = _base_harvest_dir(tmp_path / "base")
    assert (base_dir / "collector.py").exists() and not (base_dir / "inenv").exists()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    outs = {"base": tmp_path / "base.json", "split": tmp_path / "split.json"}
    # the two harvests run side by side: each is mostly one process waiting on TF
    ops, extra = OPS, []
    if library:
        (tmp_path / "contrast_plugin.py").write_text(PLUGIN)
        ops, extra = ["AdjustContrastv2"], [str(tmp_path / "contrast_plugin.py")]
    runs = {name: subprocess.Popen(
        [python, "-I", str(DRIVER), str(folder), ",".join(ops), str(outs[name]), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
        for name, folder in (("base", base_dir), ("split", ROOT / "opregistry" / "harvest"))}
    for name, proc in runs.items():
        _, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, (name, err.decode()[-2000:])
    split = outs["split"].read_bytes()
    assert _as_before(split, outs["base"].read_bytes()) == outs["base"].read_bytes()
    # ... and what was compared is a real probed harvest, not two empty ones
    document = json.loads(split)
    probed = {op["name"]: op["probe"] for op in document["ops"] if "probe" in op}
    assert set(probed) == set(ops) - _NOT_IN.get(release, set()), set(ops) ^ set(probed)
    if library:
        assert document["library"] and [op["name"] for op in document["ops"]] == ops
        assert probed["AdjustContrastv2"]["effective"] == "partial"  # contrast_factor: None
        return
    assert len(document["ops"]) > 1000 and document["python_names"]
    assert probed["MatMul"]["verification"]["status"] == "verified"
    assert probed["FakeQuantWithMinMaxArgs"]["verification"]["status"] == "flagged"
    assert probed["ArgMax"]["effective"] == "none"
    assert probed["MatMul"]["second_order"] == "differentiable"
