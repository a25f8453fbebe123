"""TensorFlow's own import decides which structurally mutated models are valid
(tests/fuzz/validity.py: names not unique, inputs naming no node, input counts the
OpDef does not take, a data input after a control input, cycles outside a while loop,
inputs naming an output their node does not have, and their legal twins): every mutation TF refuses, ``check`` refuses in one
ModelError, and every one TF accepts, ``check`` analyses. GraphDefs (.pb, .pbtxt) are
judged by ``tf.graph_util.import_graph_def``, a SavedModel by importing each MetaGraph's
graph (as TF Serving and the TF1 loader do) and, for mutations of a function body, by
``tf.saved_model.load`` as well (which ignores the graph's own nodes). Seeded and sized
by count: input N is the same mutation on every run. TF is imported once, in this
process; the mutations' claims (refused or not) are what the unit tier checks without
TF (tests/unit/test_structure_fuzz.py)."""
from __future__ import annotations

import random
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # tests.fuzz is imported as a package of the repository
    sys.path.insert(0, str(ROOT))

from tests.fuzz import seeds as fuzz_seeds  # noqa: E402
from tests.fuzz import validity  # noqa: E402

INPUTS = 240  # the figure docs/bad-input.md states
LOADS = 24  # of them, function-body mutations of a whole SavedModel through tf.saved_model.load


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, bytes]]:
    """name -> (kind, bytes): the fuzz harness's real seeds, a TF1 while loop frozen by
    TF, and the unit tier's hand-built graphs."""
    import tensorflow as tf

    from opregistry.model.readers import schema

    root = tmp_path_factory.mktemp("structure-seeds")
    out = {}
    for name, builder in fuzz_seeds.BUILDERS.items():
        if name == "keras_export":  # (its export differs from run to run)
            continue
        builder(root / name)
        path = root / name / fuzz_seeds.KINDS[name]
        kind = "savedmodel" if path.name == "saved_model.pb" else path.suffix[1:]
        data = path.read_bytes()
        if kind != "pbtxt":  # nodes, functions and maps in one order on every run
            data = fuzz_seeds._canonical(  # noqa: SLF001
                schema.parse("SavedModel" if kind == "savedmodel" else "GraphDef", data))
        out[name] = (kind, data)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        _, y = tf.compat.v1.while_loop(lambda i, _: i < 3, lambda i, a: (i + 1, tf.tanh(a)),
                                       (tf.constant(0), x))
        tf.identity(y, name="out")
    out["tf1_while"] = ("pb", graph.as_graph_def().SerializeToString())
    for name, message in validity.hand_built().items():
        out[f"hand_{name}"] = ("pb", message.SerializeToString())
    return out


def _parse(kind: str, data: bytes) -> Any:
    import tensorflow as tf
    from google.protobuf import text_format

    from opregistry.model.readers import schema

    if kind == "savedmodel":
        return schema.parse("SavedModel", data)
    if kind == "pbtxt":  # read by TF's own message: opregistry's schema skips weights
        data = text_format.Parse(data.decode(), tf.compat.v1.GraphDef()).SerializeToString()
    return schema.parse("GraphDef", data)


def _write(kind: str, message: Any, folder: Path) -> Path:
    from google.protobuf import text_format

    folder.mkdir(parents=True)
    if kind == "savedmodel":
        path = folder / "saved_model.pb"
    else:
        path = folder / f"g.{kind}"
    if kind == "pbtxt":
        import tensorflow as tf

        real = tf.compat.v1.GraphDef.FromString(message.SerializeToString())
        path.write_text(text_format.MessageToString(real))
    else:
        path.write_bytes(message.SerializeToString())
    return path


