"""The numeric check: ``tf.gradients`` against central finite differences at a random
point away from kinks, for ops whose symbolic probe found a gradient (arguments built as
callers build them: ``probe_args``).

In-environment code (see ``__init__.py``): standard library, TensorFlow and numpy only,
Python 3.7+, TF 1.13+, graph mode.
"""
from __future__ import print_function

import random
import re

from . import probe_args as args
from . import probe_families as families
from .probe_api import FLOAT_TYPES, STRING_OVERRIDES, TRAINABLE, ProbeFailure, failure_reason
from .probe_build import FUNCTIONAL, build, build_functional, build_imported
from .probe_symbolic import control_flow_v1, input_names, output_names

TOLERANCE = {"DT_DOUBLE": (1e-6, 1e-5), "DT_FLOAT": (1e-3, 2e-2)}  # (step, tolerance)
NUMERIC_CONFIGS = tuple((shape, mode) for shape in ([2, 2], [2, 2, 2, 2]) for mode in (
    "named", "scalar", "ones")) + tuple((shape, mode) for shape in (
    [2], [], [2, 2, 2], [2, 2, 2, 2, 2]) for mode in ("named", "scalar")) + (
    ([2, 3], "named"),)  # cross products and colour conversions want a last dimension of 3
# Ops whose matrix input is read as symmetric: compare along symmetric directions.
_SYMMETRIC = re.compile(r"^(Cholesky|CholeskyGrad|SelfAdjointEig|SelfAdjointEigV2|BatchCholesky|"
                        r"BatchSelfAdjointEig)")
_POSITIVE_DEFINITE = re.compile(r"Cholesky|Matrix(Inverse|Determinant|Solve|Logarithm|"
                                r"Exponential|SquareRoot)|LogMatrixDeterminant|SelfAdjointEig|"
                                r"^Lu|Svd|^Qr|^Eig|MatrixTriangularSolve")


def numeric_check(api, op_def, rows, seed=1234):
    """Compare ``tf.gradients`` with central finite differences at a random point.

    Full Jacobians (at most 64 elements in and out), float64 where the kernels allow it
    (step 1e-6, tolerance 1e-5 on the error relative to max(1, |J|)), else float32
    (step 1e-3, tolerance 2e-2). Ops of a family in ``probe_families`` get their arguments
    built as callers build them, and are compared as a function of the real sources
    those are built from. Returns a dict with status ``verified``, ``flagged`` or
    ``not_verified`` and the evidence.
    """
    positions = [r["position"] for r in rows
                 if r["result"] == "gradient" and r["dtype"] in TRAINABLE]
    if not positions:
        return {"status": "not_verified",
                "reason": "no floating, complex, resource or variant input receives a gradient"}
    devices = _kernel_devices(api, op_def.name)
    reason = families.unverifiable(op_def.name) or _no_cpu_kernel(devices, only_elsewhere=True)
    if reason:
        return {"status": "not_verified", "reason": reason}
    family = families.family_for(op_def.name)
    if family is None and any(a.name == "orig_output" for a in op_def.input_arg):
        return {"status": "not_verified",
                "reason": "orig_output must equal the forward op applied to orig_input"}
    if op_def.is_stateful and op_def.name.startswith(("Random", "Multinomial", "Parameterized")):
        return {"status": "not_verified", "reason": "random op: outputs differ between runs"}
    failures = []
    if family is not None:
        configs = [(0, (family.shape, "named"))]
    else:
        variants = (0, 1) if any(a.type == "string" and a.name in STRING_OVERRIDES
                                 for a in op_def.attr) else (0,)
        configs = [(v, c) for v in variants for c in NUMERIC_CONFIGS]
    for float_type, (variant, (shape, int_mode)) in (
            (f, c) for f in ("DT_DOUBLE", "DT_FLOAT") for c in configs):
        for low, high in ((0.3, 0.9), (1.1, 1.9)):
            rng = random.Random(seed)
            try:
                return _numeric_at(api, op_def, family, float_type, shape, int_mode, variant,
                                   positions, point=RandomPoint(rng, low, high))
            except _NonFinite as failure:
                failures.append(failure)
                continue
            except ProbeFailure as failure:
                failures.append(failure)
            except Exception as exc:  # noqa: BLE001
                failures.append(ProbeFailure("numeric", failure_reason(exc)))
            break  # the wider range only helps non-finite outputs
    # report the failure that got furthest: after the op was built, if any
    ran = [f for f in failures if f.stage in ("run", "nonfinite", "check")]
    best = (ran or failures)[0] if failures else None
    if best is not None and best.stage == "run" and op_def.name not in FUNCTIONAL:
        # an op without kernels of its own can still run (AccumulateNV2 is rewritten
        # into others): only a failed run says the missing kernel is the reason
        return {"status": "not_verified",
                "reason": _no_cpu_kernel(devices, only_elsewhere=False) or best.reason}
    return {"status": "not_verified", "reason": best.reason if best else "no point worked"}


