"""Models like those other projects publish as test data, which ``check`` once could not
read or read wrong (issue 22). Each is built here with TensorFlow, the way its project
writes it; none is copied from there.

* ``tfx_transform``: a TF1 SavedModel like TFX's chicago-taxi ``transform_fn`` and TFMA
  eval graph: SparseTensor (``coo_sparse``) and RaggedTensor (``composite_tensor``)
  signature inputs and outputs, float, integer and string, some fed by ParseExample.
* ``composite_tf2``: ``tf.saved_model.save`` with SparseTensor and RaggedTensor inputs
  (taken flat) and outputs (``coo_sparse``, ``composite_tensor``).
* ``counter``: TF Serving's ``saved_model_counter``: reference-typed float outputs
  (``DT_FLOAT_REF``) of a TF1 ref variable; also as a bare GraphDef.
* ``half_plus_three``: TF Serving's ``regress`` signature that declares a string
  placeholder (serialized Examples) as a float input.
* ``estimator_graph``: an Estimator-style training ``graph.pbtxt``: a tf.data input
  pipeline, ``zero_fraction`` summaries (a v2 cond whose variant intermediates nobody
  consumes) and an optimizer.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _tf() -> Any:
    import tensorflow as tf

    return tf


def _save_tf1(sess: Any, path: Path, tags: list[str], signatures: dict[str, Any]) -> Path:
    tf1 = _tf().compat.v1
    builder = tf1.saved_model.Builder(str(path))
    builder.add_meta_graph_and_variables(sess, tags, signature_def_map=signatures)
    builder.save()
    return path


def _signature(inputs: dict[str, Any], outputs: dict[str, Any]) -> Any:
    """A SignatureDef; a value may be a SparseTensor or RaggedTensor (TF writes its
    components) or a ready TensorInfo."""
    tf1 = _tf().compat.v1

    def info(value: Any) -> Any:
        return value if hasattr(value, "ListFields") else \
            tf1.saved_model.utils.build_tensor_info(value)

    return tf1.saved_model.signature_def_utils.build_signature_def(
        inputs={k: info(v) for k, v in inputs.items()},
        outputs={k: info(v) for k, v in outputs.items()},
        method_name="tensorflow/serving/predict")


def example(**features: float) -> bytes:
    """One serialized tf.train.Example with float features."""
    tf: Any = _tf()
    return tf.train.Example(features=tf.train.Features(feature={
        key: tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
        for key, value in features.items()})).SerializeToString()


def tfx_transform(path: Path) -> Path:
    """TF1, like TFT's transform_fn and TFMA's eval graph: sparse and ragged inputs,
    ref and resource variables, outputs dense, sparse and ragged, float and integer."""
    tf: Any = _tf()
    tf1 = tf.compat.v1
    with tf.Graph().as_default(), tf1.Session() as sess:
        fare = tf1.sparse_placeholder(tf.float32, [None, None], name="fare")
        hour = tf1.sparse_placeholder(tf.int64, [None, None], name="hour")
        company = tf1.sparse_placeholder(tf.string, [None, None], name="company")
        tips = tf1.ragged.placeholder(tf.float32, 1, [], name="tips")
        scale = tf1.Variable(1.5, name="scale", use_resource=False)  # a ref variable
        shift = tf1.Variable(0.25, name="shift", use_resource=True)
        dense_fare = tf.sparse.to_dense(fare)
        dense_hour = tf.cast(tf.sparse.to_dense(hour), tf.float32)
        bucket = tf.strings.to_hash_bucket_fast(tf.sparse.to_dense(company, ""), 10)
        transform = {
            "fare_xf": dense_fare * scale + shift,
            "hour_xf": dense_hour * shift,
            "fare_rounded": tf.round(dense_fare * scale),
            "company_xf": bucket,  # integer: no output to differentiate
            "fare_sparse": tf.SparseTensor(fare.indices, fare.values * scale, fare.dense_shape),
            "tips_xf": tips * shift,  # ragged
            "tips_total": tf.reduce_sum(tips.flat_values) + tf.cast(
                tf.reduce_sum(bucket), tf.float32) * scale,
        }
        serialized = tf1.placeholder(tf.string, [None], name="examples")
        parsed = tf.io.parse_example(serialized, {
            "fare": tf.io.VarLenFeature(tf.float32), "company": tf.io.VarLenFeature(tf.string)})
        eval_outputs = {
            "predictions": tf.sparse.to_dense(parsed["fare"]) * scale,
            "company_hash": tf.cast(tf.strings.to_hash_bucket_fast(
                tf.sparse.to_dense(parsed["company"], ""), 10), tf.float32) * shift,
        }
        sess.run(tf1.global_variables_initializer())
        return _save_tf1(sess, path, ["serve"], {
            "transform_signature": _signature(
                {"fare": fare, "hour": hour, "company": company, "tips": tips}, transform),
            # TFMA's eval signature: features are ParseExample's sparse outputs
            "eval": _signature({"examples": serialized, "features/fare": parsed["fare"],
                                "features/company": parsed["company"]}, eval_outputs)})


TFX_FEEDS = {"examples": [example(fare=0.5), example(fare=-0.25)]}


def composite_tf2(path: Path) -> Path:
    """tf.saved_model.save: sparse and ragged inputs (the signature takes their
    components flat) and outputs (coo_sparse and composite_tensor)."""
    tf: Any = _tf()

    class Model(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.v = tf.Variable(2.0, name="v")
            self.w = tf.Variable(3.0, name="w")

        @tf.function(input_signature=[tf.SparseTensorSpec([None, 3], tf.float32),
                                      tf.RaggedTensorSpec([None, None], tf.float32),
                                      tf.SparseTensorSpec([None, 3], tf.int64)])
        def serve(self, sparse: Any, ragged: Any, ids: Any) -> dict[str, Any]:
            counted = tf.cast(ids.values, tf.float32) * self.w
            return {
                "sparse": tf.SparseTensor(sparse.indices, sparse.values * self.v,
                                          sparse.dense_shape),
                "ragged": ragged * self.v,
                "total": tf.reduce_sum(sparse.values) + tf.reduce_sum(ragged.flat_values) * self.w,
                "counted": tf.reduce_sum(counted),
                "rounded": tf.round(ragged * self.w),
                "row_lengths": ragged.row_lengths(),  # integer
            }

    model = Model()
    tf.saved_model.save(model, str(path), signatures=model.serve)
    return path


# the flat components of the sparse and ragged inputs: valid indices, shapes and splits
COMPOSITE_TF2_FEEDS = {"sparse": [[0, 0], [1, 0]], "sparse_2": [2, 3], "ragged_1": [0, 1, 2],
                       "ids": [[0, 0], [1, 0]], "ids_2": [2, 3]}


def _counter_graph() -> tuple[Any, dict[str, Any]]:
    """TF Serving's export_counter.py: a ref variable and its assign ops as outputs."""
    tf: Any = _tf()
    tf1 = tf.compat.v1
    counter = tf1.Variable(0.0, dtype=tf.float32, name="counter", use_resource=False)
    with tf1.name_scope("incr_counter_op"):
        incr_counter = counter.assign_add(1.0)
    delta = tf1.placeholder(dtype=tf.float32, name="delta")
    with tf1.name_scope("incr_counter_by_op"):
        incr_counter_by = counter.assign_add(delta)
    with tf1.name_scope("reset_counter_op"):
        reset_counter = counter.assign(0.0)
    doubled = tf.identity(counter * 2.0 + delta, name="doubled")
    return counter, {"get_counter": ({}, {"output": counter}),
                     "incr_counter": ({}, {"output": incr_counter}),
                     "incr_counter_by": ({"delta": delta}, {"output": incr_counter_by}),
                     "reset_counter": ({}, {"output": reset_counter}),
                     "doubled": ({"delta": delta}, {"output": doubled})}


