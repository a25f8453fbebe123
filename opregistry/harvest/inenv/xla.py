"""Does a probed op, and its gradient, compile under XLA on the CPU? (in-environment)

In-environment code (see ``__init__.py``): standard library and TensorFlow only,
Python 3.7+, TF 1.13+. ``probe_xla`` builds what it compiles.

The caller hands over a graph it already built (the op from generated inputs, then
its gradient with ``tf.gradients`` and a fed upstream gradient) and a value for every
placeholder. The wanted tensors are cut out of that graph, the fed placeholders
become the arguments of a function compiled with XLA (``tf.function(jit_compile=True)``
from TF 2.5, ``experimental_compile=True`` in 2.1-2.4, ``xla.compile`` in 1.x), and
the function runs once in a session: only compiling tells whether XLA takes it (the
kernel registry is incomplete: the MLIR bridge legalises some ops without a tf2xla
kernel), so the registry is recorded beside the verdict as evidence only.

Integer and boolean feeds become constants, as axis, size and k arguments are in real
models (XLA wants them known at compile time). The upstream gradient is an argument,
never a constant: a constant upstream gradient of ones lets XLA fold some gradient
ops away (ResizeNearestNeighborGrad) that a real training step cannot.
"""
from __future__ import print_function

import re
import time

# the first op XLA refused, from TF's message
_UNSUPPORTED = re.compile(r"on XLA_\w+?_JIT: (\w+) \(")
_NODE = re.compile(r"\{\{node ([^}]+)\}\}")
_STRUCTURES = (
    ("fixed tensor list size", "tensor_list_unknown_size"),
    ("TensorArray", "tensor_array_unknown_size"),
    ("must be a compile-time constant", "not_compile_time_constant"),
)
_FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")
# device types whose kernels say something about XLA or accelerators
_DEVICE_TYPES = ("CPU", "GPU", "TPU", "XLA_CPU_JIT", "XLA_GPU_JIT", "XLA_TPU_JIT")


def compilers(tf):
    """[(mode, name)] of this TensorFlow's XLA entry points, best first: jit_compile
    (2.5+), xla.compile (graph mode, 1.x to 2.x), experimental_compile (2.1-2.4; in 1.15
    it falls back to TensorFlow silently, which the warm-up notices), contrib (1.x)."""
    found = []
    function = getattr(tf, "function", None)
    keywords = []
    if function is not None:
        for keyword in ("jit_compile", "experimental_compile"):
            try:
                function(lambda: None, **{keyword: True})
            except TypeError:
                continue
            keywords.append((keyword, "tf.function(%s=True)" % keyword))
    found += [k for k in keywords if k[0] == "jit_compile"]
    xla = getattr(getattr(tf, "xla", None), "experimental", None)
    if xla is not None and hasattr(xla, "compile"):
        found.append(("xla.compile", "tf.xla.experimental.compile"))
    found += [k for k in keywords if k[0] != "jit_compile"]
    try:
        from tensorflow.contrib.compiler import xla as contrib_xla  # noqa: F401 - 1.x
    except Exception:  # noqa: BLE001 - no contrib, or contrib without a compiler
        pass
    else:
        found.append(("contrib", "tf.contrib.compiler.xla.compile"))
    return found


def registered_devices(op_type):
    """Device types with a registered kernel for ``op_type`` (None: TF cannot say)."""
    try:
        from tensorflow.python.framework import kernels
        found = kernels.get_registered_kernels_for_op(op_type)
    except Exception:  # noqa: BLE001 - 1.13 has no kernels module: the C API
        try:
            from tensorflow.core.framework import kernel_def_pb2
            from tensorflow.python import pywrap_tensorflow as c_api
            from tensorflow.python.util import compat
            buf = c_api.TF_GetRegisteredKernelsForOp(op_type)
            try:
                found = kernel_def_pb2.KernelList()
                found.ParseFromString(compat.as_bytes(c_api.TF_GetBuffer(buf)))
            finally:
                c_api.TF_DeleteBuffer(buf)
        except Exception:  # noqa: BLE001
            return None
    return sorted(set(k.device_type for k in found.kernel))