def replay(api, op_def, detail):
    """The check of a stored verification, recomputed at its stored point (``feeds``
    by placeholder name, the sources it varied): the evidence behind a flag."""
    family = families.family_named(detail.get("family"))
    point = _StoredPoint(dict((f["name"], f["value"]) for f in detail["feeds"]),
                         detail["varied"])
    return _numeric_at(api, op_def, family, detail["float_type"], detail["shape"],
                       detail["int_mode"], detail.get("variant", 0), [], point=point)


def _kernel_devices(api, op_name):
    """The device types with a kernel for ``op_name`` (None: TF cannot say)."""
    try:
        from tensorflow.python.framework import kernels
        registered = kernels.get_registered_kernels_for_op(op_name)
    except Exception:  # noqa: BLE001 - no such module (1.13) or no such op
        return None
    return sorted(set(k.device_type for k in registered.kernel))


def _no_cpu_kernel(devices, only_elsewhere):
    """Why an op cannot run here: kernels for other devices only (GPU, TPU, XLA: known
    before running it, which may crash the process), or, once a run failed, none."""
    if devices is None or set(devices) & set(["CPU", "DEFAULT", "XLA_CPU"]):
        return None  # XLA_CPU: a device of its own in 1.x, where XlaEinsum runs
    if devices:
        return "no CPU kernel (kernels for %s only)" % ", ".join(devices)
    return None if only_elsewhere else "no CPU kernel (no kernel registered at all)"


class _NonFinite(ProbeFailure):
    pass


class RandomPoint(object):
    """A random point away from kinks; ``vary(source)``: the sources a check varies."""

    def __init__(self, rng, low, high):
        self.rng, self.low, self.high = rng, low, high

    def value(self, api, source, dtype, shape, positive_definite):
        if source.value is not None:
            return api.np.full(shape, source.value, dtype=dtype.as_numpy_dtype)
        return _point(api, dtype, shape, self.rng, self.low, self.high, positive_definite)

    def varies(self, source, positions, family):
        if source.vary is not None:
            return source.vary
        return bool(family is not None and family.vary_all) or source.position in positions


class _StoredPoint(object):
    """The point a flagged check stored, fed back by placeholder name."""

    def __init__(self, values, varied):
        self.values, self.varied = values, set(varied)

    def value(self, api, source, dtype, shape, positive_definite):
        name = source.feed.op.name
        if name not in self.values:
            raise ProbeFailure("build", "the stored point has no value for %s" % name)
        return api.np.array(self.values[name], dtype=dtype.as_numpy_dtype).reshape(shape)

    def varies(self, source, positions, family):
        return source.feed.op.name in self.varied


def _point(api, dtype, shape, rng, low, high, positive_definite):
    np = api.np
    if positive_definite and len(shape) >= 2 and shape[-1] == shape[-2]:
        n = shape[-1]
        a = np.array([rng.uniform(-1, 1) for _ in range(n * n)]).reshape(n, n)
        m = a.dot(a.T) + n * np.eye(n)
        return np.broadcast_to(m, shape).astype(dtype.as_numpy_dtype).copy()
    size = int(np.prod(shape)) if shape else 1
    # magnitudes away from 0 (kinks of abs/relu, poles of log and 1/x); the first
    # range stays inside (-1, 1) (asin, atanh), the second above 1 (acosh, zeta)
    data = np.array([rng.uniform(low, high) for _ in range(size)], dtype=np.float64)
    return data.reshape(shape).astype(dtype.as_numpy_dtype)


