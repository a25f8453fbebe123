"""XLA (issue 25): the subject that ``xla.py`` compiles for one probed op.

In-environment code (see ``__init__.py``): standard library and TensorFlow only,
Python 3.7+, TF 1.13+. The op is built as the numerical check builds it (its configs,
builders and feeds), in float32 (what training compiles), then its gradient with a fed
upstream gradient.
"""
from __future__ import print_function

import random

from . import probe_args as args
from . import probe_families as families
from . import xla, xla_variants
from .probe_api import FLOAT_TYPES, TRAINABLE, ProbeFailure
from .probe_build import FUNCTIONAL, build, build_functional, build_imported

# the numerical check's own configs, point and feeds: XLA compiles what it checked
from .probe_numeric import NUMERIC_CONFIGS, TOLERANCE, RandomPoint, feeds_for
from .probe_symbolic import control_flow_v1, output_names

_XLA_TOLERANCE = {"float32": TOLERANCE["DT_FLOAT"][1], "float64": TOLERANCE["DT_DOUBLE"][1]}


def xla_check(api, op_def, record, device="CPU"):
    """``record["xla"]``: whether the op and its gradient compile with XLA on
    ``device`` (the CPU, or a GPU in a ``--device GPU`` harvest). ``record`` None: an op
    without a registered gradient, compiled forward only and never run without XLA
    (queue, map and barrier ops block, some kernels crash on generated inputs; XLA
    refuses an op it has no kernel for before running anything). An op whose XLA kernel
    depends on attribute values (``xla_variants``) gets ``variants``: each combination
    compiled."""
    def build():
        return _xla_subject(api, op_def, record)

    def compiled(build):
        return xla.probe_xla(api.tf, api.np, build, _XLA_TOLERANCE, device)

    found = compiled(build)
    # an op whose XLA kernel takes some attribute values and not others: each compiled
    variants = xla_variants.variants(compiled, build, op_def)
    if variants:
        found["variants"] = variants
    return found


def _xla_subject(api, op_def, record):
    family = families.family_for(op_def.name)
    configs = [(family.shape, "named")] if family is not None else list(NUMERIC_CONFIGS)
    positions = [r["position"] for r in (record or {}).get("inputs", ())
                 if r["result"] == "gradient" and r["dtype"] in TRAINABLE]
    wants_gradient = (record or {}).get("effective") in ("differentiable", "partial")
    first = None
    for shape, int_mode in configs:
        graph = api.tf.Graph()
        builder = args.Builder(api, graph, op_def.name, family, "DT_FLOAT", shape)
        flow = control_flow_v1(api, family is not None and family.control_flow_v1)
        try:
            with flow:
                if op_def.name in FUNCTIONAL:
                    op = build_functional(api, graph, op_def.name, "DT_FLOAT")
                elif op_def.HasField("deprecation") and \
                        op_def.deprecation.version <= graph.graph_def_versions.producer:
                    op = build_imported(api, graph, op_def, "DT_FLOAT", shape)
                else:
                    op = build(api, graph, op_def, "DT_FLOAT", shape, int_mode, 0, builder)
                read = builder.read_outputs(op, output_names(op_def, op))
                outputs = [t for _, t in read if api.type_name(t.dtype) in FLOAT_TYPES]
                these = positions
                if not outputs:  # the forward still compiles or not (Where, Unique)
                    outputs, these = [t for _, t in read], []
                if not outputs and record is None:  # alone: its integer, boolean, string...
                    outputs = list(op.outputs)       # outputs (Shape, Equal, AsString)
                point = RandomPoint(random.Random(1234), 0.3, 0.9)
                sources, feeds = feeds_for(api, op_def, op, builder, shape, point)
                # resource variables assigned from a feed (ResourceGather's) are made
                # outside the compiled function, as a training step's are; others not
                # (the variables of this op's own graph, not the caller's default one)
                if (any(s.setup is not None for s in sources) and
                        xla.variable_setups(graph, feeds) is None) or \
                        graph.get_collection(api.v1.GraphKeys.GLOBAL_VARIABLES):
                    raise ProbeFailure("build", "needs variables or set-up ops")
            ys = None
            if record is not None:  # it runs without XLA (the upstream gradient's shapes)
                ys = xla.run_set_up(api.tf, graph, outputs, feeds)
        except Exception as exc:  # noqa: BLE001 - builders and shape functions raise anything
            first = first or exc
            continue
        xs = [s.x for s in sources if these and point.varies(s, these, family)]

        def make_gradient(graph=graph, outputs=outputs, xs=xs, flow=flow, ys=ys):
            if not wants_gradient or not xs:
                return None
            with flow, graph.as_default():
                dys = [api.placeholder(o.dtype.base_dtype, shape=o.get_shape(), name="dy%d" % i)
                       for i, o in enumerate(outputs)]
                grads = api.gradients(outputs, xs, grad_ys=dys)
                grads = [api.ops.convert_to_tensor(g) for g in grads if g is not None]
            rng = api.np.random.RandomState(1234)
            return grads, dict((d, (0.5 + rng.random_sample(y.shape)).astype(y.dtype))
                               for d, y in zip(dys, ys))
        return graph, op, outputs, feeds, make_gradient if record is not None else None
    raise first if first is not None else ProbeFailure("build", "no construction worked")
