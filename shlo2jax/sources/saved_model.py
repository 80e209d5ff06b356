"""TensorFlow SavedModels whose computation is jax2tf's native serialization: `XlaCallModule`
ops (each one's `module` attribute: the StableHLO program jax exported) with a few TensorFlow
ops around them, read without TensorFlow.

The folder holds `saved_model.pb` (a `SavedModel`: meta graphs, each a `GraphDef` with its
function library, the signatures, and the object graph) and `variables/` (a tensor bundle:
`sources.tensor_bundle`). The folder is claimed by its `saved_model.pb`.

`read` follows the signature `signature=` names (default `serving_default`; an unknown one is a
`LoadError` listing those there are) from its outputs back to its inputs through the graph and
the functions it calls, and keeps what each value is: a signature input, a variable (the
object graph's `bound_inputs` of the function that captures it), a variable's value, a
constant, or a result of an `XlaCallModule`. Only the ops jax2tf writes around the modules
are followed (`_RULES`); any other on that path is refused at load, naming the op and the
node, where the graph holds an `XlaCallModule`. A signature TensorFlow computes itself (no
`XlaCallModule` anywhere: Keras 3 on the TensorFlow backend, a tf.function of TensorFlow ops)
is read through TensorFlow's XLA bridge instead (`sources.tf_graph`, the `[tf]` extra): its
HLO takes the signature's inputs and then the variables the signature's function captures
(bound as below); without TensorFlow it is a `LoadError` naming the extra. The module parsed is the program, or, where the signature runs several
`XlaCallModule`s (jax2tf functions composed in one tf.function), the modules chained into one
(`sources.module_chain`: a new @main calls each module's in order, passing results on); its
function takes the signature's inputs by their TensorFlow names
(in sorted order, as keywords or positionally) with the variables bound as weights under their
object paths (`params/w1`: `params`, `with_params`, `shlo2jax.lift_params`), and returns the
signature's outputs as a dict by their names (`conventions.bound`). Weights given to the
converted function as arrays are `Const` ops: bound as constants (`constants/<node>`). A
module lowered for several platforms (`native_serialization_platforms`) takes a leading
platform index, which the XlaCallModule op passes itself: it is bound too, as the constant
`platform_index`.

What is refused, each a `LoadError`: a signature not there, an op outside `_RULES` on the
signature's path of a graph with an `XlaCallModule`, a module that calls back into
TensorFlow (`function_list`), threads a token (`has_token_input_output`) or takes dimension
arguments (`dim_args_spec`, versions before 5); a truncated or corrupt file (named).
"""

from __future__ import annotations

import collections
import itertools
import math
import os
from typing import NamedTuple, Optional

import jax
import numpy as np
from jaxlib.mlir import ir

from shlo2jax import value_types as T
from shlo2jax.compat import make_ir_context
from shlo2jax.conventions.bound import Binding, BoundConvention, BoundValue
from shlo2jax.errors import LoadError
from shlo2jax.sources import hlo, module_chain, tensor_bundle, tf_graph
from shlo2jax.sources.mlir import parse_mlir
from shlo2jax.sources.protowire import Message

SOURCE = "SavedModel"
DEFAULT_SIGNATURE = "serving_default"
_VARIABLES = os.path.join("variables", "variables")
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_MAX_CALL_DEPTH = 64


def claims(path: str) -> bool:
    """Whether `path` is a SavedModel folder: it holds `saved_model.pb`."""
    return os.path.isfile(os.path.join(path, "saved_model.pb"))


# ----------------------------------------------------------------------- the graph

class _Node(NamedTuple):
    """A `NodeDef` (1 name, 2 op, 3 input, 5 attr): its data inputs (control inputs `^x`
    dropped) and its attributes (name -> `AttrValue`)."""
    name: str
    op: str
    inputs: tuple
    attrs: dict


