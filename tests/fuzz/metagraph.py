"""Structure-aware mutations of what a SavedModel adds around its graphs: signatures
naming missing or malformed tensors, object-graph references and bound inputs out of
range, MetaGraphs duplicated or emptied, TF1 collections holding garbage."""
from __future__ import annotations

import random
from typing import Any, Callable

from tests.fuzz.structure import BAD_NAMES, NON_UTF8, TYPES, bad_tensor

REFERENCES = (-1, -(2 ** 31), 0, 1, 2 ** 31 - 1, 10 ** 6)


def _meta(message: Any, rng: random.Random) -> Any:
    if not len(message.meta_graphs):
        return message.meta_graphs.add()
    return message.meta_graphs[rng.randrange(len(message.meta_graphs))]


def s_signature(message: Any, rng: random.Random) -> str:
    meta = _meta(message, rng)
    keys = sorted(meta.signature_def) + ["serving_default", "__saved_model_init_op", ""]
    sig = meta.signature_def[rng.choice(keys)]
    side = sig.inputs if rng.random() < 0.5 else sig.outputs
    key = rng.choice(sorted(side) + ["new", "", "a" * 300])
    roll = rng.random()
    if roll < 0.6:
        side[key].name = bad_tensor(message, rng)
    elif roll < 0.8:
        side[key].dtype = rng.choice(TYPES)
    elif key in side:
        del side[key]
    else:
        for k in range(rng.choice((10, 2000))):
            side[f"k{k}"].name = bad_tensor(message, rng)
            side[f"k{k}"].dtype = 1
    return f"signature {key[:20]!r}"


def s_object_graph(message: Any, rng: random.Random) -> str:
    objects = _meta(message, rng).object_graph_def
    count = len(objects.nodes)
    roll = rng.random()
    if roll < 0.35 and count:
        node = objects.nodes[rng.randrange(count)]
        node.children.add(node_id=rng.choice(REFERENCES + (count, count - 1)),
                          local_name=rng.choice(BAD_NAMES[:6]))
        return "object child"
    if roll < 0.7 and len(objects.concrete_functions):
        name = rng.choice(sorted(objects.concrete_functions))
        bound = objects.concrete_functions[name].bound_inputs
        if len(bound) and rng.random() < 0.5:
            bound[rng.randrange(len(bound))] = rng.choice(REFERENCES + (count,))
        else:
            bound.extend([rng.choice(REFERENCES + (count,))] * rng.choice((1, 5, 1000)))
        return "bound inputs"
    if roll < 0.85 and count:
        node = objects.nodes[rng.randrange(count)]
        node.variable.dtype = rng.choice(TYPES)
        node.variable.trainable = rng.random() < 0.5
        node.variable.name = rng.choice(BAD_NAMES)
        return "object variable"
    if count:
        del objects.nodes[rng.randrange(count):]
        return "objects cut"
    objects.nodes.add().variable.dtype = 1
    return "object added"


def s_object_shape(message: Any, rng: random.Random) -> str:
    """Object graphs deep or wide (issue 21: a 100,000-object chain was quadratic): a
    chain below an object, or many children of one, each a variable or not, with
    short or long names."""
    objects = _meta(message, rng).object_graph_def
    if not len(objects.nodes):
        objects.nodes.add()
    parent = rng.randrange(len(objects.nodes))
    variables = rng.random() < 0.5
    name = rng.choice(("c", "layer_with_weights-", "n" * rng.choice((100, 2000))))
    if rng.random() < 0.5:
        depth = rng.choice((150, 199, 201) if len(name) > 50 else (150, 201, 5000, 100_000))
        for i in range(depth):
            objects.nodes[parent].children.add(node_id=len(objects.nodes),
                                               local_name=f"{name}{i}")
            parent = len(objects.nodes)
            node = objects.nodes.add()
            if variables:
                node.variable.dtype, node.variable.trainable = 1, True
        width = rng.choice((0, 10, 300))  # variables at the bottom: long paths, many
        label = f"object chain {depth}"
    else:
        width = rng.choice((1000, 20_000, 200_000)) // (20 if len(name) > 50 else 1)
        label = f"object width {width}"
    for i in range(width):
        objects.nodes[parent].children.add(node_id=len(objects.nodes), local_name=f"{name}{i}")
        node = objects.nodes.add()
        if variables:
            node.variable.dtype, node.variable.trainable = 1, True
            node.variable.name = f"w{i}"
    return label + (" of variables" if variables else "")


def s_meta_graphs(message: Any, rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.25:
        del message.meta_graphs[:]
        return "no meta graphs"
    if roll < 0.5 and len(message.meta_graphs):
        copy = message.meta_graphs.add()
        copy.CopyFrom(message.meta_graphs[0])
        return "meta graph duplicated"
    tags = _meta(message, rng).meta_info_def.tags
    if rng.random() < 0.5:
        del tags[:]
    tags.extend(rng.choice((["train"], ["serve", "serve"], ["", ","], ["serve,gpu"])))
    _meta(message, rng).meta_info_def.tensorflow_version = rng.choice(("", "x" * 1000, "2.99"))
    return "tags"


def s_collection(message: Any, rng: random.Random) -> str:
    collection = _meta(message, rng).collection_def[rng.choice(
        ("trainable_variables", "variables", ""))]
    value = collection.bytes_list.value
    roll = rng.random()
    if roll < 0.4:
        value.append(rng.choice(NON_UTF8 + (b"", b"\x0a\x05x:abc", b"\x0a\x01:")))
    elif roll < 0.7 and len(value):
        value[rng.randrange(len(value))] = value[0][:rng.randrange(len(value[0]) + 1)]
    else:
        collection.node_list.value.append(rng.choice(BAD_NAMES))
    return "collection"


META_MUTATORS: list[Callable[[Any, random.Random], str]] = [
    s_signature, s_signature, s_object_graph, s_object_graph, s_object_shape, s_meta_graphs,
    s_collection]
