"""The one in-memory graph representation every reader produces."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opregistry.errors import OpregistryError

if TYPE_CHECKING:
    from opregistry.model.readers.versions import ServingVersion

# the formats read from files (static readers): checked as TF's import checks them, and
# holding no Python (a py_function's callback is not in them); "traced" and the guard's
# graphs are TF's own, built here
STATIC_FORMATS = frozenset({"savedmodel", "graphdef", "pbtxt"})


class ModelError(OpregistryError):
    """A file that is not a readable model (corrupt, truncated, or another format), or a
    request it cannot answer (an output it does not have)."""


def shown(name: str, limit: int = 80) -> str:
    """``repr(name)`` with its middle cut when long: an error naming a 5,000-character
    name from a hostile file stays one readable line."""
    text = repr(name)
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-(limit // 2):]}"


class Node:
    """One node, with the field names of TF's NodeDef: the static readers store the
    parsed NodeDef messages themselves (graphs can have millions of nodes, and wrapping
    each one costs more than parsing it); this class builds one by hand."""

    __slots__ = ("name", "op", "input", "attr", "device")

    def __init__(self, name: str, op: str, input: list[str], attr: Any, device: str = ""):
        self.name = name
        self.op = op
        self.input = input  # TF's tensor strings: "n", "n:1", "n:out:0", "^control"
        self.attr = attr  # attr name -> AttrValue message
        self.device = device

    def __repr__(self) -> str:
        return f"Node({self.name!r}, {self.op!r})"


@dataclass
class Function:
    """A function of the library: its signature and its body."""

    name: str
    input_args: list[tuple[str, int]]  # (arg name, DataType number; 0 = from an attr)
    output_args: list[tuple[str, int]]
    ret: dict[str, str]  # output arg -> tensor string inside the body
    nodes: dict[str, Any]  # name -> NodeDef (or Node)
    arg_types: dict[str, str] = field(default_factory=dict)  # arg -> type attr name


@dataclass
class Signature:
    key: str
    inputs: dict[str, tuple[str, int]]  # input key -> (tensor name, dtype)
    outputs: dict[str, tuple[str, int]]
    # composite inputs and outputs (SparseTensor, RaggedTensor: not in ``inputs`` or
    # ``outputs``): key -> the (tensor name, dtype) of each component tensor
    composite_inputs: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    composite_outputs: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    def input_tensors(self) -> list[tuple[str, list[tuple[str, int]]]]:
        """(key, its component tensors) of every input, plain ones as one component."""
        return sorted([(k, [v]) for k, v in self.inputs.items()] +
                      list(self.composite_inputs.items()))

    def output_tensors(self) -> list[tuple[str, list[tuple[str, int]]]]:
        return sorted([(k, [v]) for k, v in self.outputs.items()] +
                      list(self.composite_outputs.items()))


@dataclass
class Model:
    """A model as the static analysis sees it."""

    source: str
    format: str  # savedmodel | graphdef | pbtxt
    nodes: dict[str, Any]  # the top-level graph: name -> NodeDef (or Node)
    functions: dict[str, Function]
    signatures: dict[str, Signature]
    variables: dict[str, str]  # VarHandleOp node name -> variable name as saved
    gradient_bindings: dict[str, str]  # custom gradient op type -> saved gradient function
    # gradient function -> the IdentityN input each of its outputs is the gradient of,
    # where its saved structure says (TF drops the None gradients from the outputs)
    gradient_positions: dict[str, list[int]] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    tf_version: str | None = None
    # names of trainable variables; None when the format does not say (GraphDef)
    trainable: set[str] | None = None
    # target name -> the variable's object path in a SavedModel ("" where none)
    variable_paths: dict[str, str] = field(default_factory=dict)
    # object paths of trainable variables that no function of the model uses
    unused_variables: list[str] = field(default_factory=list)
    # traced models: top-level node -> "file:line" of the user's code that created it
    sites: dict[str, str] = field(default_factory=dict)

    known_op_types: set[str] | None = field(default=None, repr=False)  # set by readers
    # a TF Serving model base path: the version the reader chose (None: read as named)
    serving_version: ServingVersion | None = field(default=None, repr=False)

    @property
    def op_types(self) -> set[str]:
        if self.known_op_types is not None:
            return self.known_op_types
        types = {n.op for n in self.nodes.values()}
        for function in self.functions.values():
            types.update(n.op for n in function.nodes.values())
        return types
