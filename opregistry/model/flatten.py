"""The flattened graph: a model with every function call inlined.

Calls into library functions (PartitionedCall, StatefulPartitionedCall and other ops
with a function attribute, If/Case branches, While bodies) are inlined, so a path is
followed wherever it goes. Instances (nodes of the flattened graph) are numbered and
their fields kept in parallel lists; a tensor is one int (see ``tensor``).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opregistry.model import function_library as library
from opregistry.model.graph import STATIC_FORMATS, Model, ModelError, Node, shown
from opregistry.model.output_names import check_output_names
from opregistry.model.readers import schema
from opregistry.model.readers.structure import InvalidGraph

if TYPE_CHECKING:
    from opregistry.model.walks import Passing
    from opregistry.registry.facts import OpFacts

MAX_OUTPUTS = 1 << 20  # outputs of one node, and values of one list argument
# instances of the flattened graph (each costs ~350 bytes and ~3 us through the
# analysis: 1,000,000 is ~3 s; real models inline to ~1.2 instances per node)
MIN_BUDGET, BUDGET_PER_NODE = 1_000_000, 20
TOP = -1  # the context of the top-level graph's instances


def flatten(model: Model, facts: dict[str, Any]) -> Flat:
    """The model's top-level graph with every call inlined (the analysis and gradcheck's
    explanation share one when they look at the same model)."""
    flat = Flat(model, facts)
    if model.format in STATIC_FORMATS:  # a file; a graph TF built here is TF's own
        flat.check_input_counts()
        check_output_names(model, facts)
    flat.add_graph(model.nodes, TOP, None, {})
    return flat


IDENTITY_LIKE = ("Identity", "IdentityN")


# ------------------------------------------------------------------------ flattening

# Instances (nodes of the flattened graph) are numbered, and their fields live in
# parallel lists of Flat: a million-node graph then costs no per-node object. A
# tensor is one int, ``output index << OUT | instance``: output 0 of an instance is
# the instance number itself, and ints hash and compare faster than tuples.
OUT = 32
INST = (1 << OUT) - 1  # tensor & INST: its instance


def tensor_id(inst: int, index: int) -> int:
    return index << OUT | inst


class Keys:
    """Instance keys (``call/function/node`` inside inlined bodies), made when asked:
    each instance keeps its name and its context (a call instance and the body it
    runs), so calls nested 200 deep cost no key strings of quadratic length."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.contexts: list[int] = []  # per instance: its context, TOP for the graph
        self._calls: list[tuple[int, str | None]] = []  # context -> (call, body)

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Any:
        return map(self.__getitem__, range(len(self.names)))

    def __getitem__(self, inst: int) -> str:
        parts = [self.names[inst]]
        ctx = self.contexts[inst]
        while ctx != TOP:
            inst, body = self._calls[ctx]
            if body is not None:
                parts.append(body)
            parts.append(self.names[inst])
            ctx = self.contexts[inst]
        return "/".join(reversed(parts))

    def context(self, inst: int, body: str | None) -> int:
        """A context for instances inside ``body`` as called by ``inst`` (None: an
        instance of the call itself, a loop variable)."""
        self._calls.append((inst, body))
        return len(self._calls) - 1

    def caller(self, inst: int) -> int:
        """The call (If, Case, While, PartitionedCall) instance whose body holds
        ``inst`` (a loop variable: its While), TOP for the top-level graph."""
        ctx = self.contexts[inst]
        return TOP if ctx == TOP else self._calls[ctx][0]

    def add(self, names: Any, ctx: int) -> None:
        start = len(self.names)
        self.names.extend(names)
        self.contexts.extend([ctx] * (len(self.names) - start))


