"""Reading and validating a harvest document the size of a real one.

A synthetic harvest of N ops (default 3,000: TensorFlow has ~1,900, op libraries add
a few hundred), each with what a probed, numerically verified, XLA-checked op carries
(an OpDef with a summary and description, a gradient function with its source, per-input
results, a verification with per-input errors, second-order blockers, XLA verdicts),
written to a temporary file; then ``read_document`` (the declared parse cost, then
``json.loads``) and ``validate`` (the schema compiled by fastjsonschema, the checks
beside it), each timed, with the file's size and its declared parse cost against the
bound. Target: validation under 3 s for 3,000 ops; the declared cost far under the bound.

Run:  python bench/document_validation.py [--ops 3000]
No TensorFlow.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opregistry.db.validate import (  # noqa: E402
    MAX_PARSE_BYTES,
    parse_cost,
    read_document,
    validate,
)
from opregistry.harvest.inenv.document import FORMAT, FORMAT_VERSION  # noqa: E402


def _op(index: int) -> dict[str, Any]:
    name = f"Op{index}"
    inputs = ["a", "b", "c"]
    return {
        "name": name, "public": True,
        "op_def": {"name": name, "summary": "s" * 200, "description": "d " * 500,
                   "inputs": [{"name": n, "type_attr": "T"} for n in inputs],
                   "outputs": [{"name": "y", "type_attr": "T"}],
                   "attrs": [{"name": "T", "type": "type", "allowed_values": {
                       "list": {"type": ["DT_FLOAT", "DT_DOUBLE", "DT_HALF"]}},
                       "default_value": {"type": "DT_FLOAT"}}]},
        "gradient": {"status": "registered", "function": {
            "module": "m", "qualname": f"_{name}Grad", "file": "m.py", "line": 1,
            "source_hash": name, "hash_method": "ast",
            "source": "def f(x):\n    return x\n" * 60}},
        "probe": {
            "effective": "differentiable",
            "inputs": [{"position": i, "name": n, "dtype": "DT_FLOAT", "trainable": True,
                        "result": "gradient", "outputs": ["gradient"]}
                       for i, n in enumerate(inputs)],
            "second_order": "blocked",
            "second_order_blockers": [{"op": "Floor", "reason": "none"}],
            "verification": {"status": "verified", "dtype": "DT_DOUBLE", "max_error": 1e-9,
                             "tolerance": 1e-6, "delta": 1e-3, "symmetric": True,
                             "inputs": [{"position": i, "source": "x", "max_error": 1e-9,
                                         "relative": 1e-9, "per_output": [1e-9]}
                                        for i in range(len(inputs))]},
            "xla": {"device": "CPU", "api": "tf.function(jit_compile=True)",
                    "forward": {"status": "compiles"},
                    "gradient": {"status": "fails", "op": "Floor", "message": "m" * 100},
                    "kernels": {"CPU": ["DT_FLOAT"]}}}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=3000)
    args = parser.parse_args(argv)
    document = {"format": FORMAT, "format_version": FORMAT_VERSION, "collected_at": "now",
                "release": {"version": "2.21.0", "package": "tensorflow-cpu"},
                "ops": [_op(i) for i in range(args.ops)], "probes": {"seconds": 1.0}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "harvest.json"
        path.write_text(json.dumps(document))
        data = path.read_bytes()
        started = time.perf_counter()
        read = read_document(path)
        reading = time.perf_counter() - started
        started = time.perf_counter()
        validate(read)  # the first call compiles the schema
        first = time.perf_counter() - started
        started = time.perf_counter()
        validate(read)
        again = time.perf_counter() - started
    print(f"{args.ops:,} ops: {len(data) / 1e6:.1f} MB, declared parse cost "
          f"{parse_cost(data) / 1024 ** 2:,.0f} MB (bound {MAX_PARSE_BYTES / 1024 ** 2:,.0f} MB); "
          f"read {reading:.2f} s, validate {first:.2f} s (schema compiled), "
          f"{again:.2f} s again")
    return 0 if first < 3 * max(1, args.ops / 3000) else 1


if __name__ == "__main__":
    sys.exit(main())
