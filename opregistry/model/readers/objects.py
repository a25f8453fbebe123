"""A SavedModel's object graph, read as untrusted input: its size and depth bounded
like the function library (``library.MAX_CALL_DEPTH``, the inlining budget), every
reference checked, and object paths (``layer_with_weights-0/kernel``) kept as parent
pointers, a path's text made only for the objects a result names."""
from __future__ import annotations

from array import array
from typing import Any

from opregistry.model.graph import ModelError, shown

MAX_OBJECTS = 1_000_000  # objects of one graph (real models: hundreds to thousands)
MAX_REFERENCES = 2_000_000  # children of all objects together
MAX_OBJECT_DEPTH = 200  # shortest path from the root, in objects (real models: 2-10)
# the text of the paths a result names: at most this multiple of the object graph's
# own bytes (a 200-deep path of long names, named by each of many variables, would
# otherwise cost the product), or MIN_PATH_TEXT characters for small graphs
PATH_TEXT_PER_BYTE, MIN_PATH_TEXT = 4, 1 << 20


def check_object_graph(objects: Any, source: str) -> None:
    """Refuse an object graph beyond the size bounds, or with a reference (a child,
    a bound input) that names no object: TensorFlow refuses to load those too."""
    count = len(objects.nodes)
    if count > MAX_OBJECTS:
        raise ModelError(f"{source}: its object graph holds {count:,} objects, more than "
                         f"{MAX_OBJECTS:,}")
    references = sum(len(node.children) for node in objects.nodes)
    if references > MAX_REFERENCES:
        raise ModelError(f"{source}: its object graph holds {references:,} child "
                         f"references, more than {MAX_REFERENCES:,}")
    for object_id, node in enumerate(objects.nodes):
        for child in node.children:
            if not 0 <= child.node_id < count:
                raise ModelError(f"{source}: object {object_id}'s child {shown(child.local_name)} "
                                 f"is object {child.node_id}, outside 0..{count - 1}")
    for name, function in sorted(objects.concrete_functions.items()):
        bound = function.bound_inputs
        if bound and not (0 <= min(bound) and max(bound) < count):  # (min/max: in C)
            object_id = next(i for i in bound if not 0 <= i < count)
            raise ModelError(f"{source}: function {shown(name)} binds object {object_id}, "
                             f"outside 0..{count - 1}")


class ObjectPaths:
    """Object id -> its shortest path from the root, the first found breadth-first
    with children in their saved order (as ``tf.saved_model.save`` numbers them).

    Paths are parent pointers (the parent's id and the child's name), so a chain of
    N objects costs O(N), not the O(N^2) of one string per object; ``get`` makes
    and keeps the text of the paths asked for, whose total ``reserve`` bounds first.
    """

    def __init__(self, objects: Any, source: str):
        self._objects = objects
        self._source = source
        count = len(objects.nodes)
        # per object: parent id (-1: unreached), the child's index in the parent's
        # children (its name), depth, and the path's length in characters
        self._parent = array("i", [-1]) * count
        self._slot = array("i", [0]) * count
        self._depth = array("i", [0]) * count
        self._length = array("q", [0]) * count
        self._text: dict[int, str] = {0: ""}
        self._budget = max(MIN_PATH_TEXT, PATH_TEXT_PER_BYTE * objects.ByteSize())
        if count:
            self._walk()

    def _walk(self) -> None:
        nodes, parent, slot = self._objects.nodes, self._parent, self._slot
        depth, length = self._depth, self._length
        parent[0] = 0
        queue = array("i", [0])
        for object_id in queue:
            below = depth[object_id] + 1
            for index, child in enumerate(nodes[object_id].children):
                node_id = child.node_id
                if parent[node_id] != -1:
                    continue
                if below > MAX_OBJECT_DEPTH:
                    raise ModelError(f"{self._source}: its objects nest deeper than "
                                     f"{MAX_OBJECT_DEPTH} ({self._chain(object_id)})")
                parent[node_id], slot[node_id], depth[node_id] = object_id, index, below
                length[node_id] = length[object_id] + len(child.local_name) + \
                    (1 if object_id else 0)
                queue.append(node_id)

    def _names(self, object_id: int) -> list[str]:
        """The names along the path to ``object_id``, root first."""
        names = []
        while object_id:
            up = self._parent[object_id]
            names.append(self._objects.nodes[up].children[self._slot[object_id]].local_name)
            object_id = up
        return names[::-1]

    def _chain(self, object_id: int) -> str:
        names = self._names(object_id)
        parts = names if len(names) <= 6 else names[:3] + ["..."] + names[-3:]
        return " -> ".join(shown(n, 40)[1:-1] if len(n) > 38 else n for n in parts)

    def reserve(self, object_ids: Any) -> None:
        """Refuse, before any is made, paths for ``object_ids`` longer in all than the
        budget."""
        total = sum(self._length[i] for i in set(object_ids) if self.reached(i))
        if total > self._budget:
            raise ModelError(f"{self._source}: the object paths of its variables would "
                             f"take {total:,} characters, more than {self._budget:,}")

    def reached(self, object_id: int) -> bool:
        return 0 <= object_id < len(self._parent) and self._parent[object_id] != -1

    def get(self, object_id: int, default: str) -> str:
        if not self.reached(object_id):
            return default
        text = self._text.get(object_id)
        if text is None:
            text = self._text[object_id] = "/".join(self._names(object_id))
        return text