def _directions(np, base, symmetric):
    """Unit directions to differentiate along: the coordinate basis, or for ops that
    read a matrix as symmetric, symmetric perturbations E_ij + E_ji."""
    size = base.size
    if not symmetric or base.ndim < 2 or base.shape[-1] != base.shape[-2]:
        return np.eye(size)
    n = base.shape[-1]
    batch = size // (n * n)
    out = []
    for b in range(batch):
        for i in range(n):
            for j in range(i + 1):
                d = np.zeros((batch, n, n))
                d[b, i, j] = 1.0
                d[b, j, i] = 1.0
                out.append(d.reshape(-1))
    return np.stack(out)


def _numeric_at(api, op_def, family, float_type, shape, int_mode, variant, positions, point):
    graph = api.tf.Graph()
    builder = args.Builder(api, graph, op_def.name, family, float_type, shape)
    with control_flow_v1(api, family is not None and family.control_flow_v1):
        if op_def.name in FUNCTIONAL:
            op = build_functional(api, graph, op_def.name, float_type)
        elif op_def.HasField("deprecation") and \
                op_def.deprecation.version <= graph.graph_def_versions.producer:
            op = build_imported(api, graph, op_def, float_type, shape)
        else:
            op = build(api, graph, op_def, float_type, shape, int_mode, variant, builder)
        read = builder.read_outputs(op, output_names(op_def, op))
        outputs = [t for _, t in read if api.type_name(t.dtype) in FLOAT_TYPES]
        if not outputs:
            kinds = sorted(set(api.type_name(o.dtype)[3:].lower() for o in op.outputs))
            raise ProbeFailure("build", "no real floating output (outputs: %s; no reader for "
                               "them)" % ", ".join(kinds) if kinds else "no outputs")
        labels = [output_names(op_def, op)[i] + ("" if t.op.type == "Identity"
                                                  else ":" + t.op.type) for i, t in read]
        sources, feeds = feeds_for(api, op_def, op, builder, shape, point)
        varied = [s for s in sources if point.varies(s, positions, family) and
                  feeds[s.feed].size]  # an empty input has no direction to vary
        result = _compare(api, op_def, graph, op, outputs, sources, varied, feeds,
                          family is not None)
    result.update({"shape": shape, "int_mode": int_mode, "float_type": float_type,
                   "variant": variant, "outputs": labels})
    if family is not None:
        result["family"] = family.name
        if family.note:
            result["note"] = family.note
    if result["status"] == "flagged":  # enough to reproduce it by hand: every input's value
        names = input_names(op_def, op)
        result["point"] = [{"position": i, "name": names[i] if i < len(names) else "",
                            "dtype": api.type_name(t.dtype),
                            "value": feeds[t].tolist() if t in feeds else _const_value(api, t)}
                           for i, t in enumerate(op.inputs)]
        result["feeds"] = [{"name": t.op.name, "dtype": api.type_name(t.dtype),
                            "value": v.tolist()} for t, v in feeds.items()]
        result["varied"] = [s.feed.op.name for s in varied]
    return result