def counter(path: Path) -> Path:
    tf: Any = _tf()
    tf1 = tf.compat.v1
    with tf.Graph().as_default(), tf1.Session() as sess:
        _, signatures = _counter_graph()
        sess.run(tf1.global_variables_initializer())
        return _save_tf1(sess, path, ["serve"], {
            key: _signature(inputs, outputs) for key, (inputs, outputs) in signatures.items()})


def counter_graph_def(path: Path) -> Path:
    """The same graph as a bare GraphDef: its assign ops' ref outputs are outputs."""
    tf: Any = _tf()
    with tf.Graph().as_default() as graph:
        _counter_graph()
        path.write_bytes(graph.as_graph_def().SerializeToString())
    return path


def half_plus_three(path: Path) -> Path:
    """y = a * x + b read from serialized Examples; ``regress`` declares the string
    placeholder of the Examples a float (TF Serving's saved_model_half_plus_three)."""
    tf: Any = _tf()
    tf1 = tf.compat.v1
    from tensorflow.core.framework import types_pb2
    from tensorflow.core.protobuf import meta_graph_pb2

    with tf.Graph().as_default(), tf1.Session() as sess:
        a = tf1.Variable(0.5, name="a", use_resource=False)
        b = tf1.Variable(3.0, name="b", use_resource=False)
        serialized = tf1.placeholder(tf.string, [None], name="tf_example")
        parsed = tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([1], tf.float32)})
        x = tf.identity(parsed["x"], name="x")
        y = tf.add(a * x, b, name="y")
        declared = meta_graph_pb2.TensorInfo(name=serialized.name, dtype=types_pb2.DT_FLOAT)
        sess.run(tf1.global_variables_initializer())
        return _save_tf1(sess, path, ["serve"], {
            "tensorflow/serving/regress": _signature({"inputs": declared},
                                                     {"outputs": tf.identity(y)}),
            "serving_default": _signature({"x": x}, {"y": y})})