class _Function(NamedTuple):
    """A `FunctionDef` (1 signature: an `OpDef` with 1 name, 2 input_arg, 3 output_arg, each
    `ArgDef` 1 name; 3 node_def; 4 ret: output name -> tensor)."""
    name: str
    args: tuple
    outputs: tuple
    nodes: dict
    ret: dict


class _Unfollowed(LoadError):
    """An op outside `_RULES` on the signature's path; `op` names it and its node."""

    def __init__(self, message: str, op: str):
        super().__init__(message)
        self.op = op


class _Value(NamedTuple):
    """What a tensor of the graph is: `kind` "input" (the signature input `key`), "variable"
    (a resource: object `key`), "read" (object `key`'s value), "constant" (a `Const`'s value,
    `_Walk.constants[key]`), "result" (`key`: (call, result) of `_Walk.calls`) or "platform"
    (the platform index call `key`'s module takes first)."""
    kind: str
    key: object


def _nodes(messages, where: str) -> dict:
    nodes = {}
    for message in messages:
        attrs = {k: Message(v, f"{where}: attribute {k!r}") for k, v in message.map(5).items()}
        inputs = tuple(i for i in message.strs(3) if not i.startswith("^"))
        nodes[message.str(1)] = _Node(message.str(1), message.str(2), inputs, attrs)
    return nodes


def _function_name(message: Message, what: str) -> str:
    return message.message(1, f"{what}: a function signature").str(1)


def _function(message: Message, what: str) -> _Function:
    signature = message.message(1, f"{what}: a function signature")
    name = signature.str(1)
    where = f"{what}: function {name}"
    return _Function(name, tuple(a.str(1) for a in signature.messages(2, where)),
                     tuple(a.str(1) for a in signature.messages(3, where)),
                     _nodes(message.messages(3, where), where),
                     {k: str(v, "utf-8", "replace") for k, v in message.map(4, where).items()})


class _Scope(NamedTuple):
    """Where a tensor name is looked up: the top-level graph (`function` None) or one call of
    a function, its arguments' values by name; `serial` tells calls apart (memo keys)."""
    function: Optional[_Function]
    args: dict
    depth: int
    serial: int

    @property
    def where(self) -> str:
        return f"function {self.function.name}" if self.function else "the graph"