def _tf_imports(kind: str, message: Any) -> str | None:
    """None when TF imports every graph of the file and every function of its library,
    else its first error line. ``import_graph_def`` checks some library functions and
    leaves others to the first call, so each function is also made a graph as
    ``tf.saved_model.load`` makes it (``function_def_to_graph``)."""
    import tensorflow as tf
    from tensorflow.python.framework.function_def_to_graph import function_def_to_graph

    from tests.fuzz.structure import graphs

    for graph_def in graphs(message):
        real = tf.compat.v1.GraphDef.FromString(graph_def.SerializeToString())
        try:
            with tf.Graph().as_default():  # (the functions a body calls: imported here)
                tf.graph_util.import_graph_def(real, name="")
                for function in real.library.function:
                    function_def_to_graph(function)
        except Exception as exc:  # noqa: BLE001 - TF says refused in many classes
            return str(exc).splitlines()[0][:200] or type(exc).__name__
    return None


def _ours(path: Path) -> str | None:
    from opregistry import check
    from opregistry.model.graph import ModelError

    try:
        check(path.parent if path.name == "saved_model.pb" else path, release="2.21")
    except ModelError as exc:
        return str(exc)
    return None


def test_tf_and_check_agree_on_every_structural_mutation(seeds, tmp_path):
    names = sorted(seeds)
    disagree: list[Any] = []
    claims_wrong: list[Any] = []
    counts: Counter[tuple[str, bool]] = Counter()
    for index in range(INPUTS):
        rng = random.Random(f"validity:{index}")
        name = rng.choice(names)
        kind, data = seeds[name]
        message = _parse(kind, data)
        label, claim = validity.mutate(message, rng)
        path = _write(kind, message, tmp_path / str(index))
        tf_says = _tf_imports(kind, message)
        ours = _ours(path)
        counts[(label.split(" (")[0], tf_says is None)] += 1
        if (tf_says is None) != (ours is None):
            disagree.append((index, name, label, tf_says, ours))
        if claim != (tf_says is not None):
            claims_wrong.append((index, name, label, tf_says))
        if ours is not None:
            assert "\n" not in ours, ours
        shutil.rmtree(path.parent)
    print(sorted(counts.items()))
    print(f"{INPUTS} structural mutations: "
          f"{sum(n for (_, ok), n in counts.items() if not ok)} refused by TF and by check, "
          f"{sum(n for (_, ok), n in counts.items() if ok)} imported by TF and analysed")
    assert not disagree, "\n".join(map(repr, disagree))
    assert not claims_wrong, claims_wrong
    refused = sum(n for (_, ok), n in counts.items() if not ok)
    assert 0.3 * INPUTS < refused < 0.7 * INPUTS, counts
    for family in ("duplicate", "missing input", "missing control input", "extra input",
                   "dropped input", "after a control input", "self loop", "cycle in",
                   "shuffled", "closing no cycle", "another scope uses",
                   "output index past", "output arg the op lacks", "output 0 spelt"):
        assert any(family in label for label, _ in counts), family


def test_saved_models_tf_loads_are_analysed_and_those_it_refuses_refused(tmp_path):
    """Function-body mutations of a whole SavedModel (variables included) through
    ``tf.saved_model.load``: TF2's own loader refuses the same ones."""
    import tensorflow as tf

    from opregistry.model.readers import schema

    seed = tmp_path / "seed"
    fuzz_seeds.BUILDERS["module_while_custom"](seed)
    data = (seed / "saved_model.pb").read_bytes()
    done, disagree = 0, []
    outcomes: Counter[bool] = Counter()
    index = 0
    while done < LOADS:
        rng = random.Random(f"validity-load:{index}")
        index += 1
        message = schema.parse("SavedModel", data)
        label, claim = validity.mutate(message, rng)
        if "in a function" not in label:
            continue  # TF2's loader ignores the graph's own nodes
        done += 1
        folder = tmp_path / f"m{index}"
        shutil.copytree(seed, folder)
        (folder / "saved_model.pb").write_bytes(message.SerializeToString())
        try:
            tf.saved_model.load(str(folder))
            tf_says = None
        except Exception as exc:  # noqa: BLE001
            tf_says = str(exc).splitlines()[0][:200] or type(exc).__name__
        ours = _ours(folder / "saved_model.pb")
        outcomes[tf_says is None] += 1
        if (tf_says is None) != (ours is None) or claim != (tf_says is not None):
            disagree.append((index, label, claim, tf_says, ours))
        shutil.rmtree(folder)
    print(f"{LOADS} function-body mutations through tf.saved_model.load: "
          f"{outcomes[False]} refused by TF and by check, {outcomes[True]} loaded and analysed")
    assert not disagree, disagree
    assert outcomes[True] and outcomes[False], outcomes



