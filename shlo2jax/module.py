"""The decoded program: MLIR walked once into plain Python records.

After decoding, tracing touches no MLIR object: every op is an `Op` with integer
value ids, decoded attributes, result types and its resolved handler.
"""

from __future__ import annotations

import collections
import itertools
import re
from typing import Any, Callable, Optional

import numpy as np

from shlo2jax import attributes
from shlo2jax import held_module
from shlo2jax import registry
from shlo2jax import value_types as T
from shlo2jax.compat import attribute_items, declares_no_regions, walked_operations
from shlo2jax.errors import ElidedDataError, LoadError, UnsupportedError
from shlo2jax.registry import COMPOSITE_RULES

_TERMINATORS = frozenset({"func.return", "stablehlo.return", "mhlo.return", "chlo.return",
                          "sdy.return"})


class Region:
    """One single-block region: arguments, ops, and the terminator's operands."""
    __slots__ = ("args", "arg_types", "ops", "outputs", "captures")

    def __init__(self, args, arg_types, ops, outputs, captures):
        self.args: tuple = args
        self.arg_types: tuple = arg_types
        self.ops: list = ops
        self.outputs: tuple = outputs
        self.captures: tuple = captures  # ids used inside but defined outside

    def __repr__(self):
        return f"Region({len(self.args)} args, {len(self.ops)} ops)"


class Problem(tuple):
    """(op name, location, what is wrong): one construct the decoder found it cannot run,
    compared and printed as that triple. `op_index` is the op's position in the module's op
    order (-1 where no op is known): with strict=False the translation refuses that op, and
    only it, even where locations say nothing (`loc(unknown)` on every op of a release
    artifact would otherwise make each op of the same name refuse with another's problem)."""

    def __new__(cls, name: str, location: str, what: str, op_index: int = -1):
        problem = super().__new__(cls, (name, location, what))
        problem.op_index = op_index
        return problem

    def __reduce__(self):
        return Problem, (*self, self.op_index)


class Op:
    __slots__ = ("name", "operands", "results", "result_types", "attrs", "regions",
                 "_location", "_source", "handler", "params", "index")

    def __init__(self, name, operands, results, result_types, attrs, regions, location,
                 source_name: str = ""):
        self.name: str = name
        self.operands: tuple = operands
        self.results: tuple = results
        self.result_types: tuple = result_types
        self.attrs: dict = attrs
        self.regions: tuple = regions
        # A str, the op's `ir.Location`, the op a view was made from (`replaced`), or the
        # `held_module.HeldLocations` holding it at `index` (`ModuleDef.hold_locations`):
        # formatting every op's location costs a large part of decoding, and only error
        # messages and probes read it.
        self._location = location
        self._source = source_name
        self.handler: Optional[Callable] = None
        self.params: Any = attrs  # what `prepare` made of attrs (attrs itself when no prepare)
        self.index: int = -1  # position in the module's op order (for probes/locating)

    def replaced(self, **fields) -> "Op":
        """A shallow copy with some fields replaced: a view of the op for another rule (its
        own `params`, other result types, ...). Its location is read from this op when first
        asked for, not formatted now (the translation plans thousands of views; formatting
        one costs ~20 us): a view holds no `ir.Location` of its own, so where the program
        lets its MLIR module go, holding the module's ops' locations apart is enough
        (`ModuleDef.hold_locations`)."""
        view = Op.__new__(Op)
        for slot in Op.__slots__:
            setattr(view, slot, fields[slot] if slot in fields else getattr(self, slot))
        if type(view._location) is not str and "_location" not in fields:
            view._location = self
        return view

    @property
    def location(self) -> str:
        location = self._location
        if type(location) is not str:
            if type(location) is Op:
                location = location.location
            elif type(location) is held_module.HeldLocations:
                location = format_location(location[self.index], self._source)
            else:
                location = format_location(location, self._source)
            self._location = location
        return location

    @location.setter
    def location(self, value: str):
        self._location = value

    def __repr__(self):
        return f"Op({self.name} at {self.location})"