class _Walk:
    """The values of a signature's outputs, followed back through the graph (`value`); the
    `XlaCallModule`s on the way are `self.calls` (each node and its inputs' values, a call
    after those whose results it takes).
    `functions`: the library's functions by name, each read when first called (the gradient
    functions beside them never are)."""

    def __init__(self, graph: dict, functions: dict, bound_inputs: dict, placeholders: dict,
                 what: str):
        self.graph, self.bound_inputs = graph, bound_inputs
        self._functions = functions
        self._read: dict = {}  # the functions read so far, by name
        self.placeholders, self.what = placeholders, what
        self.calls: list = []
        self.constants: dict = {}  # a name for each Const followed -> BoundValue
        self._memo: dict = {}
        self._serials = itertools.count(1)

    def value(self, scope: _Scope, ref: str) -> _Value:
        """The value of the tensor `ref` (`node:i` at the top level, `node:output:i` or an
        argument's name in a function)."""
        if scope.function is not None and ref in scope.args:
            return scope.args[ref]
        parts = ref.split(":")
        name, index = parts[0], parts[-1] if len(parts) > 1 else "0"
        nodes = scope.function.nodes if scope.function else self.graph
        node = nodes.get(name)
        if node is None or not index.isdigit():
            raise LoadError(f"{self.what}: {scope.where} names tensor {ref!r}, which no node "
                            "makes")
        outputs = self._outputs(scope, node)
        if int(index) >= len(outputs):
            raise LoadError(f"{self.what}: {scope.where} reads output {index} of node "
                            f"{name!r} ({node.op}), which has {len(outputs)}")
        return outputs[int(index)]

    def inputs(self, scope: _Scope, node: _Node) -> list:
        return [self.value(scope, ref) for ref in node.inputs]

    def _outputs(self, scope: _Scope, node: _Node) -> list:
        key = (scope.serial, node.name)
        if key in self._memo:
            if self._memo[key] is None:
                raise LoadError(f"{self.what}: node {node.name!r} in {scope.where} depends "
                                "on itself")
            return self._memo[key]
        rule = _RULES.get(node.op)
        if rule is None:
            raise _Unfollowed(f"{self.what}: op {node.op} (node {node.name!r} in "
                              f"{scope.where}) is not one shlo2jax follows around an "
                              f"XlaCallModule; it follows {', '.join(sorted(_RULES))}",
                              f"op {node.op} (node {node.name!r} in {scope.where})")
        self._memo[key] = None
        self._memo[key] = outputs = rule(self, scope, node)
        return outputs

    def holds_xla_call_module(self) -> bool:
        """Whether any node of the graph or of a library function is an XlaCallModule."""
        return any(n.op == "XlaCallModule" for n in self.graph.values()) or any(
            node.str(2) == "XlaCallModule" for message in self._functions.values()
            for node in message.messages(3))

    def _function(self, scope: _Scope, node: _Node, name: str) -> _Function:
        if name not in self._read:
            message = self._functions.get(name)
            if message is None:
                raise LoadError(f"{self.what}: node {node.name!r} in {scope.where} calls "
                                f"function {name!r}, which the library does not hold")
            self._read[name] = _function(message, self.what)
        return self._read[name]

    def enter(self, scope: _Scope, node: _Node, name: str, args: list) -> list:
        """The outputs of a call of function `name` with `args` (values)."""
        function = self._function(scope, node, name)
        if scope.depth >= _MAX_CALL_DEPTH:
            raise LoadError(f"{self.what}: calls nested deeper than {_MAX_CALL_DEPTH} at node "
                            f"{node.name!r} (a recursive function?)")
        if len(args) != len(function.args):
            raise LoadError(f"{self.what}: node {node.name!r} passes {len(args)} arguments to "
                            f"{name}, which takes {len(function.args)}")
        inner = _Scope(function, dict(zip(function.args, args)), scope.depth + 1,
                       next(self._serials))
        outputs = []
        for output in function.outputs:
            if output not in function.ret:
                raise LoadError(f"{self.what}: function {name} returns no tensor for its "
                                f"output {output!r}")
            outputs.append(self.value(inner, function.ret[output]))
        return outputs


def _identity(walk, scope, node):
    return walk.inputs(scope, node)[:1]


def _identity_n(walk, scope, node):
    return walk.inputs(scope, node)


def _no_op(walk, scope, node):
    return []


def _const(walk, scope, node):
    """A `Const` (closed-over weights jax2tf was given as arrays): bound as a constant named
    by its node (`constants/Const_1`, or `constants/<function>/Const_1` inside a function)."""
    where = f"{walk.what}: Const {node.name!r} in {scope.where}"
    value = tensor_value(_attr(node, "value", walk.what).message(8, f"{where}: its tensor"), where)
    name = f"constants/{node.name}" if scope.function is None else \
        f"constants/{scope.function.name}/{node.name}"
    while name in walk.constants:  # (one function's Const in two calls of it)
        name += "'"
    walk.constants[name] = BoundValue(value, where)
    return [_Value("constant", name)]


def _placeholder(walk, scope, node):
    name = walk.placeholders.get(node.name) if scope.function is None else None
    if name is None:
        raise LoadError(f"{walk.what}: Placeholder {node.name!r} is not an input of the "
                        "signature")
    return [_Value("input", name)]


def _read_variable(walk, scope, node):
    inputs = walk.inputs(scope, node)
    resource = inputs[0] if inputs else None
    if resource is None or resource.kind != "variable":
        raise LoadError(f"{walk.what}: ReadVariableOp {node.name!r} in {scope.where} reads "
                        "no variable the object graph binds")
    return [_Value("read", resource.key)]