def test_tf_refuses_the_hand_written_output_names_the_unit_tier_checks():
    """The claims of tests/fuzz/validity.py's GRAPH_NAMES and BODY_NAMES (the unit tier
    checks opregistry's refusal of each, by its message) are TF's import's."""
    wrong: list[Any] = []
    for text, refused in validity.GRAPH_NAMES.items():
        if (_tf_imports("pb", validity.output_sources(text)) is not None) != refused:
            wrong.append(text[:40])
    for (text, ret), refused in validity.BODY_NAMES.items():
        if (_tf_imports("pb", validity.body_names(text, ret)) is not None) != refused:
            wrong.append((text, ret))
    assert not wrong, wrong

def test_an_output_count_a_saved_model_stripped_is_counted_by_its_default(tmp_path):
    """``tf.saved_model.save`` strips attrs left at their default: NIntsOutDefault's N
    (3 outputs by default) is not in the file, so the count comes from the OpDef. A body
    naming ``n:a:3`` is refused by both of TF's loaders and by check. ``n:a:2`` (what TF
    saved) the TF1 loader, as TF Serving, loads (C++ fills the default) and check
    analyses; ``tf.saved_model.load`` refuses it (its Python ``function_def_to_graph``
    counts a missing N as 0): a model one TF loader serves is not refused."""
    import tensorflow as tf

    from opregistry.model.readers import schema

    class Module(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
        def serve(self, x):
            graph = tf.compat.v1.get_default_graph()
            n = graph.create_op("NIntsOutDefault", [], [tf.int32] * 3, name="n")
            return x + tf.cast(n.outputs[2], tf.float32)

    def first_line(load: Any) -> str | None:
        try:
            load()
        except Exception as exc:  # noqa: BLE001
            return str(exc).splitlines()[0] or type(exc).__name__
        return None

    def v1_load(folder: Path) -> None:
        with tf.compat.v1.Session(graph=tf.Graph()) as session:
            tf.compat.v1.saved_model.load(session, ["serve"], str(folder))

    seed = tmp_path / "seed"
    tf.saved_model.save(Module(), str(seed))
    data = (seed / "saved_model.pb").read_bytes()
    outcomes = {}
    for index in (2, 3):
        message = schema.parse("SavedModel", data)
        functions = message.meta_graphs[0].graph_def.library.function
        (node,) = [n for f in functions for n in f.node_def if n.op == "NIntsOutDefault"]
        assert "N" not in node.attr  # stripped by its default
        (consumer,) = [n for f in functions for n in f.node_def if "n:a:2" in n.input]
        consumer.input[list(consumer.input).index("n:a:2")] = f"n:a:{index}"
        folder = tmp_path / str(index)
        shutil.copytree(seed, folder)
        (folder / "saved_model.pb").write_bytes(message.SerializeToString())
        outcomes[index] = (first_line(lambda: v1_load(folder)),  # noqa: B023
                           first_line(lambda: tf.saved_model.load(str(folder))),  # noqa: B023
                           _ours(folder / "saved_model.pb"))
    v1, v2, ours = outcomes[2]
    assert v1 is None and v2 == "'n:a:2'" and ours is None, outcomes
    v1, v2, ours = outcomes[3]
    assert v1 is not None and v2 is not None and ours is not None, outcomes
    assert "output 'a' of 'n' ('NIntsOutDefault') has 3 values" in ours, ours