def feeds_for(api, op_def, op, builder, shape, point):
    """(sources, feeds): a value for every placeholder of the graph. The builder's
    sources first, then the op's own placeholder inputs (sources of their position),
    then what generic builders made on the side (the dense matrix of a CSR input)."""
    np = api.np
    inputs = list(op.inputs)
    sources = list(builder.sources)
    known = set(s.feed for s in sources)
    for placeholder in op.graph.get_operations():
        if placeholder.type != "Placeholder" or placeholder.outputs[0] in known:
            continue
        t = placeholder.outputs[0]
        name = api.type_name(t.dtype)
        position = inputs.index(t) if t in inputs else None
        if name in FLOAT_TYPES:
            sources.append(args.Source(t, position))
        elif name == "DT_BOOL":
            sources.append(args.Source(t, position, vary=False, value=True))
        elif name in ("DT_INT32", "DT_INT64") and op_def.name in FUNCTIONAL:
            sources.append(args.Source(t, position, vary=False, value=1))  # branch index
        else:
            raise ProbeFailure("build", "cannot make a concrete %s input" % name)
    positive_definite = bool(_POSITIVE_DEFINITE.search(op_def.name))
    names = input_names(op_def, op)
    feeds = {}
    for s in sources:
        t = s.feed
        if t.dtype.base_dtype == api.dtypes.bool:
            feeds[t] = np.array(True)
            continue
        t_shape = [d if d is not None else 2 for d in t.get_shape().as_list()] \
            if t.get_shape().dims is not None else (
                builder.arg_shape(names[s.position]) if s.position is not None and
                builder.family is not None else shape)
        feeds[t] = point.value(api, s, t.dtype.base_dtype, t_shape, positive_definite)
    if isinstance(point, RandomPoint):
        _bound_clip_inputs(api, op_def, op, feeds)
        _normalise_labels(api, op_def, op, feeds)
    return sources, feeds


def _compare(api, op_def, graph, op, outputs, sources, varied, feeds, shaped):
    """Theoretical against numerical Jacobian of ``outputs`` w.r.t. the varied sources."""
    np = api.np
    if not varied:
        raise ProbeFailure("build", "the differentiable inputs cannot be fed")
    # the least precise of the inputs varied and the outputs read decides the step
    # (ResizeBilinear, for one, answers in float32 whatever it is given)
    dtypes = set(api.type_name(t.dtype) for t in [s.feed for s in varied] + list(outputs))
    actual = "DT_DOUBLE" if dtypes == set(["DT_DOUBLE"]) else (
        "DT_FLOAT" if dtypes <= set(["DT_FLOAT", "DT_DOUBLE"]) else None)
    if actual is None:
        raise ProbeFailure("build", "only half-precision kernels (%s)" % ", ".join(sorted(dtypes)))
    delta, tolerance = TOLERANCE[actual]
    if sum(feeds[s.feed].size for s in varied) > 64:
        raise ProbeFailure("build", "too large for a full Jacobian")
    symmetric = bool(_SYMMETRIC.search(op_def.name))
    setups = [s.setup for s in sources if s.setup is not None]
    with graph.as_default():
        # upstream gradients with the outputs' static shapes where a family built the op
        # (CSRSparseMatrixToDense's gradient reads its dense shape from them)
        dys = [api.placeholder(o.dtype.base_dtype, shape=o.get_shape() if shaped and
                               o.get_shape().num_elements() else None, name="dy%d" % i)
               for i, o in enumerate(outputs)]
        grads = api.gradients(outputs, [s.x for s in varied], grad_ys=dys)
        if any(g is None for g in grads):
            raise ProbeFailure("check", "tf.gradients gives no gradient for an input")
        grads = [api.ops.convert_to_tensor(g) for g in grads]  # IndexedSlices -> dense
        init = [v.initializer for v in api.v1.global_variables()]
    session = api.v1.Session(graph=graph)

    def run(fetches, feed):
        if setups:
            session.run(setups, feed_dict=feed)
        return session.run(fetches, feed_dict=feed)

    try:
        if init:
            session.run(init)
        try:
            ys = run(outputs, feeds)
            again = run(outputs, feeds)
        except Exception as exc:  # noqa: BLE001 - no kernel for this dtype, bad values...
            raise ProbeFailure("run", failure_reason(exc))
        if any(not np.all(np.isfinite(y)) for y in ys):
            raise _NonFinite("nonfinite", "non-finite output at the test point")
        if any(not np.array_equal(a, b) for a, b in zip(ys, again)):
            raise ProbeFailure("check", "outputs differ between two runs at the same point")
        if sum(y.size for y in ys) > 64:
            raise ProbeFailure("build", "too large for a full Jacobian")
        theory = []  # one backward pass per output element
        for out_index, y in enumerate(ys):
            for j in range(y.size):
                feed = dict(feeds)
                for k, (d, v) in enumerate(zip(dys, ys)):
                    seed = np.zeros(v.size, dtype=v.dtype)
                    if k == out_index:
                        seed[j] = 1
                    feed[d] = seed.reshape(v.shape)
                theory.append([np.asarray(g, dtype=np.float64).reshape(-1)
                               for g in run(grads, feed)])
        errors, worst = [], 0.0
        for x_index, s in enumerate(varied):
            base = feeds[s.feed]
            directions = _directions(np, base, symmetric)
            jt = np.stack([row[x_index] for row in theory]) if theory else np.zeros((0, base.size))
            along_theory = jt.dot(directions.T)
            columns = []
            for d in directions:
                fp, fm = dict(feeds), dict(feeds)
                fp[s.feed] = (base.reshape(-1) + delta * d).reshape(base.shape).astype(base.dtype)
                fm[s.feed] = (base.reshape(-1) - delta * d).reshape(base.shape).astype(base.dtype)
                yp, ym = run(outputs, fp), run(outputs, fm)
                columns.append(np.concatenate(
                    [((a.astype(np.float64) - b.astype(np.float64)) / (2 * delta)).reshape(-1)
                     for a, b in zip(yp, ym)]))
            along_numeric = np.stack(columns, axis=1) if columns else np.zeros_like(along_theory)
            err = float(np.max(np.abs(along_theory - along_numeric))) if along_theory.size else 0.0
            scale = max(1.0, float(np.max(np.abs(along_numeric))) if along_numeric.size else 1.0)
            per_output, row = [], 0
            for k, y in enumerate(ys):  # which output's gradient is off
                block = np.abs(along_theory[row:row + y.size] - along_numeric[row:row + y.size])
                per_output.append(float(block.max()) / scale if block.size else 0.0)
                row += y.size
            errors.append({"position": s.position, "source": s.feed.op.name, "max_error": err,
                           "relative": err / scale, "per_output": per_output})
            worst = max(worst, err / scale)
    finally:
        session.close()
    return {"status": "verified" if worst <= tolerance else "flagged", "dtype": actual,
            "tolerance": tolerance, "delta": delta, "max_error": worst,
            "inputs": _per_input(errors), "symmetric": symmetric}