HALF_PLUS_THREE_FEEDS = {"inputs": [example(x=1.0), example(x=-2.0)]}


def estimator_graph(path: Path) -> Path:
    """An Estimator-style training graph written as text: a tf.data pipeline, a
    two-layer network, zero_fraction summaries and an Adagrad step."""
    tf: Any = _tf()
    tf1 = tf.compat.v1
    with tf.Graph().as_default() as graph:
        features = tf.data.Dataset.from_tensor_slices(
            ([[0.5, -1.0], [1.5, 0.25], [-0.5, 2.0]], [[1.0], [0.0], [1.0]])
        ).repeat().batch(2).prefetch(1)
        x, label = tf1.data.make_one_shot_iterator(features).get_next()
        hidden = tf.nn.relu(_dense(x, 4, "hiddenlayer_0", use_resource=False))
        # a v2 cond on the training path: its gradient makes the If op output its
        # intermediates, variant ones (optionals) among them, which nothing consumes
        hidden = tf.cond(tf.reduce_sum(x) > 0.0, lambda: tf.square(hidden) * 0.5,
                         lambda: tf.sin(hidden), name="zero_fraction_cond")
        tf1.summary.scalar("fraction_of_zero_values", tf.math.zero_fraction(hidden))
        # variant intermediates nobody consumes, as a v2 cond leaves them in an
        # Estimator's graph (zero_fraction/cond/Identity_k): optionals of a float value
        for k in range(1, 4):
            tf.identity(tf.raw_ops.OptionalFromValue(components=[hidden]),
                        name=f"fraction/cond/Identity_{k}")
        logits = _dense(hidden, 1, "logits", use_resource=True)
        tf1.summary.scalar("fraction_of_zero_logits", tf.math.zero_fraction(logits))
        loss = tf1.losses.sigmoid_cross_entropy(label, logits)
        predictions = tf.identity(tf.sigmoid(logits), name="probabilities")
        classes = tf.cast(tf.greater(predictions, 0.5), tf.float32, name="classes")
        tf.identity(classes * 1.0, name="class_ids")
        step = tf1.train.get_or_create_global_step()
        tf1.train.AdagradOptimizer(0.1).minimize(loss, global_step=step)
        tf1.summary.merge_all()
        tf1.io.write_graph(graph.as_graph_def(), str(path.parent), path.name, as_text=True)
    return path


def _dense(x: Any, units: int, name: str, use_resource: bool) -> Any:
    """tf.compat.v1.layers.dense (gone with Keras 3): kernel and bias variables."""
    tf: Any = _tf()
    tf1 = tf.compat.v1
    with tf1.variable_scope(name):
        kernel = tf1.get_variable("kernel", [x.shape[-1], units], use_resource=use_resource,
                                  initializer=tf1.glorot_uniform_initializer(seed=1))
        bias = tf1.get_variable("bias", [units], use_resource=use_resource,
                                initializer=tf1.zeros_initializer())
        return tf.matmul(x, kernel) + bias