def kernel_evidence(op_types):
    """{op type: device types with a kernel}: evidence beside the compiled verdict."""
    out = {}
    for op_type in sorted(set(op_types)):
        devices = registered_devices(op_type)
        out[op_type] = None if devices is None else [
            d for d in devices if d in _DEVICE_TYPES or d.startswith("XLA_")]
    return out


def graph_op_types(tensors, stop):
    """Op types between ``tensors`` and the placeholders (the op itself included)."""
    seen, types, stack = set(), set(), [t.op for t in tensors]
    while stack:
        node = stack.pop()
        if id(node) in seen or node.type == "Placeholder":
            continue
        seen.add(id(node))
        types.add(node.type)
        stack.extend(t.op for t in node.inputs)
        stack.extend(node.control_inputs)
    types.discard("Const")
    return types - set(stop)


_NOISE = ("Graph execution error", "in user code", "Detected at node", "File ", "Node:",
          "Stack trace", "dummy_file_name", "[[", "tf2xla conversion failed",
          "The op is created at", "Original stack trace", "Run with TF_DUMP")


def _one_line(text):
    """The line of TF's message that says what went wrong (not where: never a traceback's
    source line, the line after ``File "...", line N``, which is our own code)."""
    lines, after_file = [], False
    for line in str(text).splitlines():
        line = line.strip()
        if not line:
            continue
        if after_file and not line.startswith("File "):
            after_file = False
            continue
        after_file = line.startswith("File ")
        lines.append(line)
    useful = [line for line in lines if not line.startswith(_NOISE) and
              not line.endswith(("error:", "code:")) and not re.match(r"\w+\.py:\d+", line)]
    line = (useful or lines or [""])[0]
    return re.sub(r"\s+", " ", re.sub(r"\{\{node [^}]*\}\}", "", line)).strip()[:300]


def failure(exc, graph):
    """{status: fails, op, structure?, message}: the first op XLA refused and why."""
    message = str(getattr(exc, "message", None) or exc)
    line = re.sub(r"Detected unsupported operations when trying to compile graph \S+ on ",
                  "unsupported on ", _one_line(message))
    found = {"status": "fails", "message": "%s: %s" % (type(exc).__name__, line)}
    match = _UNSUPPORTED.search(message)
    if match:
        found["op"] = match.group(1)
        return found
    for needle, structure in _STRUCTURES:
        if needle in message:
            found["structure"] = structure
            break
    node = _NODE.search(message)
    if node:
        try:
            found["op"] = graph.get_operation_by_name(node.group(1)).type
        except Exception:  # noqa: BLE001 - a node XLA made up, or a function's
            found["node"] = node.group(1)[:200]
    first_word = re.match(r"(\w+) ", line)
    if "op" not in found and first_word and hasattr(graph, "get_operations") and \
            first_word.group(1) in set(o.type for o in graph.get_operations()):
        found["op"] = first_word.group(1)  # 1.15: "ResizeNearestNeighbor with ... is not
    return found                            # yet implemented"


def _subgraph(tf, graph, fetches, fed):
    """The part of ``graph`` that computes ``fetches``, without the fed placeholders."""
    v1 = getattr(getattr(tf, "compat", None), "v1", None) or tf
    extract = getattr(getattr(v1, "graph_util", None), "extract_sub_graph", None)
    if extract is None:
        from tensorflow.python.framework import graph_util
        extract = graph_util.extract_sub_graph
    gd = extract(graph.as_graph_def(), sorted(set(t.op.name for t in fetches)))
    keep = [n for n in gd.node if n.name not in fed]
    for node in keep:  # colocation with a fed placeholder that is no longer there
        if "_class" in node.attr:
            del node.attr["_class"]
    # a While or If built outside a function is marked to be lowered to Switch/Merge
    # (Enter, Exit: no XLA kernels); inside jit_compile TF leaves them functional
    for node in list(keep) + [n for f in gd.library.function for n in f.node_def]:
        if "_lower_using_switch_merge" in node.attr:
            node.attr["_lower_using_switch_merge"].b = False
    del gd.node[:]
    gd.node.extend(keep)
    return gd


def device_missing(tf, device):
    """None when TensorFlow sees a ``device`` (CPU, GPU) to compile on, else why not."""
    if device == "CPU":
        return None
    config = getattr(tf, "config", None)
    listing = getattr(config, "list_physical_devices", None) or getattr(
        getattr(config, "experimental", None), "list_physical_devices", None)
    try:
        if listing is not None:
            found = [d.name for d in listing(device)]
        else:  # 1.x: the session's devices (XLA_GPU beside GPU)
            from tensorflow.python.client import device_lib
            found = [d.name for d in device_lib.list_local_devices()
                     if d.device_type == device]
    except Exception as exc:  # noqa: BLE001
        return "cannot list the %s devices: %s" % (device, _one_line(exc))
    if found:
        return None
    return ("TensorFlow sees no %s here (a --device %s harvest runs on a host with one, "
            "its drivers and a TensorFlow built for it)" % (device, device))


def variable_setups(graph, feeds):
    """{VarHandleOp name: the fed placeholder assigned to it} of ``graph``: the resource
    variables a builder set up (``probe_args.variable_handle``), None if another set-up
    (a TF1 reference variable, an assignment from a computed value) is there."""
    found = {}
    for node in graph.get_operations():
        if node.type == "AssignVariableOp":
            handle, value = node.inputs[0].op, node.inputs[1]
            if handle.type != "VarHandleOp" or value not in feeds:
                return None
            found[handle.name] = value
        elif node.type in ("VariableV2", "Variable", "Assign"):
            return None
    return found


def _variables(tf, graph, gd, feeds):
    """({handle tensor name: the same variable's or table's handle outside the compiled
    function}, [the variables' assignments from the fed values]) for the VarHandleOps of
    ``gd`` whose value a builder assigns from a feed and its lookup tables; those nodes
    are removed from ``gd``."""
    setups = variable_setups(graph, feeds) or {}
    inside = [n for n in gd.node if n.op == "VarHandleOp" and n.name in setups]
    tables = [n for n in gd.node if n.op in _TABLES and not n.input]
    if not inside and not tables:
        return {}, []
    from tensorflow.python.ops import gen_resource_variable_ops as gen_rv
    handles, assigns = _tables(tf, gd, tables), []
    for node in inside:
        source = graph.get_operation_by_name(node.name)
        handle = gen_rv.var_handle_op(
            dtype=source.get_attr("dtype"), shape=source.get_attr("shape"),
            shared_name=source.get_attr("shared_name"), name="outer_" + node.name)
        value = setups[node.name]
        assigns.append(gen_rv.assign_variable_op(
            handle, tf.constant(feeds[value], dtype=value.dtype.base_dtype)))
        handles[node.name + ":0"] = handle
    keep = [n for n in gd.node if n.name not in handles_of(inside + tables)]
    del gd.node[:]
    gd.node.extend(keep)
    return handles, assigns


# lookup tables' constructors: a model makes its tables outside the step, which captures
# them as it captures variables (a table made inside, XLA would refuse first)
_TABLES = frozenset(["HashTableV2", "MutableHashTableV2", "MutableHashTableOfTensorsV2"])


def _tables(tf, gd, tables):
    """{handle tensor name: the same table made outside the compiled function}."""
    from tensorflow.core.framework import graph_pb2
    v1 = getattr(getattr(tf, "compat", None), "v1", None) or tf
    handles = {}
    for node in tables:
        alone = graph_pb2.GraphDef()
        alone.versions.CopyFrom(gd.versions)
        alone.node.extend([node])
        handles[node.name + ":0"] = v1.import_graph_def(
            alone, name="outer", return_elements=[node.name + ":0"])[0]
    return handles


def handles_of(nodes):
    return set(n.name for n in nodes)


def run_set_up(tf, graph, fetches, feeds):
    """``fetches`` run without XLA, the builder's variables assigned first."""
    v1 = getattr(getattr(tf, "compat", None), "v1", None) or tf
    setups = [o for o in graph.get_operations() if o.type == "AssignVariableOp"]
    with v1.Session(graph=graph) as session:
        if setups:
            session.run(setups, feed_dict=feeds)
        return session.run(fetches, feed_dict=feeds)


def _placement(tf, device):
    """The device scope compiled functions are placed in (the CPU: TF's default)."""
    if device == "CPU":
        import contextlib
        return contextlib.nullcontext()
    return tf.device("/device:%s:0" % device)


def _arguments(feeds, constants):
    """The fed placeholders that become the compiled function's arguments; the others
    become constants (``constants``: True, integers and booleans; "all"; False, none)."""
    return [t for t in feeds if constants is False or (
        constants is True and t.dtype.base_dtype.name in _FLOAT_DTYPES)]


def run_compiled(tf, mode, graph, fetches, feeds, device="CPU", constants=True):
    """Values of ``fetches`` computed by XLA on ``device`` from ``feeds``
    ({placeholder: array}). Integer and boolean feeds are constants (``constants``
    True), or arguments like the rest (False), or every feed is a constant ("all")."""
    v1 = getattr(getattr(tf, "compat", None), "v1", None) or tf
    args = _arguments(feeds, constants)
    consts = [t for t in feeds if t not in args]
    gd = _subgraph(tf, graph, fetches, set(t.op.name for t in feeds))
    wanted = [t.name for t in fetches]
    used = set(name.lstrip("^") if ":" in name else name.lstrip("^") + ":0"
               for node in gd.node for name in node.input)
    used.update(wanted)

    def body(*values):
        mapping = dict((t.name, v) for t, v in zip(args, values) if t.name in used)
        # captured by the compiled function (an input_map tensor from outside is not)
        mapping.update((name, tf.identity(h)) for name, h in handles.items())
        for t in consts:
            if t.name in used:
                mapping[t.name] = tf.constant(feeds[t], dtype=t.dtype.base_dtype)
        # a fetch may be a fed placeholder (Identity's gradient is the upstream one)
        imported = iter(v1.import_graph_def(
            gd, input_map=mapping, name="", return_elements=[n for n in wanted
                                                             if n not in mapping]))
        return [tf.identity(mapping[n]) if n in mapping else next(imported) for n in wanted]

    run_graph = tf.Graph()
    with run_graph.as_default(), _placement(tf, device):
        inputs = [v1.placeholder(t.dtype.base_dtype, shape=feeds[t].shape) for t in args]
        # resource variables as a training step has them: made and assigned outside the
        # compiled function, which captures their handles
        handles, assigns = _variables(tf, graph, gd, feeds)
        if mode in ("jit_compile", "experimental_compile"):
            outputs = tf.function(body, **{mode: True})(*inputs)
        else:
            if mode == "xla.compile":
                compile_fn = tf.xla.experimental.compile
            else:
                from tensorflow.contrib.compiler import xla as contrib_xla
                compile_fn = contrib_xla.compile
            outputs = compile_fn(body, inputs=inputs)
        session = v1.Session(graph=run_graph)
        try:
            if assigns:
                session.run(assigns)
            return session.run(list(outputs), feed_dict=dict(
                (p, feeds[t]) for p, t in zip(inputs, args)))
        finally:
            session.close()


def check(tf, mode, graph, fetches, feeds, device="CPU", constants=True):
    """(verdict, values): {status: compiles} or a failure; values when it compiled."""
    try:
        values = run_compiled(tf, mode, graph, fetches, feeds, device, constants)
    except tf.errors.OpError as exc:  # XLA's refusals are errors of the run
        return failure(exc, graph), None
    except Exception as exc:  # noqa: BLE001 - ours, or TF refusing the graph itself
        line = _one_line(exc)
        named = "%s: " % type(exc).__name__
        return unknown("cannot compile here: %s" % (
            line if line.startswith(named) else named + line)), None
    return {"status": "compiles"}, values