class FunctionDef:
    __slots__ = ("name", "public", "body", "input_types", "output_types", "arg_attrs",
                 "result_attrs", "location", "arg_locations", "entry_function")

    def __init__(self, name, public, body, input_types, output_types, arg_attrs, result_attrs,
                 location, arg_locations=(), entry_function=None):
        self.name, self.public, self.body = name, public, body
        self.input_types: tuple = input_types
        self.output_types: tuple = output_types
        self.arg_attrs: tuple = arg_attrs
        self.result_attrs: tuple = result_attrs
        self.location = location
        # What shlo2jax.names reads (argument names), kept so that it needs no MLIR object:
        # each argument's location as MLIR prints it, and the decoded `tf.entry_function`.
        self.arg_locations: tuple = arg_locations
        self.entry_function: Optional[dict] = entry_function


class ModuleDef:
    def __init__(self, name, functions, attrs, ops, problems=(), dormant_problems=()):
        self.name: Optional[str] = name
        self.functions: dict[str, FunctionDef] = functions
        self.attrs: dict = attrs
        self.ops: list = ops  # every op, in program order (nested regions included)
        # (op name, location, what) of each unsupported construct: in functions that can
        # run, and in those that never do (see _live_functions)
        self.problems: list = list(problems)
        self.dormant_problems: list = list(dormant_problems)
        # op index -> the dense_resource blob a constant was decoded from (`__elided__` for
        # placeholder data): weights, whatever their size (shlo2jax.params lifts them)
        self.resource_constants: dict = {}
        # (ir.Operation, Op) of its large constants, while the loader decides whether to
        # outline them (shlo2jax.held_module); emptied then, so that no MLIR object stays here
        self.large_constants: list = []
        # Whether any op is a custom call (decode_module counts them; True where not known):
        # a module without one has no manual (shard_map) region to fold.
        self.custom_calls: bool = True
        # The functions' signatures only, no bodies (decode_signatures)
        self.signatures_only: bool = False
        self._call_sites: Optional[dict] = None

    def hold_locations(self) -> None:
        """Lets no op refer to an `ir.Location` (which holds the module's context, and its
        weights: see shlo2jax.held_module) without formatting any: the ops' locations are held
        by one `held_module.HeldLocations`, in op order, and each op formats its own when first
        read (formatting costs 5-30 us an op: tens of ms to a second at load)."""
        held, locations, any_held = held_module.HeldLocations(), [], False
        for position, op in enumerate(self.ops):
            location = op._location
            if type(location) is str or type(location) is Op or location is None:
                locations.append(None)  # (formatted, or a view's: none to hold here)
            elif op.index != position:  # (not where it would be read back from: formatted)
                op.location  # noqa: B018 - formats it
                locations.append(None)
            else:
                locations.append(location)
                op._location, any_held = held, True
        if any_held:
            held.hold(locations)

    def call_sites(self) -> dict:
        """callee name -> the module's `func.call` ops that call it (counted once)."""
        sites = self._call_sites
        if sites is None:
            sites = self._call_sites = collections.Counter(
                op.params for op in self.ops if op.name == "func.call")
        return sites

    def op_histogram(self) -> dict:
        hist: dict = {}
        for op in self.ops:
            hist[op.name] = hist.get(op.name, 0) + 1
        return dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))


_NAME_LOC_RE = re.compile(r'^"((?:[^"\\]|\\.)*)"\(')
_FILE_LOC_RE = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')
_BARE_NAME_LOC_RE = re.compile(r'^"((?:[^"\\]|\\.)*)"$')


def format_location(loc, source_name: str) -> str:
    """`file:line:col`, followed by the op's name (e.g. `jit(f)/mul`) when the producer gave one.

    Exports from jax carry long call-site chains; the innermost frame says where the op came from.
    """
    text = str(loc)
    if text.startswith("loc(") and text.endswith(")"):
        text = text[4:-1]
    name = _NAME_LOC_RE.match(text)
    where = _FILE_LOC_RE.search(text)
    if where is None:
        if name:
            return name.group(1)
        bare = _BARE_NAME_LOC_RE.match(text)  # loc("while"): a name with no position
        return bare.group(1) if bare else text
    path = where.group(1)
    if path == "-" and source_name:
        path = source_name
    position = f"{path}:{where.group(2)}:{where.group(3)}"
    return f"{position} ({name.group(1)})" if name and where.start() > 0 else position