def _per_input(errors):
    """One entry per op input (the worst of the sources built for it); sources that
    build no single input are listed with ``position`` None."""
    by_position, out = {}, []
    for entry in errors:
        if entry["position"] is None:
            out.append(entry)
            continue
        kept = by_position.get(entry["position"])
        if kept is None or entry["relative"] > kept["relative"]:
            by_position[entry["position"]] = entry
    return sorted(by_position.values(), key=lambda e: e["position"]) + out


def _const_value(api, tensor):
    try:
        value = api.tensor_util.constant_value(tensor)
    except Exception:  # noqa: BLE001
        return None
    return value.tolist() if value is not None else None


def _normalise_labels(api, op_def, op, feeds):
    """Cross-entropy labels are probability distributions: rows that sum to 1."""
    if "CrossEntropy" not in op_def.name:
        return
    for name, t in zip(input_names(op_def, op), op.inputs):
        if name == "labels" and t in feeds and feeds[t].ndim >= 1:
            value = feeds[t]
            feeds[t] = (value / value.sum(axis=-1, keepdims=True)).astype(value.dtype)


def _bound_clip_inputs(api, op_def, op, feeds):
    """Keep clip bounds on their side of the data, as callers do (min < t < max)."""
    names = input_names(op_def, op)
    for name, t in zip(names, op.inputs):
        if t in feeds and name in ("clip_value_min", "min", "input_min"):
            feeds[t] = feeds[t] * 0 - 2.0
        elif t in feeds and name in ("clip_value_max", "max", "input_max"):
            feeds[t] = feeds[t] * 0 + 2.0