def _partitioned_call(walk, scope, node):
    name = _attr(node, "f", walk.what).message(10).str(1)
    bound = walk.bound_inputs.get(name) if scope.function is None else None
    if bound is None:
        return walk.enter(scope, node, name, walk.inputs(scope, node))
    # A top-level call of a saved function: its last arguments are the captures the object
    # graph binds (`bound_inputs`); the graph's own VarHandleOps are TF1's way to them.
    free = len(node.inputs) - len(bound)
    if free < 0:
        raise LoadError(f"{walk.what}: node {node.name!r} passes {len(node.inputs)} "
                        f"arguments to {name}, which captures {len(bound)}")
    args = [walk.value(scope, ref) for ref in node.inputs[:free]]
    return walk.enter(scope, node, name, args + [_Value("variable", i) for i in bound])


def _xla_call_module(walk, scope, node):
    inputs = walk.inputs(scope, node)  # (first: the calls whose results it takes come first)
    walk.calls.append((node, inputs))
    count = len(_attr(node, "Tout", walk.what).message(1).ints(6))
    return [_Value("result", (len(walk.calls) - 1, i)) for i in range(count)]


# The TensorFlow ops followed from a signature's outputs to its inputs: op -> rule(walk,
# scope, node) -> the node's output values.
_RULES = {
    "Identity": _identity,
    "IdentityN": _identity_n,
    "Const": _const,
    # jax2tf's `with_gradient=False` wraps the results: TensorFlow then refuses gradients;
    # here they are the module's, as for every other program.
    "PreventGradient": _identity,
    "NoOp": _no_op,
    "Placeholder": _placeholder,
    "ReadVariableOp": _read_variable,
    "StatefulPartitionedCall": _partitioned_call,
    "PartitionedCall": _partitioned_call,
    "XlaCallModule": _xla_call_module,
}


def _attr(node: _Node, name: str, what: str) -> Message:
    attr = node.attrs.get(name)
    if attr is None:
        raise LoadError(f"{what}: node {node.name!r} ({node.op}) has no attribute {name!r}")
    return attr


# ----------------------------------------------------------------------- reading

class _Signature(NamedTuple):
    """A `SignatureDef` (1 inputs, 2 outputs: name -> `TensorInfo` {1 name, 2 dtype,
    3 tensor_shape})."""
    inputs: dict
    outputs: dict


def read(path: str, signature: Optional[str] = None, source_name: str = "") -> tuple:
    """(the program: the module of the signature's `XlaCallModule`, or of several chained;
    `source_name`; its calling convention as `{"main": factory}`), a `sources.Source`'s fields
    (see the module docstring)."""
    signature = signature or DEFAULT_SIGNATURE
    pb = os.path.join(path, "saved_model.pb")
    meta_graph = _meta_graph(Message(tensor_bundle.read_file(pb), pb), pb)
    sig = _signature(meta_graph, signature, path, pb)
    what = f"{path} (signature {signature!r})"
    walk = _walk(meta_graph, sig, pb, what)
    try:
        outputs = {name: walk.value(_Scope(None, {}, 0, 0), info.str(1))
                   for name, info in sig.outputs.items()}
    except RecursionError:  # (a chain of ops longer than Python's stack: no graph jax2tf writes)
        raise LoadError(f"{what}: the graph's chains of ops are too long to follow") from None
    except _Unfollowed as unfollowed:
        if walk.holds_xla_call_module():
            raise
        return _tensorflow_graph(path, signature, source_name, sig, walk, what,
                                 f"{unfollowed.op} is TensorFlow's own")
    if not walk.calls:
        return _tensorflow_graph(path, signature, source_name, sig, walk, what,
                                 "the signature runs no XlaCallModule")
    for out_name, value in outputs.items():
        if value.kind != "result":
            raise LoadError(f"{what}: output {out_name!r} is a {value.kind} value, not a "
                            "result of an XlaCallModule")
    module, module_args, results = _program(walk.calls, outputs, what)
    variables = _variables(path, [v.key for v in module_args if v.kind == "read"], what)
    constants = {v.key: walk.constants[v.key] for v in module_args if v.kind == "constant"}
    platforms = [_platforms(node) for node, _ in walk.calls]
    convention = _convention(signature, sig, module_args, results, variables, constants,
                             platforms, what)
    return module, source_name, {"main": convention}