class _Decoder:
    def __init__(self, source_name: str, placeholder_rng, blobs=None):
        self.source_name = source_name
        self.placeholder_rng = placeholder_rng
        self.blobs = blobs  # the module's dense_resource data (attributes.ResourceBlobs)
        self.resource_constants: dict = {}  # op index -> the dense_resource blob it reads
        self.value_ids: dict = {}
        self.next_id = 0
        self.problems: list = []
        self.ops: list = []
        # ids of the values that are not plain XLA arrays (quantized and f6 tensors): ops
        # touching them get the carried-value rule (registry.carried, ops/quantized.py).
        self.carried: set = set()
        self.types: dict = {}  # ir.Type -> parsed type
        self.attributes: dict = {}  # ir.Attribute -> its value (attributes.decode_op_attributes)
        self.carried_types = False  # whether any type parsed so far is carried
        self.untyped = False  # whether some type failed to parse (its value's type is None)
        # (ir.Operation, Op) of each constant of LARGE_CONSTANT_BYTES or more (shlo2jax.held_module)
        self.large_constants: list = []
        # The ops of the function being decoded, in the order the decode reads them (see
        # `body`), or None: each block's ops are then read from the block.
        self.walked = None
        self.regionless: dict = {}  # op name -> whether its definition declares no region
        self.custom_calls = 0  # the custom calls resolved

    def body(self, func_operation, op_name: str, location) -> Region:
        """The body of a function. Its ops are listed by one walk of the function and read
        from that list block by block, not from each block's operation list, whose items
        are op views (a Python object of the op's class made for each op: ~0.4 us per op)."""
        walked = walked_operations(func_operation.operation)
        if walked is None:
            return self.region(func_operation.regions[0], op_name, location)
        self.walked = iter(walked)
        next(self.walked)  # the function itself
        try:
            body = self.region(func_operation.regions[0], op_name, location)
            left = next(self.walked, None)
        finally:
            self.walked = None
        if left is not None:  # (the walk and the blocks disagree: never seen)
            raise LoadError(f"{op_name}: {left.name} was left out of its decode")
        return body

    def new_id(self, value) -> int:
        vid = self.next_id
        self.next_id += 1
        self.value_ids[value] = vid
        return vid

    def where(self, location) -> str:
        """The text of a location that may still be an `ir.Location` (see `Op.location`)."""
        return location if type(location) is str else format_location(location, self.source_name)

    def parse_type(self, mlir_type, op_name: str, location):
        # Types are uniqued in their context: equal `ir.Type`s are one type, and caching by
        # the object saves printing it for every value.
        parsed = self.types.get(mlir_type)
        if parsed is None:
            try:
                parsed = T.parse_type(str(mlir_type))
            except T.UnsupportedTypeError as e:
                self.problems.append(Problem(op_name, self.where(location), f"unsupported type: {e}"))
                self.untyped = True
                return None
            self.types[mlir_type] = parsed
            if _is_carried(parsed):
                self.carried_types = True
        return parsed

    def region(self, mlir_region, op_name: str, location) -> Region:
        blocks = list(mlir_region.blocks)
        if len(blocks) != 1:
            self.problems.append(Problem(
                op_name, self.where(location),
                f"region with {len(blocks)} blocks (only single-block regions)"))
            if self.walked is not None:  # its ops (nested ones included) are not decoded
                for _ in range(_count_ops(mlir_region)):
                    next(self.walked)
            return Region((), (), [], (), ())
        block = blocks[0]
        # Ids are handed out in program order, so every value defined in this region (nested
        # ones included) gets an id >= start, and a value used here with a smaller id is a
        # capture (SSA dominance: what is used inside is defined before the region's op).
        start = self.next_id
        arguments = list(block.arguments)  # (each item a Python object made per read)
        args = tuple([self.new_id(a) for a in arguments])
        cached = self.types.get
        arg_types = tuple([cached(t) or self.parse_type(t, op_name, location)
                           for t in [a.type for a in arguments]])
        self.carried.update(vid for vid, t in zip(args, arg_types) if _is_carried(t))
        ops, outputs = [], ()
        value_ids = self.value_ids
        decode_op = self.op
        walked = self.walked
        for operation in itertools.islice(walked, len(block.operations)) if walked is not None \
                else (view.operation for view in block.operations):
            name = operation.name
            if name in _TERMINATORS:
                outputs = tuple([value_ids[v] for v in operation.operands])
                continue
            ops.append(decode_op(operation, name))
        # The values used here: the ops' operands, the terminator's, and what the ops'
        # regions capture (gathered at the end, one C-level union, not one update per op).
        used = set(outputs).union(*[op.operands for op in ops],
                                  *[r.captures for op in ops if op.regions for r in op.regions])
        captures = tuple(sorted([v for v in used if v < start]))
        return Region(args, arg_types, ops, outputs, captures)

    def op(self, operation, name: str):
        location = operation.location  # formatted only when read (see `Op.location`)
        problems_before = len(self.problems)
        value_ids = self.value_ids
        mlir_operands = operation.operands
        count = len(mlir_operands)  # (indexed: most ops have one or two operands)
        operands = (value_ids[mlir_operands[0]],) if count == 1 else \
            (value_ids[mlir_operands[0]], value_ids[mlir_operands[1]]) if count == 2 else \
            tuple(map(value_ids.__getitem__, mlir_operands))
        first = self.next_id
        try:  # (most ops: one result, read once, its type from it)
            result = operation.result
        except ValueError:  # none, or several
            result = None
        if result is not None:
            mlir_type = result.type
            result_types = (self.types.get(mlir_type) or self.parse_type(mlir_type, name, location),)
            results = (first,)
            value_ids[result] = first
        else:
            mlir_results = operation.results
            cached = self.types.get
            result_types = tuple([cached(t) or self.parse_type(t, name, location)
                                  for t in mlir_results.types])
            results = tuple(range(first, first + len(result_types)))
            value_ids.update(zip(mlir_results, results))
        self.next_id = first + len(results)
        carried = self.carried_types and any([_is_carried(t) for t in result_types])
        if carried:
            self.carried.update(results)
        attrs = {}
        blob = None
        undecodable = False
        items = attribute_items(operation)  # (one binding call where there are none)
        if items:
            blobs = self.blobs
            blobs_before = len(blobs.used) if blobs is not None else 0
            try:
                attrs = attributes.decode_op_attributes(operation, self.placeholder_rng,
                                                        blobs, self.attributes, items)
            except (ElidedDataError, attributes.ConstantSizeError) as e:
                raise type(e)(f"{name} at {self.where(location)}: {e}") from None
            except (ValueError, T.UnsupportedTypeError) as e:
                self.problems.append(Problem(name, self.where(location),
                                             f"cannot decode attributes: {e}"))
                undecodable = True
            if blobs is not None and len(blobs.used) > blobs_before:
                blob = blobs.used[-1]
        regionless = self.regionless.get(name)
        if regionless is None:  # (once per op name: most ops are declared without regions)
            regionless = self.regionless[name] = declares_no_regions(operation)
        if regionless:
            regions = ()
        else:
            mlir_regions = operation.regions
            regions = tuple([self.region(r, name, location) for r in mlir_regions]) \
                if len(mlir_regions) else ()
        op = Op(name, operands, results, result_types, attrs, regions, location, self.source_name)
        op.index = len(self.ops)
        self.ops.append(op)
        if len(self.problems) != problems_before:
            # Those of its types, attributes and regions (its nested ops' carry their own).
            for problem in self.problems[problems_before:]:
                if problem.op_index < 0:
                    problem.op_index = op.index
        if blob is not None:
            self.resource_constants[op.index] = blob
        if name in _CONSTANTS and type(attrs.get("value")) is np.ndarray and \
                attrs["value"].nbytes >= held_module.LARGE_CONSTANT_BYTES and \
                not attributes.is_splat_view(attrs["value"]):  # (one element: not large)
            self.large_constants.append((operation, op))
        if not carried and self.carried:  # a program with no such value skips the scan
            carried = not self.carried.isdisjoint(operands) or any(
                _is_carried(t) for r in regions for t in r.arg_types)
        if not undecodable:  # (reported above; its rule would look for the attributes)
            self.resolve(op, carried)
        return op

    def resolve(self, op: Op, carried: bool = False):
        if op.name in _CUSTOM_CALLS:
            self.custom_calls += 1
            self.resolve_custom_call(op)
            return
        rule = registry.lookup(op.name)
        if rule is None:
            self.problems.append(Problem(op.name, op.location, "no translation for this op",
                                         op.index))
            return
        if carried:
            # Decided here, once: only ops touching quantized or f6 values pay for the
            # wrapper that runs the rule on storage integers or expressed values.
            rule = registry.carried(rule)
        op.handler = rule.handler
        if rule.prepare is not None and not (self.untyped and None in op.result_types):
            try:
                op.params = rule.prepare(op)
            except registry.Unsupported as e:
                self.problems.append(Problem(op.name, op.location, str(e), op.index))

    def resolve_custom_call(self, op: Op):
        """A custom call runs its target's rule: handler and prepared params are the
        target's, so tracing it costs what tracing any op does. Values that are not plain
        arrays (quantized, f6) reach the handler as they are.

        MHLO ops with no StableHLO counterpart travel as `custom_call @mhlo.<op>` with the
        op's attributes in `mhlo.attributes` (XLA's hlo-legalize-to-stablehlo, e.g.
        `@mhlo.topk`, `@mhlo.erf`). Such a call with no rule of its own runs the op's rule,
        looked up as `mhlo.<op>`, then `chlo.<op>`, then `stablehlo.<op>`, on a copy of the
        op with the encoded name and attributes."""
        if self.untyped and None in op.result_types:
            return
        target = op.attrs.get("call_target_name", "")
        try:
            rule = registry.custom_call_rule(target)
            if rule is not None:
                op.handler = rule.handler
                if rule.prepare is not None:
                    op.params = rule.prepare(op)
                return
            encoded = _encoded_op(op, target) if target.startswith("mhlo.") else None
            if encoded is None:
                raise registry.Unsupported(f"custom_call target {target!r} has no translation")
            op.handler, op.params = encoded
        except registry.Unsupported as e:
            self.problems.append(Problem(op.name, op.location, str(e), op.index))


