"""Each op's error as Model Explorer node data (google-ai-edge/model-explorer): load the
module in Model Explorer, then the JSON this writes as its node data, and the graph's nodes
are coloured by how far the two backends' results are apart.

The format is Model Explorer's `ModelNodeData` (model_explorer.node_data_builder): graph id ->
{"results": {node id: {"value": number, "bgColor": CSS colour}}}. For a StableHLO module its
MLIR adapter makes one graph per function (the graph id: the function's name) and numbers the
nodes of each from "0" in the order of the function's ops, an op with regions followed by
the ops of its regions (their terminators included; deeper regions' ops are not nodes), the
function's arguments "arg<n>" (adapters/mlir/translate_helpers.cc: AddNodeInfo,
MaybeAddNestedRegion, FuncOpToSubgraph); `node_ids` numbers the decoded module's ops so.
"""

from __future__ import annotations

import json

# A node's colour: its results equal, within the tolerances, beyond them, where the difference
# starts (the first diverging op located).
EQUAL, WITHIN, BEYOND, FIRST = "#d9f2d9", "#fff3b0", "#f4a6a6", "#d62728"


def node_ids(module) -> dict:
    """Op index of the decoded module -> (graph id, node id) as Model Explorer's MLIR
    adapter names the op's node; ops it makes no node of (deeper in regions) are absent."""
    ids = {}
    for name, fdef in module.functions.items():
        if fdef.body is None:
            continue
        counter = 0
        for op in fdef.body.ops:
            ids[op.index] = (name, str(counter))
            counter += 1
            for region in op.regions:
                for inner in region.ops:
                    ids[inner.index] = (name, str(counter))
                    counter += 1
                counter += 1  # (the region's terminator: a node too)
    return ids


def node_data(ops: list, first=None) -> dict:
    """Model Explorer node data of one pair's profile (OpErrors with their `node`): per node
    its max relative error, coloured; `first` (a Divergence) the op where the difference
    starts."""
    graphs: dict = {}
    for op in ops:
        if op.node is None:
            continue
        graph, node = op.node
        colour = FIRST if first is not None and op.op_index == first.op_index else \
            BEYOND if not op.ok else EQUAL if op.max_rel == 0 else WITHIN
        graphs.setdefault(graph, {"results": {}})["results"][node] = {
            "value": op.max_rel, "bgColor": colour}
    return graphs


def write_node_data(comparison, path) -> list:
    """The node data of the first pair whose ops have Model Explorer nodes (see `node_ids`:
    pairs recorded through probes) to `path`; returns the pair ([] where none has)."""
    for pair, ops in comparison.profiles.items():
        if any(op.node is not None for op in ops):
            first = next((d for d in comparison.located if (d.a, d.b) == pair), None)
            data = node_data(ops, first)
            break
    else:
        pair, data = [], {}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
    return list(pair)