class Flat:
    """The model with every function call inlined."""

    def __init__(self, model: Model, facts: Mapping[str, OpFacts]):
        self.model = model
        self.facts = facts
        # per instance: key ("call/function/node" inside inlined bodies), NodeDef, op,
        # function it comes from, input tensors (None: unresolved), output types
        self.keys = Keys()
        self.nodes: list[Node] = []
        self.ops: list[str] = []
        self.functions: list[str | None] = []
        self.inputs: list[list[int | None]] = []
        self.out_types: list[list[int]] = []
        # calls, If/Case/While: instance -> output index -> tensors inside the bodies
        # it forwards
        self.transparent: dict[int, dict[int, list[int]]] = {}
        self.top: dict[str, int] = {}  # top-level node name -> instance
        self.unknown: set[str] = set()
        self.unsaved_custom_gradients: set[str] = set()
        # If/Case instance -> per branch (its function, output index -> its tensor)
        self.branches: dict[int, list[tuple[str, dict[int, int]]]] = {}
        # instances allowed: a library whose calls multiply (f calls g twice, g calls h
        # twice...) is refused before it costs gigabytes
        size = len(model.nodes) + sum(len(f.nodes) for f in model.functions.values())
        self.budget = max(MIN_BUDGET, BUDGET_PER_NODE * size)
        # op -> names of the attrs its output types depend on; (op, values) -> types
        self._type_attrs: dict[str, tuple[str, ...]] = {}
        self._types: dict[tuple[Any, ...], list[int]] = {}
        # the same for ops whose types depend on one attr holding a type (T, dtype...):
        # op -> (attr name, type -> output types), one lookup without building a key
        self._by_type: dict[str, tuple[str, dict[int, list[int]]]] = {}
        # passes_key(node) -> position -> why no gradient passes (None: it passes)
        self.passes_cache: dict[Any, dict[int, Passing | None]] = {}
        # op types with per-output facts that stop some path (walks.per_output_ops)
        self.per_output: frozenset[str] | None = None
        self._variadic: dict[str, tuple[str, ...]] = {}  # op -> its variadic attrs
        self._arity: dict[Any, int | None] = {}  # passes_key -> data inputs expected
        self._defaults: dict[str, dict[str, int]] = {}  # op -> type attr -> default
        self._custom_gradients: dict[tuple[str, int], tuple[set[int] | None, int]] = {}

    def _arg_types(self, node: Node, args: list[dict[str, Any]]) -> list[int]:
        out: list[int] = []
        defaults = None
        for arg in args:
            if arg.get("type_list_attr"):
                name = arg["type_list_attr"]
                out.extend(node.attr[name].list.type if name in node.attr else [])
                continue
            if arg.get("type"):
                dtype = schema.DATA_TYPE_NUMBERS.get(arg["type"], 0)
            elif arg.get("type_attr") and arg["type_attr"] in node.attr:
                dtype = node.attr[arg["type_attr"]].type
            elif arg.get("type_attr"):
                # SavedModels strip attrs left at their default (ArgMax's output_type)
                defaults = defaults if defaults is not None else self._attr_defaults(node.op)
                dtype = defaults.get(arg["type_attr"], 0)
            else:
                dtype = 0
            count = node.attr[arg["number_attr"]].i if arg.get("number_attr") and \
                arg["number_attr"] in node.attr else 1
            if not 0 <= count <= MAX_OUTPUTS:  # Unpack num=1000000000 in 96 bytes
                raise ModelError(f"{self.model.source}: node {shown(node.name)} declares "
                                 f"{count} values for {shown(str(arg.get('name')))}")
            out.extend([dtype] * count)
        return out

    def _attr_defaults(self, op: str) -> dict[str, int]:
        """Type attrs of ``op`` with a default in its OpDef: name -> DataType number."""
        if op not in self._defaults:
            facts = self.facts.get(op)
            attrs = facts.definition.get("attrs", []) if facts else []
            self._defaults[op] = {
                a["name"]: schema.DATA_TYPE_NUMBERS.get(a["default"]["type"], 0) for a in attrs
                if a.get("type") == "type" and isinstance(a.get("default"), dict) and
                isinstance(a["default"].get("type"), str)}
        return self._defaults[op]

    def output_types(self, node: Node) -> list[int]:
        op = node.op
        used = self._type_attrs.get(op)
        if used is None:
            facts = self.facts.get(op)
            args = facts.definition.get("outputs", []) if facts else []
            used = tuple(sorted({a[k] for a in args for k in (
                "type_attr", "number_attr", "type_list_attr") if a.get(k)}))
            self._type_attrs[op] = used if facts else ("?",)
            used = self._type_attrs[op]
        if used == ("?",):
            return self._compute_types(node)
        attrs = node.attr
        key = (op,) + tuple(_attr_key(attrs[a]) if a in attrs else None for a in used)
        types = self._types.get(key)
        if types is None:
            types = self._types[key] = self._compute_types(node)
        if len(used) == 1 and type(key[1]) is int:  # a type attr such as T: fast next time
            self._by_type.setdefault(op, (used[0], {}))[1][key[1]] = types
        return types

    def _compute_types(self, node: Node) -> list[int]:
        facts = self.facts.get(node.op)
        function = self.model.functions.get(node.op) if facts is None else None
        if function is not None:  # a library function called as an op: no unknown op
            return [dtype for _, dtype in function.output_args] or [0]
        if facts is None:
            self.unknown.add(node.op)
            for key in ("Tout", "T", "dtype"):
                if key in node.attr:
                    a = node.attr[key]
                    return list(a.list.type) if len(a.list.type) else [a.type]
            return [0]
        return self._arg_types(node, facts.definition.get("outputs", []))

    def output_index(self, node: Node, out_arg: str, index: int) -> int:
        """Flat output index of ``node:out_arg:index`` (function-body tensor strings)."""
        facts = self.facts.get(node.op)
        if facts is None:
            return index
        flat = 0
        for arg in facts.definition.get("outputs", []):
            if arg["name"] == out_arg:
                return flat + index
            flat += len(self._arg_types(node, [arg]))
        return index

    def add_graph(self, nodes: dict[str, Any], ctx: int, function: str | None,
                  args: dict[str, Any]) -> dict[str, int]:
        """Add the instances of ``nodes`` (in context ``ctx``: TOP, or a call's body from
        ``keys.context``) and inline the calls among them; returns node name ->
        instance."""
        # the hot loop of a million-node scan: C-level bulk operations where possible
        first = len(self.keys)
        local = dict(zip(nodes, range(first, first + len(nodes))))
        if ctx == TOP:
            self.top = local
            library.check_size(self.model, nodes, self.budget)
        self.keys.add(nodes, ctx)
        self.nodes.extend(nodes.values())
        self.functions.extend([function] * len(nodes))
        ops, out_types = self.ops, self.out_types
        output_types, by_type = self.output_types, self._by_type
        for node in nodes.values():
            op = node.op
            ops.append(op)
            fast = by_type.get(op)
            if fast is not None:  # the common case: outputs typed by one attr (T)
                attr = node.attr.get(fast[0])
                types = fast[1].get(attr.type) if attr is not None else None
                out_types.append(types if types is not None else output_types(node))
            else:
                out_types.append(output_types(node))
        # inputs: a plain "name" of this graph is its instance's output 0, looked up
        # in C by map(); anything else (":1", "^control", function arguments) is rare
        get_local, append = local.get, self.inputs.append
        for node in nodes.values():
            refs = list(map(get_local, node.input))
            if None in refs:
                if "" in node.input:
                    raise ModelError(f"{self.model.source}: node {shown(node.name)} has an "
                                     f"empty input name")
                refs = [self._resolve(text, local, args) for text in node.input
                        if not text.startswith("^")]
            append(refs)
        calls = set(ops[first:]) & (library.FUNCTIONAL_OPS | self.model.functions.keys())
        if calls:
            for inst in range(first, first + len(nodes)):
                if ops[inst] in calls:
                    self._inline(inst)
        return local

    def _resolve(self, text: str, local: dict[str, int], args: dict[str, Any]) -> Any:
        """The tensor ``text`` names (``node``, ``node:1``, ``node:out_arg:0`` in
        function bodies); None for what the graph does not hold. A name that is not a
        tensor name is a ModelError, never an IndexError or ValueError."""
        parts = text.split(":")
        inst = local.get(parts[0])
        if inst is None:
            return args.get(parts[0])
        if len(parts) == 1:
            return inst
        try:
            if len(parts) == 2:
                index = int(parts[1])
            elif len(parts) == 3:
                index = self.output_index(self.nodes[inst], parts[1], int(parts[2]))
            else:
                raise ValueError(text)
        except ValueError:
            raise ModelError(f"{self.model.source}: {shown(text)} is not a tensor name") from None
        if not 0 <= index < MAX_OUTPUTS:
            raise ModelError(f"{self.model.source}: {shown(text)} names output {index}, "
                             f"outside 0..{MAX_OUTPUTS - 1}")
        return tensor_id(inst, index)

    def _inline(self, inst: int) -> None:
        node = self.nodes[inst]
        bodies = library.bodies(self.model, node)
        if not bodies:  # (recursion and size were refused by check_size up front)
            return
        skip = 1 if node.op in ("If", "StatelessIf", "Case", "StatelessCase") else 0
        call_inputs = self.inputs[inst][skip:]
        transparent = self.transparent[inst] = defaultdict(list)
        loop = node.op in ("While", "StatelessWhile")
        if loop:
            # a loop variable holds the loop input on the first iteration and the body's
            # output after that: one instance per variable, forwarding both (the back
            # edge makes dependencies over several iterations visible)
            carried = [self._loop_variable(inst, i) for i in range(len(call_inputs))]
            call_inputs = list(carried)
        for body_name in bodies:
            body = self.model.functions[body_name]
            ctx = self.keys.context(inst, body_name)
            args = {arg: ref for (arg, _), ref in zip(body.input_args, call_inputs)}
            local = self.add_graph(body.nodes, ctx, body_name, args)
            returned: dict[int, int] = {}
            if skip:
                self.branches.setdefault(inst, []).append((body_name, returned))
            for index, (out_arg, _) in enumerate(body.output_args):
                ref = self._resolve(body.ret.get(out_arg, ""), local, args)
                if ref is not None:
                    returned[index] = ref
                    transparent[index].append(ref)
                    if loop and index < len(carried):
                        self.transparent[carried[index]][0].append(ref)

    def _loop_variable(self, inst: int, index: int) -> int:
        """A synthetic instance for loop variable ``index`` of While ``inst``,
        forwarding the loop input (its other source, the body output, is added once
        the body is flattened)."""
        number = len(self.keys)
        self.keys.add([f"loop_var_{index}"], self.keys.context(inst, None))
        self.nodes.append(self.nodes[inst])
        self.ops.append(self.ops[inst])
        self.functions.append(self.functions[inst])
        self.inputs.append([])
        types = self.out_types[inst]
        self.out_types.append([types[index]] if index < len(types) else [0])
        source = self.inputs[inst][index] if index < len(self.inputs[inst]) else None
        self.transparent[number] = {0: [source] if source is not None else []}
        return number

    def custom_gradient_inputs(self, function: str, node: Node
                               ) -> tuple[set[int] | None, int]:
        """``library.custom_gradient_inputs``, once per (function, input count)."""
        key = (function, sum(1 for text in node.input if not text.startswith("^")))
        if key not in self._custom_gradients:
            self._custom_gradients[key] = library.custom_gradient_inputs(
                self.model, function, key[1])
        return self._custom_gradients[key]

    def passes_key(self, node: Node) -> Any:
        """The key under which whether ``node`` passes a gradient per input position
        is cached: the op, plus the lengths of its variadic inputs (ConcatV2's N)."""
        op = node.op
        attrs = self._variadic.get(op)
        if attrs is None:
            facts = self.facts.get(op)
            args = facts.definition.get("inputs", []) if facts else []
            attrs = self._variadic[op] = tuple(
                a.get("number_attr") or a.get("type_list_attr") for a in args
                if a.get("number_attr") or a.get("type_list_attr"))
        if not attrs:
            return op
        return (op,) + tuple(_attr_key(node.attr[a]) if a in node.attr else None
                             for a in attrs)

    def check_input_counts(self) -> None:
        """Every node of the graph and of every function (called or not: TF checks the
        whole library) has the data inputs its OpDef takes, as TF's import requires;
        ops the database does not know are not judged. Control inputs come last (the
        reader checked), so the data inputs are those before the first one."""
        arity, expected_inputs = self._arity, self.expected_inputs
        bodies = [self.model.nodes.values()] + [f.nodes.values()
                                                for f in self.model.functions.values()]
        for nodes in bodies:
            for node in nodes:
                inputs = node.input
                count = len(inputs)
                if count and inputs[-1][:1] == "^":
                    count = next(i for i, text in enumerate(inputs) if text[:1] == "^")
                # (the common op without variadic inputs: its count from one lookup)
                expected = arity[node.op] if node.op in arity else expected_inputs(node)
                if expected is not None and expected != count:
                    raise InvalidGraph(f"{self.model.source}: node {shown(node.name)} has "
                                       f"{count} data input{'' if count == 1 else 's'}, but "
                                       f"its op {shown(node.op)} takes {expected} "
                                       f"(TensorFlow refuses it)")

    def expected_inputs(self, node: Node) -> int | None:
        """How many data inputs the OpDef gives ``node`` (None: an op the database does
        not know, or a count attr that is missing without a default: not judged here).
        Cached by op for ops without variadic inputs (in ``_arity``), else by
        ``passes_key``."""
        key = self.passes_key(node)
        if key in self._arity:
            return self._arity[key]
        facts = self.facts.get(node.op)
        count: int | None = None
        if facts is not None:
            defaults = {a["name"]: a["default"] for a in facts.definition.get("attrs", [])
                        if isinstance(a.get("default"), dict)}
            count = 0
            for arg in facts.definition.get("inputs", []):
                attr = arg.get("number_attr") or arg.get("type_list_attr")
                if not attr:
                    count += 1
                elif attr in node.attr:
                    value = node.attr[attr]
                    number = bool(arg.get("number_attr"))
                    if value.HasField("list") == number or value.type:  # the wrong kind
                        count = None
                        break
                    count += value.i if number else len(value.list.type)
                elif attr in defaults:  # SavedModels strip attrs left at their default
                    default = defaults[attr]
                    count += int(default.get("i", 0)) if arg.get("number_attr") else \
                        len(default.get("list", {}).get("type", []))
                else:
                    count = None
                    break
        self._arity[key] = count
        return count

    def input_arg_names(self, node: Node) -> list[str] | None:
        """The OpDef argument name of each input position (None: op not known)."""
        facts = self.facts.get(node.op)
        if facts is None:
            return None
        names: list[str] = []
        for arg in facts.definition.get("inputs", []):
            if arg.get("number_attr") or arg.get("type_list_attr"):
                names.extend([arg["name"]] * len(self._arg_types(node, [arg])))
            else:
                names.append(arg["name"])
        return names

    def carries_gradient(self, t: int) -> bool:
        """Whether tensor ``t`` can carry a gradient (by its type)."""
        types = self.out_types[t & INST]
        index = t >> OUT
        return (types[index] if index < len(types) else (types[0] if types else 0)) \
            in schema.GRADIENT_CARRIERS


def _attr_key(value: Any) -> Any:
    """A hashable summary of a type, number or type-list attr."""
    dtype = value.type
    if dtype:
        return dtype
    if len(value.list.type):
        return tuple(value.list.type)
    return (0, value.i)