_CUSTOM_CALLS = frozenset({"stablehlo.custom_call", "mhlo.custom_call"})
_CONSTANTS = frozenset({"stablehlo.constant", "mhlo.constant"})


def _encoded_op(op: Op, target: str):
    """(handler, params) running the rule of the MHLO op a custom call encodes, or None."""
    name = target[len("mhlo."):]
    for encoded_name in ("mhlo." + name, "chlo." + name, "stablehlo." + name):
        rule = registry.lookup(encoded_name)
        if rule is not None:
            break
    else:
        return None
    attrs = op.attrs.get("mhlo.attributes") or {}
    if not isinstance(attrs, dict):
        raise registry.Unsupported(f"custom_call @{target} with mhlo.attributes that are not "
                                   "a dictionary")
    inner = Op(rule.name, op.operands, op.results, op.result_types, dict(attrs), op.regions,
               op.location)
    if rule.prepare is not None:
        inner.params = rule.prepare(inner)
    handler = rule.handler

    def run_encoded(ctx, op, *operands):  # the rule sees the op it was written for
        return handler(ctx, inner, *operands)
    return run_encoded, None


def _is_carried(t) -> bool:
    """A quantized or f6 tensor type (or a tuple holding one): not a plain XLA array."""
    if type(t) is T.TensorType:
        return t.quant is not None
    return type(t) is T.TupleType and any(_is_carried(e) for e in t.elements)