def bare_graph_comparison(name: str, path: Path, result: Any) -> Any:
    """``check``'s result for a bare GraphDef against tf.gradients in the imported
    graph (a differential.Comparison): every (output, target) pair check reports, and
    the other direction: every tensor nothing consumes is an output of check exactly
    when it is floating and TF can differentiate it; every float variable and
    placeholder is a target."""
    import differential

    tf: Any = _tf()
    from google.protobuf import text_format

    graph_def = tf.compat.v1.GraphDef()
    if path.suffix == ".pbtxt":
        text_format.Parse(path.read_text(), graph_def)
    else:
        graph_def.ParseFromString(path.read_bytes())
    done = differential.Comparison(name, outputs=len(result.outputs))
    with tf.Graph().as_default() as graph:
        tf.graph_util.import_graph_def(graph_def, name="")
        sources = {op.name: op.outputs[0] for op in graph.get_operations()
                   if op.type in ("VariableV2", "VarHandleOp", "Placeholder") and
                   op.get_attr("dtype").base_dtype.is_floating}
        names = sorted(sources)
        if sorted(t.name for t in result.targets) != names:
            done.disagreements.append(f"targets: check {sorted(t.name for t in result.targets)}"
                                      f", TF {names}")
        checked = {o.output: o for o in result.outputs}
        raising = {(f.output, f.target) for f in result.findings
                   if "gradient_raises" in {b.reason for b in f.stops}}
        # (a control input consumes no value: an init op's Assigns stay outputs)
        consumed = {text.split(":")[0] for node in graph_def.node for text in node.input
                    if not text.startswith("^")}
        for op in graph.get_operations():
            if op.name in consumed or op.type == "Placeholder":
                continue
            for tensor in op.outputs:
                gets = _graph_gradients(tf, tensor, [sources[n] for n in names])
                differentiable = gets is not None and tensor.dtype.base_dtype.is_floating
                report = checked.get(tensor.name)
                if (report is not None) != differentiable:
                    done.disagreements.append(f"{tensor.name} ({tensor.dtype.name}): TF "
                                              f"differentiates it: {differentiable}, check "
                                              f"output: {report is not None}")
                if report is None or gets is None:
                    continue
                for target, got in zip(names, gets):
                    said = _said(report, target, raising)
                    done.pairs += 1
                    done.answers += 1
                    done.with_gradient += got == "gradient"
                    done.without += got != "gradient"
                    # unrelated (no data path): TF gives None, or raises where the
                    # call raises for every target (as the random-program differential)
                    if said != got and not (said == "unrelated" and got != "gradient"):
                        done.disagreements.append(
                            f"{tensor.name} / {target}: TF {got}, check {said}")
    return done


def _said(report: Any, target: str, raising: set[tuple[str, str]]) -> str:
    """check's verdict for a pair as TF would answer it: raises (blocked, its gradient
    call raises), none (blocked otherwise), unrelated, gradient."""
    if target in report.with_gradient:
        return "gradient"
    if target in report.unrelated:
        return "unrelated"
    return "raises" if (report.output, target) in raising else "none"


def _graph_gradients(tf: Any, output: Any, sources: list[Any]) -> list[str] | None:
    """What ``tf.gradients(output, sources)`` gives each source, as one call (the
    call's ``LookupError`` is every source's answer: "raises"): "gradient" or "none";
    None when TF cannot differentiate ``output`` at all (a variant: no ones to start
    from)."""
    try:
        return ["none" if g is None else "gradient" for g in tf.gradients(output, sources)]
    except TypeError:  # not differentiable as an output
        return None
    except LookupError:  # an op between them without a gradient: the call raises
        return ["raises"] * len(sources)


BUILDERS: list[tuple[str, Callable[[Path], Path], dict[str, Any] | None]] = [
    ("tfx_transform", tfx_transform, TFX_FEEDS),
    ("composite_tf2", composite_tf2, COMPOSITE_TF2_FEEDS),
    ("counter", counter, None),
    ("half_plus_three", half_plus_three, HALF_PLUS_THREE_FEEDS)]
GRAPH_BUILDERS = [("counter.pb", counter_graph_def), ("graph.pbtxt", estimator_graph)]


def main() -> None:
    """Build every model here and print check's agreement with TensorFlow."""
    import sys
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import differential

    from opregistry import check

    root = Path(tempfile.mkdtemp(prefix="opregistry-outside-"))
    comparisons = []
    for name, build, feeds in BUILDERS:
        path = build(root / name)
        comparisons.append(differential.compare(name, path, check(path),
                                                differential.tf_answers(path, feeds)))
    for name, build_graph in GRAPH_BUILDERS:
        path = build_graph(root / name)
        comparisons.append(bare_graph_comparison(name, path, check(path)))
    print(differential.report(comparisons))
    raise SystemExit(1 if any(c.disagreements for c in comparisons) else 0)


if __name__ == "__main__":
    main()
