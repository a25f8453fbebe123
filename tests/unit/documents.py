"""Small, valid harvest documents written by hand (no TensorFlow): what the unit tests
load into real SQLite files, and what the document fuzzer mutates."""
from __future__ import annotations

from opregistry.harvest.inenv.document import FORMAT, FORMAT_VERSION


def op(name, status, effective=None, inputs=(), public=True):
    entry = {"name": name, "public": public,
             "op_def": {"name": name, "inputs": [{"name": n, "type_attr": "T"}
                                                  for n, _ in inputs],
                        "outputs": [{"name": "y", "type_attr": "T"}], "attrs": []},
             "gradient": {"status": status}}
    if status == "registered":
        entry["gradient"]["function"] = {"module": "m", "qualname": f"_{name}Grad",
                                         "file": "m.py", "line": 1, "source_hash": name,
                                         "hash_method": "ast"}
    if effective:
        entry["probe"] = {"effective": effective, "inputs": [
            {"position": i, "name": n, "dtype": "DT_FLOAT", "trainable": True, "result": r}
            for i, (n, r) in enumerate(inputs)]}
    return entry


def document(version, ops):
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "collected_at": "now",
            "release": {"version": version, "package": "tensorflow-cpu", "python": "3.11"},
            "ops": ops, "probes": {"seconds": 1.0}, "python_names": [
                {"name": "tf.math.floor", "op": "Floor", "method": "tf_export"}]}


def default_document(version="2.1.0"):
    """One release with each gradient state: what most command-line tests need."""
    return document(version, [
        op("ArgMax", "registered", "none", [("input", "none"), ("dimension", "none")]),
        op("Floor", "registered", "none", [("x", "none")]),
        op("MatMul", "registered", "differentiable", [("a", "gradient"), ("b", "gradient")]),
        op("Shape", "no_gradient"),
        op("AdjustHue", "missing")])