def _tensorflow_graph(path: str, signature: str, source_name: str, sig: _Signature,
                      walk: _Walk, what: str, why: str) -> tuple:
    """`read` of a signature TensorFlow computes itself (no XlaCallModule): its HLO from
    TensorFlow's XLA bridge (`sources.tf_graph`), whose parameters are the signature's
    inputs (sorted by name) then the variables the signature's function captures, bound
    under their object paths; its results the signature's outputs, sorted by name."""
    input_names = sorted(sig.inputs)
    captured = _captured_objects(walk, sig, what)
    data, order = tf_graph.hlo_of_signature(path, signature, input_names, len(captured),
                                            what, why)
    module = hlo.read(data, source_name)
    objects = [captured[i] for i in order]
    module_args = [_Value("input", n) for n in input_names] + \
        [_Value("read", i) for i in objects]
    parameters = len(module_chain.main_of(module, what).regions[0].blocks[0].arguments)
    if parameters != len(module_args):
        raise LoadError(f"{what}: TensorFlow's XLA bridge wrote {parameters} "
                        f"parameters for {len(input_names)} inputs and {len(objects)} "
                        "variables")
    results = {n: i for i, n in enumerate(sorted(sig.outputs))}
    variables = _variables(path, objects, what)
    convention = _convention(signature, sig, module_args, results, variables, {}, [], what)
    return module, source_name, {"main": convention}


def _captured_objects(walk: _Walk, sig: _Signature, what: str) -> list:
    """The object ids of the variables the signature's function captures, in its order
    (the object graph's `bound_inputs` of the function the signature's outputs come from)."""
    called = set()
    for info in sig.outputs.values():
        node = walk.graph.get(_node_name(info.str(1)))
        if node is not None and node.op in ("StatefulPartitionedCall", "PartitionedCall"):
            called.add(_attr(node, "f", walk.what).message(10).str(1))
    if len(called) > 1:
        raise LoadError(f"{what}: the signature's outputs come from {len(called)} functions "
                        f"({', '.join(sorted(called))}); one is read")
    return list(walk.bound_inputs.get(called.pop(), ())) if called else []


def _program(calls: list, outputs: dict, what: str) -> tuple:
    """(the module, the values its @main takes, the signature's outputs by name -> the
    @main result each is): one call's module as it is, several chained into one
    (`module_chain`), each value they take once."""
    context = make_ir_context()
    modules = [_module(node, what, context) for node, _ in calls]
    operands = [([_Value("platform", k)] if _takes_platform_index(modules[k], node, what)
                 else []) + list(inputs) for k, (node, inputs) in enumerate(calls)]
    if len(calls) == 1:
        return modules[0], operands[0], {n: v.key[1] for n, v in sorted(outputs.items())}
    taken = list(dict.fromkeys(v for args in operands for v in args if v.kind != "result"))
    where = {v: i for i, v in enumerate(taken)}

    def ref(value):
        return module_chain.Ref(*value.key) if value.kind == "result" else \
            module_chain.Ref(None, where[value])
    names = sorted(outputs)
    module = module_chain.chain(modules, [[ref(v) for v in args] for args in operands],
                                [ref(outputs[n]) for n in names], what)
    return module, taken, {n: i for i, n in enumerate(names)}


def _signature(meta_graph: Message, name: str, path: str, pb: str) -> _Signature:
    """The signature `name` of the meta graph (field 5; TensorFlow's own `__saved_model_*`
    entries are not signatures a caller runs)."""
    signatures = {k: v for k, v in meta_graph.map(5, f"{pb}: a signature").items()
                  if not k.startswith("__saved_model")}
    if name not in signatures:
        raise LoadError(f"{path}: no signature {name!r} in the {SOURCE}; its signatures: "
                        f"{', '.join(sorted(signatures)) or 'none'}")
    what = f"{path} (signature {name!r})"
    signature = Message(signatures[name], what)
    return _Signature(*({k: Message(v, f"{what}: tensor {k!r}")
                         for k, v in signature.map(n, what).items()} for n in (1, 2)))


