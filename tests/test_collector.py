"""The collector's record checked against TensorFlow itself, read in a fresh process."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from opregistry.harvest import collector

tf = pytest.importorskip("tensorflow")


TRUTH = """
import importlib, json, sys
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except Exception:  # the document lists these as failures too
        pass
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session as c_api
from tensorflow.python.framework import ops

buf = c_api.TF_GetAllOpList()
try:
    op_list = op_def_pb2.OpList.FromString(bytes(c_api.TF_GetBuffer(buf)))
finally:
    c_api.TF_DeleteBuffer(buf)
states = {}
for op in op_list.op:
    try:
        fn = ops._gradient_registry.lookup(op.name)
    except LookupError:
        states[op.name] = "missing"
        continue
    states[op.name] = "no_gradient" if fn is None else "registered"
print(json.dumps({"states": states, "registry": sorted(ops._gradient_registry.list())}))
"""


@pytest.fixture(scope="module")
def truth(tf_document: dict) -> dict:
    """Facts read straight from TF's C API and gradient registry, after importing the
    same modules the collector imported (independent code from the collector's), in a
    fresh interpreter: what other tests loaded into this one (an op library, a custom
    op) is not part of the harvest either."""
    import json
    import subprocess

    done = subprocess.run([sys.executable, "-c", TRUTH,
                           json.dumps(tf_document["imports"]["modules"])],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {"states": found["states"], "registry": set(found["registry"])}


def test_every_op_of_the_c_api_is_recorded(tf_document, truth):
    recorded = {op["name"] for op in tf_document["ops"]}
    assert len(tf_document["ops"]) == len(truth["states"])
    assert recorded == set(truth["states"])
    assert any(name.startswith("_") for name in recorded)  # hidden ops included
    assert any(name.startswith("Xla") for name in recorded)


def test_three_state_status_matches_the_registry(tf_document, truth):
    recorded = {op["name"]: op["gradient"]["status"] for op in tf_document["ops"]}
    assert recorded == truth["states"]


def test_orphan_registry_entries(tf_document, truth):
    orphans = {o["name"] for o in tf_document["orphan_gradients"]}
    # other tests in this process may have used tf.custom_gradient, which registers
    # "CustomGradient-<id>" entries; the harvest ran in a fresh process
    live = {n for n in truth["registry"] if not n.startswith("CustomGradient-")}
    assert orphans == live - set(truth["states"])
    assert "Queue" in orphans


def test_known_anchors(tf_document):
    status = {op["name"]: op["gradient"] for op in tf_document["ops"]}
    assert status["MatMul"]["status"] == "registered"
    assert status["MatMul"]["function"]["qualname"] == "_MatMulGrad"
    assert status["MatMul"]["function"]["file"] == "tensorflow/python/ops/math_grad.py"
    assert status["Shape"]["status"] == "no_gradient"
    assert status["AdjustHue"]["status"] == "missing"


def test_release_facts(tf_document):
    release = tf_document["release"]
    assert release["version"] == tf.__version__
    assert release["git_version"] == tf.version.GIT_VERSION
    assert release["package"] in ("tensorflow", "tensorflow-cpu")
    assert tf_document["imports"]["failed"] == []


def test_op_defs_carry_types_attrs_and_flags(tf_document):
    by_name = {op["name"]: op["op_def"] for op in tf_document["ops"]}
    matmul = by_name["MatMul"]
    assert [a["name"] for a in matmul["inputs"]] == ["a", "b"]
    assert matmul["inputs"][0]["type_attr"] == "T"
    t_attr = next(a for a in matmul["attrs"] if a["name"] == "T")
    assert "DT_DOUBLE" in t_attr["allowed"]["list"]["type"]
    assert next(a for a in matmul["attrs"] if a["name"] == "transpose_a")["default"] == {"b": False}
    assert by_name["RandomUniform"]["is_stateful"] is True
    deprecated = [d for d in by_name.values() if d.get("deprecation")]
    assert deprecated and all(d["deprecation"]["version"] > 0 for d in deprecated)


def test_public_flag_is_tf_raw_ops(tf_document):
    public = {op["name"] for op in tf_document["ops"] if op["public"]}
    assert public == {n for n in dir(tf.raw_ops) if not n.startswith("_")}


def test_python_names_lead_to_ops(tf_document):
    pairs = {(p["name"], p["op"]) for p in tf_document["python_names"]}
    assert ("tf.math.floor", "Floor") in pairs
    assert ("tf.argmax", "ArgMax") in pairs
    assert ("tf.nn.relu", "Relu") in pairs
    assert ("tf.compat.v1.floor", "Floor") in pairs
    methods = {p["method"] for p in tf_document["python_names"]}
    assert {"generated_wrapper", "calls_wrapper"} <= methods


def test_source_hash_ignores_annotations_docstrings_and_formatting(tmp_path):
    plain = (
        "def _grad(op, grad):\n"
        "  x = op.inputs[0]\n"
        "  return grad * x, None\n")
    annotated = (
        "def _other_name(op: 'ops.Operation', grad: 'Tensor') -> tuple:\n"
        "    '''Docstring added later.'''\n"
        "    x: 'Tensor' = op.inputs[0]   # a comment\n"
        "    return (grad * x,\n"
        "            None)\n")
    changed = plain.replace("grad * x", "grad * x * 2")
    functions = {}
    for name, source in {"plain": plain, "annotated": annotated, "changed": changed}.items():
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        namespace: dict = {}
        exec(compile(source, str(path), "exec"), namespace)  # noqa: S102 - our own test code
        fn = next(v for k, v in namespace.items() if callable(v) and not k.startswith("__"))
        functions[name] = fn
    import linecache

    linecache.clearcache()
    hashes = {k: collector.source_hash(v)[0] for k, v in functions.items()}
    assert hashes["plain"] is not None
    assert hashes["plain"] == hashes["annotated"]
    assert hashes["plain"] != hashes["changed"]


IN_ENVIRONMENT = [Path(collector.__file__)] + [
    Path(collector.__file__).with_name(name)
    for name in ("probe.py", "probe_args.py", "plugins.py", "names.py", "xla.py")]


@pytest.mark.parametrize("path", IN_ENVIRONMENT, ids=lambda p: p.name)
def test_in_environment_files_are_python37_and_stdlib_only(path):
    """The collector and the probes run inside old TF environments (Python 3.7) with
    only the standard library and TF: parsed as 3.7, and compiled by a real 3.7 where
    the machine has one (pyenv holds 3.7 on the development and CI machines)."""
    import shutil
    import subprocess
    import sys

    source = path.read_text()
    tree = ast.parse(source, feature_version=(3, 7))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module}
    third_party = {m for m in imported if m not in sys.stdlib_module_names}
    # numpy comes with every TensorFlow (its own dependency): nothing else may
    assert third_party <= {"tensorflow", "numpy", "__future__"}, third_party
    # the real binary: a pyenv shim answers "command not found" where 3.7 is not active
    python37 = next((str(p) for p in sorted(Path.home().glob(
        ".pyenv/versions/3.7*/bin/python3.7"))), None) or shutil.which("python3.7")
    if python37:
        done = subprocess.run([python37, "-c", "import ast, sys; compile(open(sys.argv[1]).read(),"
                               " sys.argv[1], 'exec')", str(path)], capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr
