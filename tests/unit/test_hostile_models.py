"""Hostile model files: each gets one ModelError (the CLI's one line, exit 2), never a
traceback, a hang or gigabytes. GraphDefs and libraries built here; no TensorFlow."""
from __future__ import annotations

import os

import forked  # tests/unit is on sys.path
import pytest

from opregistry import check
from opregistry.model.graph import ModelError
from opregistry.model.readers import schema

F = schema.DT_FLOAT


def _write(tmp_path, graph, name="g.pb"):
    path = tmp_path / name
    path.write_bytes(graph.SerializeToString())
    return path


def _graph_with_input(text):
    graph = schema.message_classes()["GraphDef"]()
    x = graph.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = F
    node = graph.node.add(name="y", op="Relu", input=[text])
    node.attr["T"].type = F
    return graph


@pytest.mark.parametrize("text", ["x:abc", "x:", "x:1e400", "x:1:2:3", "x:-1", "x:99999999999"])
def test_input_names_that_are_not_tensor_names(tmp_path, text):
    with pytest.raises(ModelError, match="tensor name|names output|'x' .* has 1 output"):
        check(_write(tmp_path, _graph_with_input(text)), release="2.21")


def test_an_empty_input_name(tmp_path):
    with pytest.raises(ModelError, match="empty input name"):
        check(_write(tmp_path, _graph_with_input("")), release="2.21")


def test_a_declared_count_far_beyond_the_file(tmp_path):
    """96 bytes declaring Unpack num=1000000000: refused, not 14 GB."""
    graph = _graph_with_input("x")
    unpack = graph.node.add(name="u", op="Unpack", input=["x"])
    unpack.attr["T"].type = F
    unpack.attr["num"].i = 1_000_000_000
    with pytest.raises(ModelError, match="declares 1000000000 values"):
        check(_write(tmp_path, graph), release="2.21")


def _library_graph(bodies):
    """A graph calling function f0; ``bodies`` maps a function to the functions it
    calls (each call its own node)."""
    graph = schema.message_classes()["GraphDef"]()
    x = graph.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = F
    call = graph.node.add(name="call", op="PartitionedCall", input=["x"])
    call.attr["f"].func.name = "f0"
    call.attr["Tout"].list.type.append(F)
    for name, callees in bodies.items():
        function = graph.library.function.add()
        function.signature.name = name
        function.signature.input_arg.add(name="a", type=F)
        function.signature.output_arg.add(name="out", type=F)
        last = "a"
        for k, callee in enumerate(callees):
            node = function.node_def.add(name=f"c{k}", op="PartitionedCall", input=[last])
            node.attr["f"].func.name = callee
            node.attr["Tout"].list.type.append(F)
            last = f"c{k}:output:0"
        function.ret["out"] = last
    return graph


def test_a_function_that_calls_itself_is_refused(tmp_path):
    graph = _library_graph({"f0": ["f1"], "f1": ["f1", "f1"]})
    with pytest.raises(ModelError, match=r"function f1 calls itself \(f1 -> f1\)"):
        check(_write(tmp_path, graph), release="2.21")


def test_calls_that_nest_too_deep_name_the_chain(tmp_path):
    """5,000 nested functions: an error naming the chain, not "ops unknown"."""
    bodies = {f"f{i}": [f"f{i + 1}"] for i in range(5000)}
    bodies["f5000"] = []
    with pytest.raises(ModelError, match=r"nest deeper than 200 \(f0 -> f1 -> f2 -> \.\.\."):
        check(_write(tmp_path, _library_graph(bodies)), release="2.21")


def test_calls_that_multiply_stop_at_the_budget(tmp_path):
    """Each function calls the next twice: 2**30 instances if inlined; refused early."""
    bodies = {f"f{i}": [f"f{i + 1}", f"f{i + 1}"] for i in range(30)}
    bodies["f30"] = []
    with pytest.raises(ModelError, match="would create more than"):
        check(_write(tmp_path, _library_graph(bodies)), release="2.21")


def test_an_attribute_that_is_not_utf8(tmp_path):
    graph = _graph_with_input("x")
    handle = graph.node.add(name="v", op="VarHandleOp")
    handle.attr["dtype"].type = F
    handle.attr["shared_name"].s = b"\xff\xfe"
    with pytest.raises(ModelError, match="not UTF-8"):
        check(_write(tmp_path, graph), release="2.21")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_special_files_are_refused_by_type(tmp_path):
    fifo = tmp_path / "model.pb"
    os.mkfifo(fifo)
    with pytest.raises(ModelError, match="not a regular file"):
        check(fifo, release="2.21")  # a read would block forever
    for device in ("/dev/zero", "/dev/urandom", "/dev/null"):
        with pytest.raises(ModelError, match="not a regular file"):
            check(device, release="2.21")
    with pytest.raises(ModelError, match="cannot read"):
        check(tmp_path / ("x" * 300), release="2.21")


def test_the_cli_says_one_line(tmp_path):
    path = _write(tmp_path, _graph_with_input("x:abc"))
    env = {k: v for k, v in os.environ.items() if k != "OPREGISTRY_DB"}
    done = forked.run(["check", str(path)], env=env, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "not a tensor name" in done.stderr


def _saved_model(tmp_path, change=None):
    """A TF2-style SavedModel built by hand: a variable bound to a call of ``fn``,
    one signature; ``change(saved_model)`` alters it before it is written."""
    saved = schema.message_classes()["SavedModel"]()
    meta = saved.meta_graphs.add()
    meta.meta_info_def.tags.append("serve")
    graph = meta.graph_def
    graph.node.add(name="x", op="Placeholder").attr["dtype"].type = F
    graph.node.add(name="v", op="VarHandleOp").attr["dtype"].type = F
    call = graph.node.add(name="call", op="StatefulPartitionedCall", input=["x", "v"])
    call.attr["f"].func.name = "fn"
    call.attr["Tout"].list.type.append(F)
    fn = graph.library.function.add()
    fn.signature.name = "fn"
    fn.signature.input_arg.add(name="a", type=F)
    fn.signature.input_arg.add(name="h", type=schema.DT_RESOURCE)
    fn.signature.output_arg.add(name="out", type=F)
    read = fn.node_def.add(name="read", op="ReadVariableOp", input=["h"])
    read.attr["dtype"].type = F
    mul = fn.node_def.add(name="mul", op="Mul", input=["a", "read:value:0"])
    mul.attr["T"].type = F
    fn.ret["out"] = "mul:z:0"
    signature = meta.signature_def["serving_default"]
    signature.inputs["x"].name, signature.inputs["x"].dtype = "x:0", F
    signature.outputs["y"].name, signature.outputs["y"].dtype = "call:0", F
    objects = meta.object_graph_def
    objects.nodes.add().children.add(node_id=1, local_name="v")
    variable = objects.nodes.add().variable
    variable.dtype, variable.trainable, variable.name = F, True, "v"
    objects.concrete_functions["fn"].bound_inputs.append(1)
    if change is not None:
        change(saved)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "saved_model.pb").write_bytes(saved.SerializeToString())
    return tmp_path / "m"


def test_the_hand_built_saved_model_is_checked(tmp_path):
    result = check(_saved_model(tmp_path), release="2.21")
    assert [t.name for t in result.targets] == ["v", "x"] and not result.findings


def test_an_object_child_out_of_range(tmp_path):
    """Found by the fuzzer: a negative child id was an IndexError."""
    def change(saved):
        saved.meta_graphs[0].object_graph_def.nodes[0].children.add(node_id=-1, local_name="c")
    with pytest.raises(ModelError, match=r"object 0's child 'c' is object -1, outside 0\.\.1"):
        check(_saved_model(tmp_path, change), release="2.21")


def test_a_bound_input_out_of_range(tmp_path):
    def change(saved):
        saved.meta_graphs[0].object_graph_def.concrete_functions["fn"].bound_inputs[0] = 7
    with pytest.raises(ModelError, match=r"function 'fn' binds object 7, outside 0\.\.1"):
        check(_saved_model(tmp_path, change), release="2.21")


@pytest.mark.parametrize("name, message", [
    ("call:abc", "which is not a tensor name"), ("call:", "which is not a tensor name"),
    ("call:-1", "which is not a tensor name"), ("call:1:2", "which is not a tensor name"),
    ("nothing:0", "which the graph does not have"), ("", "which the graph does not have"),
    ("call:5", "StatefulPartitionedCall 'call' has 1 outputs")])
def test_a_signature_naming_no_tensor(tmp_path, name, message):
    """_top_tensor skipped such an output: the model was reported clean, unchecked."""
    def change(saved):
        saved.meta_graphs[0].signature_def["serving_default"].outputs["y"].name = name
    with pytest.raises(ModelError, match=f"signature 'serving_default' output 'y' names "
                                         f"'{name}', .*{message}"):
        check(_saved_model(tmp_path, change), release="2.21")


def test_a_signature_input_naming_no_tensor(tmp_path):
    def change(saved):
        saved.meta_graphs[0].signature_def["serving_default"].inputs["x"].name = "x:abc"
    with pytest.raises(ModelError, match="signature 'serving_default' input 'x' names "
                                         "'x:abc', which is not a tensor name"):
        check(_saved_model(tmp_path, change), release="2.21")


def _peak_rss_growth(call):
    """How much the process's peak RSS grew (bytes) during ``call()``."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    call()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024


@pytest.mark.parametrize("name", ["sparse.pb", "m/saved_model.pb"])
def test_a_sparse_file_is_refused_before_it_is_read(tmp_path, name):
    """2 GB of holes cost 2.1 GB of memory before the parser refused them."""
    path = tmp_path / name
    path.parent.mkdir(exist_ok=True)
    with open(path, "wb") as file:
        file.truncate(2_000_000_000)

    def refused():
        with pytest.raises(ModelError, match="first bytes are no protobuf field"):
            check(path.parent if name.startswith("m/") else path, release="2.21")
    assert _peak_rss_growth(refused) < 50 * 2 ** 20


def test_a_file_larger_than_a_message_is_refused_by_its_size(tmp_path):
    path = tmp_path / "big.pb"
    with open(path, "wb") as file:
        file.write(b"\x0a\x00")  # a valid start: only the size refuses it
        file.truncate(2 * 1024 ** 3 + 1)

    def refused():
        with pytest.raises(ModelError, match="2147483649 bytes is larger than a protobuf"):
            check(path, release="2.21")
    assert _peak_rss_growth(refused) < 50 * 2 ** 20


def _in_fork(prepare, path):
    """``check(path)`` in a forked process after ``prepare()``: what it raised."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            prepare()
            try:
                check(path, release="2.21")
                message = "no error"
            except ModelError as exc:
                message = f"ModelError: {exc}"
            except BaseException as exc:  # noqa: B036 - reported to the parent
                message = f"{type(exc).__name__}: {exc}"
            os.write(write, message.encode()[:4000])
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    message = os.read(read, 4096).decode()
    os.close(read)
    return message


@pytest.mark.parametrize("failure", [MemoryError(), "Arena alloc failed",
                                     SystemError("error return without exception set")])
@pytest.mark.parametrize("name", ["m", "g.pb"])
def test_out_of_memory_is_not_called_a_corrupt_file(tmp_path, monkeypatch, failure, name):
    """Found by the harness's own test: a parse that ran out of memory said
    "saved_model.pb is not a SavedModel (MemoryError)" (upb may also say "Arena alloc
    failed", or raise SystemError). The parser is made to fail as it does under an
    address-space limit."""
    from google.protobuf.message import DecodeError

    from opregistry.model.readers import savedmodel

    path = _saved_model(tmp_path) if name == "m" else _write(tmp_path, _graph_with_input("x"))

    def parse(message, data):
        raise DecodeError(failure) if isinstance(failure, str) else failure
    monkeypatch.setattr(savedmodel.schema, "parse", parse)
    with pytest.raises(ModelError, match=r"out of memory parsing its \d+ bytes"):
        check(path, release="2.21")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="needs root to check as another user (root reads everything)")
def test_a_saved_model_without_read_permission():
    """An unreadable SavedModel directory was a PermissionError traceback. Checked in a
    fork that becomes nobody (this interpreter may live where nobody cannot exec it)."""
    import shutil
    import tempfile
    from pathlib import Path

    root = Path(tempfile.mkdtemp(dir="/tmp"))  # pytest's are 0700: nobody cannot enter
    root.chmod(0o755)
    model = root / "m"
    model.mkdir()
    (model / "saved_model.pb").write_bytes(_graph_with_input("x").SerializeToString())
    model.chmod(0o000)

    def nobody() -> None:
        os.setgid(65534)
        os.setuid(65534)

    message = _in_fork(nobody, model)
    model.chmod(0o755)
    shutil.rmtree(root)
    assert message == f"ModelError: {model}: cannot read: Permission denied", message


def _chain_calls(depth, calls):
    """``calls`` top-level calls of a chain of ``depth`` nested one-node functions."""
    bodies = {f"f{i}": [f"f{i + 1}"] for i in range(depth - 1)}
    bodies[f"f{depth - 1}"] = []
    graph = _library_graph(bodies)
    for k in range(calls - 1):
        call = graph.node.add(name=f"call{k}", op="PartitionedCall", input=["x"])
        call.attr["f"].func.name = "f0"
        call.attr["Tout"].list.type.append(F)
    return graph


def test_calls_count_in_the_budget(tmp_path):
    """Found by the fuzzer: 3,000 calls of a 199-deep chain of one-node functions were
    600,000 instances, under the budget, but 6 s and 380 MB (each call costs more than
    the node it adds)."""
    with pytest.raises(ModelError, match="would create more than 1,000,000 nodes"):
        check(_write(tmp_path, _chain_calls(199, 3000)), release="2.21")


def test_a_small_file_cannot_inline_millions(tmp_path):
    """280 KB (a 1,000-node body called 3,990 times) was 4 million instances, 12 s and
    1.4 GB: within the budget of the time, not within the fuzzer's 10 s."""
    graph = _library_graph({"f0": []})
    body = graph.library.function[0]
    last = "a"
    for i in range(1000):
        node = body.node_def.add(name=f"n{i}", op="Relu", input=[last])
        node.attr["T"].type = F
        last = f"n{i}:activations:0"
    body.ret["out"] = last
    for k in range(3990):
        call = graph.node.add(name=f"call{k}", op="PartitionedCall", input=["x"])
        call.attr["f"].func.name = "f0"
        call.attr["Tout"].list.type.append(F)
    with pytest.raises(ModelError, match="would create more than 1,000,000 nodes"):
        check(_write(tmp_path, graph), release="2.21")


def test_keys_of_nested_instances_are_made_when_asked(tmp_path):
    from opregistry.model.flatten import flatten
    from opregistry.model.readers import savedmodel
    from opregistry.registry.facts import op_facts

    model = savedmodel.read(_write(tmp_path, _library_graph({"f0": ["f1"], "f1": ["f2"],
                                                             "f2": []})))
    _, facts = op_facts("2.21", sorted(model.op_types))
    assert list(flatten(model, facts).keys) == ["x", "call", "call/f0/c0", "call/f0/c0/f1/c0"]


def test_deep_nesting_within_the_budget_costs_no_quadratic_keys(tmp_path):
    """800 calls of a 199-deep chain: each instance's key was the string of its whole
    call path (up to ~1,400 characters, 160,000 of them)."""
    path = _write(tmp_path, _chain_calls(199, 800))
    # measured: 133 MB with keys made when asked, 256 MB with the path strings
    assert _peak_rss_growth(lambda: check(path, release="2.21")) < 190 * 2 ** 20


def test_a_hostile_name_is_shortened_in_the_one_line(tmp_path):
    """Found by the fuzzer: a 5,000-character tensor name made a 10 KB Error line."""
    name = "a" * 5000

    def change(saved):
        saved.meta_graphs[0].signature_def["serving_default"].outputs["y"].name = name
    with pytest.raises(ModelError) as error:
        check(_saved_model(tmp_path, change), release="2.21")
    assert "which the graph does not have" in str(error.value)
    assert len(str(error.value)) < len(str(tmp_path)) + 200, str(error.value)


@pytest.mark.parametrize("field", ["values_tensor_name", "indices_tensor_name",
                                   "dense_shape_tensor_name"])
def test_a_sparse_signature_input_naming_no_tensor(tmp_path, field):
    """A coo_sparse input is read by its components: each must name a tensor."""
    def change(saved):
        info = saved.meta_graphs[0].signature_def["serving_default"].inputs["x"]
        info.name = ""
        sparse = info.coo_sparse
        sparse.values_tensor_name = sparse.indices_tensor_name = \
            sparse.dense_shape_tensor_name = "x:0"
        setattr(sparse, field, "nothing:0")
    with pytest.raises(ModelError, match="signature 'serving_default' input 'x' names "
                                         "'nothing:0', which the graph does not have"):
        check(_saved_model(tmp_path, change), release="2.21")


def test_a_composite_signature_output_with_an_unnamed_component(tmp_path):
    """A composite_tensor output whose component has no name (a nested composite):
    TF cannot load it, and neither is it reported clean."""
    def change(saved):
        info = saved.meta_graphs[0].signature_def["serving_default"].outputs["y"]
        info.name = ""
        info.composite_tensor.type_spec.type_spec_class_name = "RaggedTensorSpec"
        info.composite_tensor.components.add(name="call:0", dtype=F)
        info.composite_tensor.components.add(dtype=schema.DT_INT64)
    with pytest.raises(ModelError, match="output 'y' names '', which the graph does not "
                                         "have"):
        check(_saved_model(tmp_path, change), release="2.21")
def test_an_unknown_op_type_with_control_characters_stays_on_the_summary_line(tmp_path):
    """Found by the fuzzer (the command line's input 202): an op type holding a newline
    split the summary line, and an ESC reached the terminal."""
    from opregistry.formats.check import summary_line

    graph = _graph_with_input("x")
    graph.node.add(name="odd", op="Identity\n\x1b[31mred", input=["x"])
    line = summary_line(check(_write(tmp_path, graph), release="2.21"))
    assert line.endswith("ops unknown to the database: Identity\\n\\x1b[31mred"), line
