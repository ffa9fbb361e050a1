"""The pipeline graph of a run page as an inline SVG, laid out here (no library, no request):
layers from START, conditional edges dashed, edges that close a loop drawn back up."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

GraphData = dict[str, list[Any]]
"""A pipeline graph as JSON data: ``nodes`` (names) and ``edges`` (``source``, ``target``,
``conditional``)."""

_NODE_H, _LAYER_GAP, _NODE_GAP, _MARGIN = 30, 60, 24, 16
_ENDPOINTS = {"__start__": "START", "__end__": "END"}


def graph_data(graph: Any) -> GraphData:
    """The nodes and edges of a compiled graph (its ``get_graph()``) as JSON data."""
    drawable = graph.get_graph()
    return {
        "nodes": [str(node) for node in drawable.nodes],
        "edges": [
            {"source": str(e.source), "target": str(e.target), "conditional": bool(e.conditional)}
            for e in drawable.edges
        ],
    }


def esc(value: Any) -> str:
    """``value`` as escaped HTML text (also safe inside quoted attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def num(value: Any, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return esc(value if value is not None else "—")
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


# ------------------------------------------------------------------------------ graph drawing


def _edges(graph: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    return [
        (str(e.get("source")), str(e.get("target")), bool(e.get("conditional")))
        for e in graph.get("edges") or []
        if isinstance(e, Mapping)
    ]


def _back_edges(
    nodes: Sequence[str], edges: Sequence[tuple[str, str, bool]]
) -> set[tuple[str, str]]:
    """The edges that close a cycle in a depth-first walk from START (drawn as loops)."""
    successors: dict[str, list[str]] = {node: [] for node in nodes}
    for source, target, _ in edges:
        successors.setdefault(source, []).append(target)
    state: dict[str, int] = {}
    back: set[tuple[str, str]] = set()

    def visit(node: str) -> None:
        state[node] = 1
        for target in successors.get(node, []):
            if state.get(target) == 1:
                back.add((node, target))
            elif target not in state:
                visit(target)
        state[node] = 2

    for node in sorted(successors, key=lambda n: n != "__start__"):
        if node not in state:
            visit(node)
    return back


def _depths(nodes: Sequence[str], forward: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Longest-path layer of each node in the graph without its back edges."""
    depth = dict.fromkeys(nodes, 0)
    for _ in nodes:
        changed = False
        for source, target in forward:
            if depth[target] < depth[source] + 1:
                depth[target], changed = depth[source] + 1, True
        if not changed:
            break
    return depth


def _chains(
    edges: Sequence[tuple[str, str, bool]], back: set[tuple[str, str]], depth: dict[str, int]
) -> dict[tuple[str, str], list[str]]:
    """Each edge (but self-loops) as the chain of nodes it passes, top to bottom: an edge
    spanning several layers gets one point per layer between, which the layout places like
    a node so that the edge goes around the nodes in its way. ``depth`` gains the points."""
    chains: dict[tuple[str, str], list[str]] = {}
    for source, target, _ in edges:
        if source == target:
            continue
        upper, lower = (target, source) if (source, target) in back else (source, target)
        points = [f"\0{source}\0{target}\0{d}" for d in range(depth[upper] + 1, depth[lower])]
        for point, d in zip(points, range(depth[upper] + 1, depth[lower]), strict=True):
            depth[point] = d
        chains[(source, target)] = [upper, *points, lower]
    return chains


def _layers(depth: Mapping[str, int], links: Sequence[tuple[str, str]]) -> list[list[str]]:
    """The nodes by layer, each layer ordered by the mean position of the nodes above that
    link to them (fewer crossings)."""
    names = list(depth)
    layers: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for node in names:
        layers[depth[node]].append(node)
    position: dict[str, float] = {}
    for layer in layers:

        def key(node: str) -> float:
            above = [position[a] for a, b in links if b == node and a in position]
            return sum(above) / len(above) if above else float(names.index(node))

        layer.sort(key=key)
        for i, node in enumerate(layer):
            position[node] = i - (len(layer) - 1) / 2
    return layers


def _path(points: Sequence[tuple[float, float]]) -> str:
    head, *rest = points
    return f"M{head[0]:.0f},{head[1]:.0f}" + "".join(f" L{x:.0f},{y:.0f}" for x, y in rest)


def graph_svg(graph: Mapping[str, Any] | None) -> str:
    """The pipeline graph as an inline SVG: layers top to bottom, conditional edges dashed;
    an edge back up a loop leaves its node at the top and enters the other at the bottom."""
    nodes = [str(n) for n in (graph or {}).get("nodes") or []]
    if not nodes:
        return '<p class="muted">The graph is not part of this run\'s data.</p>'
    edges = [e for e in _edges(graph or {}) if e[0] in nodes and e[1] in nodes]
    back = _back_edges(nodes, edges)
    depth = _depths(nodes, [(s, t) for s, t, _ in edges if (s, t) not in back])
    chains = _chains(edges, back, depth)
    layers = _layers(depth, [link for c in chains.values() for link in pairwise(c)])
    widths = {n: max(64, 8 * len(_ENDPOINTS.get(n, n)) + 24) if n in nodes else 12 for n in depth}
    row_widths = [sum(widths[n] for n in layer) + _NODE_GAP * (len(layer) - 1) for layer in layers]
    inner = max(row_widths)
    width, height = inner + 2 * _MARGIN + 32, len(layers) * (_NODE_H + _LAYER_GAP) - _LAYER_GAP
    height += 2 * _MARGIN
    box: dict[str, tuple[float, float, float]] = {}  # centre x, centre y, width
    for row, (layer, row_width) in enumerate(zip(layers, row_widths, strict=True)):
        x = _MARGIN + (inner - row_width) / 2
        y = _MARGIN + row * (_NODE_H + _LAYER_GAP) + _NODE_H / 2
        for node in layer:
            box[node] = (x + widths[node] / 2, y, widths[node])
            x += widths[node] + _NODE_GAP
    parts = [
        f'<svg id="pipeline-graph" role="img" aria-label="pipeline graph" width="{width:.0f}" '
        f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'class="arrowhead"/></marker></defs>',
    ]
    half = _NODE_H / 2
    for source, target, conditional in edges:
        sx, sy, sw = box[source]
        if source == target:
            r = sx + sw / 2
            d = f"M{r:.0f},{sy - 6:.0f} C{r + 28:.0f},{sy - 22:.0f} {r + 28:.0f},{sy + 22:.0f} "
            d += f"{r:.0f},{sy + 6:.0f}"
        else:
            chain = chains[(source, target)]
            middle = [box[p][:2] for p in chain[1:-1]]
            if (source, target) in back:  # from the top of source up to the bottom of target
                tx, ty, tw = box[target]
                start, end = (sx + sw / 4, sy - half), (tx + tw / 4, ty + half)
                d = _path([start, *[(x + 4, y) for x, y in reversed(middle)], end])
            else:
                tx, ty, _ = box[target]
                d = _path([(sx, sy + half), *middle, (tx, ty - half)])
        style = "edge cond" if conditional else "edge"
        parts.append(
            f'<path class="{style}" d="{d}" marker-end="url(#arrow)">'
            f"<title>{esc(source)} → {esc(target)}</title></path>"
        )
    for node in nodes:
        x, y, w = box[node]
        kind = "endpoint" if node in _ENDPOINTS else "node"
        radius = half if kind == "endpoint" else 6
        parts.append(
            f'<g class="{kind}" data-node="{esc(node)}"><rect x="{x - w / 2:.0f}" '
            f'y="{y - half:.0f}" width="{w:.0f}" height="{_NODE_H}" rx="{radius:.0f}"/>'
            f'<text x="{x:.0f}" y="{y + 4:.0f}">{esc(_ENDPOINTS.get(node, node))}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


# ------------------------------------------------------------------------------ trace parts