def _function(decoder: _Decoder, func_op, with_body: bool = True) -> FunctionDef:
    operation = func_op.operation
    attrs = operation.attributes
    name = attrs["sym_name"].value
    public = "sym_visibility" not in attrs or attrs["sym_visibility"].value == "public"
    location = format_location(operation.location, decoder.source_name)
    ftype = attrs["function_type"].value
    input_types = tuple(decoder.parse_type(t, f"func.func @{name}", location) for t in ftype.inputs)
    output_types = tuple(decoder.parse_type(t, f"func.func @{name}", location) for t in ftype.results)

    def per_value_attrs(key, count):
        if key not in attrs:
            return tuple({} for _ in range(count))
        return tuple(attributes.decode(d) for d in attrs[key])

    arg_attrs = per_value_attrs("arg_attrs", len(input_types))
    result_attrs = per_value_attrs("res_attrs", len(output_types))
    body = decoder.body(operation, f"func.func @{name}", location) if with_body else None
    blocks = operation.regions[0].blocks
    arg_locations = tuple(str(a.location) for a in blocks[0].arguments) if len(blocks) == 1 \
        else ()
    entry_function = attributes.decode(attrs["tf.entry_function"]) \
        if "tf.entry_function" in attrs else None
    return FunctionDef(name, public, body, input_types, output_types, arg_attrs, result_attrs,
                       location, arg_locations, entry_function)


def _count_ops(mlir_region) -> int:
    """The ops of an `ir.Region`, nested ones included."""
    return sum(1 + sum(_count_ops(r) for r in view.operation.regions)
               for block in mlir_region.blocks for view in block.operations)