def _walk(meta_graph: Message, sig: _Signature, pb: str, what: str) -> _Walk:
    """A walk over the meta graph's graph (2: GraphDef { 1 node, 2 library { 1 function } })
    and its object graph's `bound_inputs` (7: SavedObjectGraph { 2 concrete_functions:
    name -> SavedConcreteFunction { 2 bound_inputs } }), the signature's inputs its
    Placeholders."""
    graph_def = meta_graph.message(2, f"{pb}: the graph")
    library = graph_def.message(2, f"{pb}: the function library")
    functions = {_function_name(m, pb): m for m in library.messages(1)}
    objects = meta_graph.message(7, f"{pb}: the object graph")
    bound_inputs = {name: Message(v, f"{pb}: function {name}").ints(2)
                    for name, v in objects.map(2, f"{pb}: a concrete function").items()}
    placeholders = {_node_name(info.str(1)): name for name, info in sig.inputs.items()}
    return _Walk(_nodes(graph_def.messages(1, f"{pb}: a node"), pb), functions, bound_inputs,
                 placeholders, what)


def _node_name(tensor: str) -> str:
    return tensor.split(":")[0]


def _meta_graph(saved_model: Message, pb: str) -> Message:
    """The meta graph tagged `serve` (MetaGraphDef 1 meta_info_def { 4 tags }), or the only
    one."""
    graphs = saved_model.messages(2, f"{pb}: a meta graph")
    if not graphs:
        raise LoadError(f"{pb}: no meta graph (an empty or corrupt saved_model.pb)")
    for graph in graphs:
        if "serve" in graph.message(1, f"{pb}: meta graph info").strs(4):
            return graph
    if len(graphs) == 1:
        return graphs[0]
    raise LoadError(f"{pb}: {len(graphs)} meta graphs and none tagged 'serve'")


def _platforms(node: _Node) -> list:
    """The platforms the `XlaCallModule`'s module was lowered for (`CPU`, `CUDA`, ...)."""
    attr = node.attrs.get("platforms")
    return attr.message(1).strs(2) if attr is not None else []


def _module(node: _Node, what: str, context):
    """The `XlaCallModule`'s program, parsed, after its attributes said it is one shlo2jax
    runs as it is."""
    at = f"{what}: XlaCallModule {node.name!r}"
    attrs = node.attrs
    version = _attr(node, "version", what).int(3)
    if "function_list" in attrs and attrs["function_list"].message(1).messages(9):
        raise LoadError(f"{at} calls back into TensorFlow functions (function_list), which "
                        "shlo2jax cannot run")
    if "has_token_input_output" in attrs and attrs["has_token_input_output"].bool(5):
        raise LoadError(f"{at} threads a token (has_token_input_output), which shlo2jax does "
                        "not read")
    if "dim_args_spec" in attrs and attrs["dim_args_spec"].message(1).strs(2):
        raise LoadError(f"{at} is version {version} with dimension arguments "
                        "(dim_args_spec), which shlo2jax does not read")
    data = _attr(node, "module", what).bytes(2)
    try:
        return parse_mlir(data, context, at)
    except LoadError as e:
        raise LoadError(f"{at}: its module ({len(data)} bytes, version {version}) is "
                        f"truncated or corrupt: {e}") from None