def agreement(np, compiled, reference, tolerance):
    """Compare XLA's values with TF's: the numerical verification's rule, the error
    relative to max(1, |reference|) against the tolerance of the dtype used."""
    worst = 0.0
    for a, b in zip(compiled, reference):
        a = np.asarray(a, dtype=np.complex128 if np.iscomplexobj(a) else np.float64)
        b = np.asarray(b, dtype=a.dtype)
        if a.shape != b.shape:
            return {"agrees": False, "reason": "shapes differ: %s and %s" % (a.shape, b.shape)}
        if not a.size:
            continue
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            # (numpy before 1.19, in TF 1.x environments, has no equal_nan)
            if np.all((a == b) | (np.isnan(a) & np.isnan(b))):
                continue
            return {"agrees": False, "reason": "non-finite values differ"}
        worst = max(worst, float(np.max(np.abs(a - b))) / max(1.0, float(np.max(np.abs(b)))))
    return {"agrees": worst <= tolerance, "max_error": worst, "tolerance": tolerance}


def unknown(reason):
    return {"status": "unknown", "reason": reason[:300]}


_CHOSEN = {}  # device -> (mode, name)


def _refuses(tf, mode, device="CPU"):
    """None if ``mode`` compiles x + 1 and refuses an op XLA has no kernel for (Print):
    an entry point that falls back to TensorFlow would call everything compiling."""
    import numpy
    v1 = getattr(getattr(tf, "compat", None), "v1", None) or tf
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, shape=[2], name="x")
        y = x + 1.0
        printed = v1.Print(x, [x])
    feeds = {x: numpy.ones([2], dtype=numpy.float32)}
    verdict, _ = check(tf, mode, graph, [y], feeds, device)
    if verdict["status"] != "compiles":
        return "cannot compile x + 1: %s" % (verdict.get("message") or verdict.get("reason"))
    verdict, _ = check(tf, mode, graph, [printed], feeds, device)
    if verdict["status"] != "fails":
        return "compiles an op without XLA kernels (Print): it falls back to TensorFlow"
    return None


def choose_compiler(tf, device="CPU"):
    """(mode, name) of the first entry point that really compiles with XLA on
    ``device`` here, or (None, why none does). XLA registers its JIT kernels
    (XLA_CPU_JIT) on first use: the kernel registry shows them only after this."""
    if device not in _CHOSEN:
        tried = []
        for mode, name in compilers(tf):
            why = _refuses(tf, mode, device)
            if why is None:
                _CHOSEN[device] = (mode, name)
                break
            tried.append("%s %s" % (name, why))
        else:
            _CHOSEN[device] = (None, "; ".join(tried) if tried else
                               "this TensorFlow has no XLA compile API")
    return _CHOSEN[device]


def compile_alone(tf, mode, graph, op, outputs, feeds, device="CPU"):
    """The verdict of an op without a gradient, compiled alone: every input an argument
    (with integer inputs as constants, XLA folds an integer or string op whole and
    "compiles" what a training step cannot), and constants only for the inputs XLA wants
    known at compile time (Range's limit, Reshape's shape: in a model those come from
    static shapes), first the integer ones, then all. The op never runs without XLA
    first (queue, map and barrier ops block, some kernels crash on generated inputs),
    only after XLA failed, to tell a refusal of the generated inputs from XLA's."""
    if not outputs:
        return unknown("the op has no outputs: nothing to compile alone")
    for constants in (False, True, "all"):  # Range wants even its float inputs known
        verdict, _ = check(tf, mode, graph, outputs, feeds, device, constants)
        if verdict.get("structure") != "not_compile_time_constant":
            break
    if verdict["status"] == "fails" and "structure" not in verdict and \
            not _UNSUPPORTED.search(verdict.get("message", "")):  # not XLA's refusal
        v1 = getattr(getattr(tf, "compat", None), "v1", None) or tf
        try:
            with v1.Session(graph=graph) as session:
                session.run(outputs, feed_dict=feeds)
        except Exception as exc:  # noqa: BLE001 - TF refuses the generated inputs too
            return unknown("the generated inputs are invalid for the op (TensorFlow without "
                           "XLA refuses them too): %s" % _one_line(exc))
    elif verdict["status"] == "compiles" and not _fed(op, feeds, constants):
        devices = registered_devices(op.type) or []
        if "XLA_%s_JIT" % device not in devices:
            return unknown("compiled only as a constant: the op's inputs are constants here "
                           "and it has no XLA_%s_JIT kernel" % device)
    return verdict