def _ops_of(region: Region):
    for op in region.ops:
        yield op
        for inner in op.regions:
            yield from _ops_of(inner)


def _live_functions(functions: dict, ops_of: Optional[dict] = None) -> set:
    """The functions that can run: the public ones (all, when none is public) and every
    function their ops name (callees, bodies, ...), except a composite's decomposition when a
    JAX implementation is registered for the composite's name or the composite is a chlo op
    (ops/composite.py). `ops_of`: {function name: its
    ops, nested ones included} where the decoder listed them (a flat list: the walk through
    nested regions' generators was most of the time)."""
    live = set()
    stack = [n for n, f in functions.items() if f.public] or list(functions)
    reached = set(stack)  # (each runs: once all do, the rest of the walk finds nothing new)
    while stack and len(reached) < len(functions):
        name = stack.pop()
        if name in live:
            continue
        live.add(name)
        for op in ops_of[name] if ops_of is not None else _ops_of(functions[name].body):
            attrs = op.attrs
            if not attrs or not isinstance(attrs, dict):
                continue
            # (a registered implementation, or the chlo op a composite stands for: decided
            # when the op was prepared)
            replaced = op.name.endswith(".composite") and (
                attrs.get("name") in COMPOSITE_RULES
                or getattr(op.params, "implementation", None) is not None)
            for key, value in attrs.items():
                if key == "decomposition" and replaced:
                    continue
                for v in value if isinstance(value, (tuple, list)) else (value,):
                    if isinstance(v, str) and v in functions and v not in reached:
                        reached.add(v)
                        stack.append(v)
    return reached


def decode_signatures(mlir_module, *, source_name: str = "") -> Optional[ModuleDef]:
    """The module's name, attributes and functions' signatures, without their bodies (each
    FunctionDef's `body` is None, and the module has no ops): what a program needs until it
    translates (see shlo2jax.executables.direct). None when a signature cannot be read (the full decode
    reports why)."""
    decoder = _Decoder(source_name, None)
    module_attrs = attributes.decode_op_attributes(mlir_module.operation)
    functions = {}
    for view in mlir_module.body.operations:
        if view.operation.name == "func.func":
            fdef = _function(decoder, view, with_body=False)
            functions[fdef.name] = fdef
    if decoder.problems or not functions:
        return None
    module = ModuleDef(module_attrs.get("sym_name"), functions, module_attrs, [])
    module.signatures_only = True
    return module


def decode_module(mlir_module, *, strict: bool, source_name: str = "",
                  placeholder_data: bool = False, seed: int = 0) -> ModuleDef:
    """Walks an `ir.Module` once. With `strict`, every unsupported op/type is raised together.
    `strict` has no default of its own: the caller passes its options' value (`load`'s
    pipeline, `shlo2jax.decoding`, decodes with False and refuses by `LoadOptions.strict`)."""
    rng = np.random.default_rng(seed) if placeholder_data else None
    decoder = _Decoder(source_name, rng, attributes.ResourceBlobs(mlir_module))
    operation = mlir_module.operation
    module_attrs = {}
    module_attrs = attributes.decode_op_attributes(operation)
    name = module_attrs.get("sym_name")
    functions = {}
    problems_in = {}
    ops_of = {}  # function name -> its ops (decoded one function after the other)
    for view in mlir_module.body.operations:
        if view.operation.name == "func.func":
            before, first = len(decoder.problems), len(decoder.ops)
            fdef = _function(decoder, view)
            functions[fdef.name] = fdef
            problems_in[fdef.name] = decoder.problems[before:]
            ops_of[fdef.name] = decoder.ops[first:]
    live = _live_functions(functions, ops_of)
    # Ops that can never run: in functions no public function reaches, or reached only as
    # the decomposition of a composite whose registered JAX implementation runs instead.
    module = ModuleDef(name, functions, module_attrs, decoder.ops,
                       problems=[p for f in functions if f in live for p in problems_in[f]],
                       dormant_problems=[p for f in functions if f not in live
                                         for p in problems_in[f]])
    module.resource_constants = decoder.resource_constants
    module.large_constants = decoder.large_constants
    # (an op whose attributes cannot be decoded is not resolved: it names no target either)
    module.custom_calls = decoder.custom_calls > 0
    if strict and module.problems:
        raise UnsupportedError(module.problems)
    if not functions:
        raise LoadError("the module defines no func.func")
    return module