def _variables(path: str, objects: list, what: str) -> dict:
    """Object id -> (its name: the object path, BoundValue) for each variable read."""
    if not objects:
        return {}
    prefix = os.path.join(path, _VARIABLES)
    if not tensor_bundle.exists(prefix):
        raise LoadError(f"{what}: the module reads variables, and there is no "
                        f"{prefix}.index")
    bundle = tensor_bundle.Bundle(prefix)
    graph = Message(bundle.read_string(_OBJECT_GRAPH_KEY),
                    f"{bundle.index_path}: the object graph")
    nodes = graph.messages(1, f"{bundle.index_path}: an object")
    paths = _object_paths(nodes)
    out = {}
    for i in dict.fromkeys(objects):
        if not 0 <= i < len(nodes):
            raise LoadError(f"{what}: variable object {i} is not in the checkpoint's object "
                            f"graph ({len(nodes)} objects)")
        keys = [a.str(3) for a in nodes[i].messages(2) if a.str(1) == "VARIABLE_VALUE"]
        if not keys:
            raise LoadError(f"{what}: object {i} ({paths.get(i, '?')}) holds no variable value "
                            "in the checkpoint")
        name = paths.get(i, keys[0])
        out[i] = (name, BoundValue(bundle.read(keys[0]), f"{bundle.index_path}: {keys[0]}"))
    return out


def _object_paths(nodes: list) -> dict:
    """Object id -> its path from the root by local names (breadth first: the shortest)."""
    paths, queue = {0: ""}, collections.deque([0])
    while queue:
        parent = queue.popleft()
        for child in nodes[parent].messages(1):
            node_id, name = child.int(1), child.str(2)
            if node_id not in paths and 0 <= node_id < len(nodes):
                paths[node_id] = f"{paths[parent]}/{name}" if paths[parent] else name
                queue.append(node_id)
    return paths


# TensorProto's typed value fields by dtype (tensor.proto): the field and its wire form.
_TYPED_VALUES = {1: (5, "f"), 2: (6, "d"), 3: (7, "varint"), 4: (7, "varint"), 5: (7, "varint"),
                 6: (7, "varint"), 9: (10, "varint"), 10: (11, "varint"), 17: (16, "varint"),
                 19: (13, "half"), 14: (13, "half"), 22: (16, "varint"), 23: (17, "varint")}


def tensor_value(proto: Message, what: str) -> np.ndarray:
    """A `TensorProto` (1 dtype, 2 tensor_shape, 4 tensor_content, or the dtype's repeated
    field: fewer values than elements repeat the last one, none are zeros) as an array."""
    dtype = tensor_bundle.np_dtype(proto.int(1), what)
    shape = tensor_bundle.shape_of(proto.message(2, f"{what} shape"))
    if shape is None or any(d < 0 for d in shape):
        raise LoadError(f"{what}: a constant of unknown shape {shape}")
    count = math.prod(shape)
    if proto.has(4):
        content = proto.bytes(4)
        if len(content) != count * dtype.itemsize:
            raise LoadError(f"{what}: {len(content)} bytes for {dtype}{list(shape)}")
        return np.frombuffer(content, dtype).reshape(shape).copy()
    field, form = _TYPED_VALUES.get(proto.int(1), (None, None))
    if field is None:
        raise LoadError(f"{what}: a {dtype} constant without tensor_content")
    if form == "varint":
        values = np.asarray(proto.ints(field), np.int64).astype(dtype)
    elif form == "half":  # (half_val: each value's 16 bits in an int32)
        values = np.asarray(proto.ints(field), np.uint16).view(dtype)
    else:
        raw = proto.bytes(field)  # (packed: repeated floats and doubles always are)
        if len(raw) % np.dtype(form).itemsize:
            raise LoadError(f"{what}: corrupt packed values ({len(raw)} bytes)")
        values = np.frombuffer(raw, np.dtype(form).newbyteorder("<")).astype(dtype)
    if len(values) > count:
        raise LoadError(f"{what}: {len(values)} values for {dtype}{list(shape)}")
    filled = np.zeros(count, dtype)
    filled[:len(values)] = values
    if 0 < len(values) < count:
        filled[len(values):] = values[-1]
    return filled.reshape(shape)


def _tensor_type(info: Message, what: str):
    dtype = tensor_bundle.np_dtype(info.int(2), what)
    shape = tensor_bundle.shape_of(info.message(3, what))
    if shape is None:
        raise LoadError(f"{what} has an unknown rank, which shlo2jax does not read")
    return T.tensor_type(tuple(None if d < 0 else d for d in shape), dtype)