# ops the builders make to set the probed op up (a lookup table's variable), never the
# probed op's own computation
_SET_UP = frozenset(["VarHandleOp", "VariableV2", "Variable", "AssignVariableOp",
                     "HashTableV2", "MutableHashTableV2", "MutableDenseHashTableV2"])


def _set_up_refused(verdict, op):
    """A forward verdict that blames a set-up op of the harvest's builder (XLA refused
    the builder's variable before it reached the op) is no verdict on the op:
    ``unknown``, with TF's message."""
    if verdict.get("status") == "fails" and verdict.get("op") in _SET_UP and \
            verdict.get("op") != op.type:
        return unknown("XLA refused %s, which the harvest made to set the op up, before "
                       "reaching the op: %s" % (verdict["op"], verdict.get("message", "")))
    return verdict


def _fed(op, feeds, constants):
    """Whether an argument of the compiled function reaches ``op``'s inputs."""
    arguments = set(t.op.name for t in _arguments(feeds, constants))
    seen, stack = set(), [t.op for t in op.inputs]
    while stack:
        node = stack.pop()
        if node.name in arguments:
            return True
        if node.name not in seen:
            seen.add(node.name)
            stack.extend(t.op for t in node.inputs)
    return False


def probe_xla(tf, np, build, tolerance, device="CPU"):
    """The ``xla`` entry of a probe record: compiled on ``device`` (CPU, GPU).

    ``build()`` builds the subject afresh and returns (graph, op, outputs, feeds,
    make_gradient): ``make_gradient()`` adds the gradient to that graph and returns
    (gradient tensors, extra feeds for the upstream gradients), or None when the op
    has no gradient to compile; ``make_gradient`` None: an op without a registered
    gradient, compiled alone (``compile_alone``). It raises when the op cannot be
    built; ``tolerance``
    maps a dtype name (``float32``) to the numerical check's tolerance.
    """
    started = time.time()
    mode, api_name = choose_compiler(tf, device)
    if mode is None:
        return {"device": device, "forward": unknown(api_name), "gradient": unknown(api_name)}
    record = {"device": device, "api": api_name}
    try:
        graph, op, outputs, feeds, make_gradient = build()
    except Exception as exc:  # noqa: BLE001 - the caller's builders raise anything
        why = "cannot build the op: %s" % _one_line(exc)
        record["forward"] = record["gradient"] = unknown(why)
        return record
    if make_gradient is None:  # no registered gradient: the op alone
        record["forward"] = compile_alone(tf, mode, graph, op, outputs, feeds, device)
    else:
        record["forward"], _ = check(tf, mode, graph, outputs, feeds, device)
    record["forward"] = _set_up_refused(record["forward"], op)
    types = graph_op_types(outputs, ())
    try:
        made = make_gradient() if make_gradient is not None else None
    except Exception as exc:  # noqa: BLE001
        made, record["gradient"] = None, unknown("cannot build the gradient: %s" % _one_line(exc))
    if made is not None:
        grads, extra = made
        all_feeds = dict(feeds)
        all_feeds.update(extra)
        verdict, values = check(tf, mode, graph, grads, all_feeds, device)
        if values is not None:
            try:
                reference = run_set_up(tf, graph, grads, all_feeds)
            except Exception as exc:  # noqa: BLE001 - an op with kernels for XLA only
                verdict.update({"agrees": None, "reason": "the gradient does not run without "
                                "XLA: %s" % _one_line(exc)})
            else:
                dtype = grads[0].dtype.base_dtype.name if grads else "float32"
                verdict.update(agreement(np, values, reference, tolerance.get(dtype, 2e-2)))
        record["gradient"] = verdict
        types |= graph_op_types(grads, ())
    elif "gradient" not in record:
        record["gradient"] = unknown("no gradient to compile")
    record["kernels"] = kernel_evidence(types - set(["NoOp"]))
    record["seconds"] = round(time.time() - started, 2)
    return record