# jax's backends -> the XlaCallModule's names of the platforms whose code runs on them.
_PLATFORMS_OF_BACKEND = {"cpu": ("CPU",), "gpu": ("CUDA", "ROCM"), "cuda": ("CUDA",),
                         "rocm": ("ROCM",), "tpu": ("TPU",)}
PLATFORM_INDEX = "platform_index"


def _takes_platform_index(module, node: _Node, what: str) -> bool:
    """Whether the module, lowered for several platforms, takes the platform index first
    (its @main's first argument is `jax.global_constant = "_platform_index"`); a module
    lowered for several that does not is refused."""
    platforms = _platforms(node)
    if len(platforms) < 2:
        return False
    main = module_chain.main_of(module, what)
    attrs = main.attributes["arg_attrs"] if "arg_attrs" in main.attributes else []
    first = ir.DictAttr(attrs[0]) if len(attrs) else None
    if first is None or "jax.global_constant" not in first or \
            ir.StringAttr(first["jax.global_constant"]).value != "_platform_index":
        raise LoadError(f"{what}: XlaCallModule {node.name!r} is lowered for "
                        f"{', '.join(platforms)}, and its module's @main takes no leading "
                        "platform index")
    return True


def _platform_index(platforms: list, ttype, what: str) -> BoundValue:
    """The leading argument of a module lowered for several platforms (what the
    XlaCallModule op passes itself), of type `ttype`: the index of jax's backend's platform
    where the module lists it, else 0 (the first one's code runs here, custom calls
    included), as jax.export's convention does (`conventions.exported`)."""
    here = _PLATFORMS_OF_BACKEND.get(jax.default_backend(), ())
    index = next((i for i, p in enumerate(platforms) if p in here), 0)
    return BoundValue(np.asarray(index, ttype.dtype),
                      f"{what}: the platform index ({platforms[index]})")


def _platform_name(call: int) -> str:
    return PLATFORM_INDEX if call == 0 else f"{PLATFORM_INDEX}_{call}"


def _convention(name: str, sig: _Signature, module_args: list, results: dict,
                variables: dict, constants: dict, platforms: list, what: str):
    """The factory of the signature's convention: the module's arguments bound to the
    signature's inputs (sorted by name), the variables' values, the constants and the
    platform indices; its results (`results`: name -> @main result) as the signature's
    outputs, a dict by name."""
    input_names = sorted(sig.inputs)
    position = {n: i for i, n in enumerate(input_names)}
    bindings = []
    for i, value in enumerate(module_args):
        if value.kind == "input":
            bindings.append(Binding("input", "", position[value.key]))
        elif value.kind == "read":
            bindings.append(Binding("param", variables[value.key][0]))
        elif value.kind == "constant":
            bindings.append(Binding("constant", value.key))
        elif value.kind == "platform":
            bindings.append(Binding("constant", _platform_name(value.key)))
        else:
            raise LoadError(f"{what}: the module's argument {i} is a {value.kind} value, not "
                            "a signature input or a variable's value")
    values = dict(variables.values())
    clash = sorted(set(values) & set(constants))
    if clash:
        raise LoadError(f"{what}: variable {clash[0]!r} has the name of a constant")
    values.update(constants)

    def structure(flat):
        return dict(zip(results, flat))

    def make(fdef, assembly) -> BoundConvention:
        bound = {**values, **{
            _platform_name(v.key): _platform_index(platforms[v.key], fdef.input_types[i], what)
            for i, v in enumerate(module_args) if v.kind == "platform"}}
        types = {b.position: t for b, t in zip(bindings, fdef.input_types) if b.kind == "input"}
        inputs = [(n, types.get(i) or _tensor_type(sig.inputs[n], f"{what}: input {n!r}"))
                  for i, n in enumerate(input_names)]
        return BoundConvention(fdef, name, bindings, bound, inputs, structure, SOURCE, results)
    return make
