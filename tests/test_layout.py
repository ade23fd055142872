"""The package's layout: no import cycle between cpr_neo4j's top-level subpackages.

Every `import` and `from ... import` of a cpr_neo4j module, at any depth of a file
(inside functions too: a deferred import is still a dependency), is an edge from the
importing file's subpackage to the imported one; the test fails on any cycle among those
edges and names it. Imports under `if TYPE_CHECKING:` count as well."""

from __future__ import annotations

import ast
from pathlib import Path

import cpr_neo4j

PACKAGE = Path(cpr_neo4j.__file__).parent


def _unit(module: str) -> str:
    """A module's unit: its top-level subpackage (`cpr_neo4j.graph.store` -> `graph`), or
    the top-level module itself (`cpr_neo4j.api` -> `api`)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:  # relative: resolved against the importing module's package
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - node.level + 1]
            name = ".".join(base + ([node.module] if node.module else []))
        else:
            name = node.module or ""
        return [name] + [f"{name}.{a.name}" for a in node.names]
    return []


def edges(root: Path = PACKAGE) -> dict[str, dict[str, str]]:
    """{unit: {unit it imports: 'file:line' of one such import}}, self-edges left out."""
    out: dict[str, dict[str, str]] = {}
    for path in sorted(root.rglob("*.py")):
        module = _module_of(path)
        here = _unit(module)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for name in _imported(node, module, path.name == "__init__.py"):
                if not name.startswith("cpr_neo4j.") or _unit(name) == here:
                    continue
                # `from cpr_neo4j import x`: x is a subpackage or a name of __init__
                there = _unit(name) if name.count(".") >= 1 else None
                if there and ((root / there).is_dir() or (root / f"{there}.py").exists()):
                    where = f"{path.relative_to(root.parent)}:{node.lineno}"
                    out.setdefault(here, {}).setdefault(there, where)
    return out


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one unit."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(_cycle_in(graph, set(component)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _cycle_in(graph: dict[str, dict[str, str]], component: set[str]) -> list[str]:
    """A closed walk start -> ... -> start inside one strongly connected component."""
    start = min(component)
    path, seen = [start], {start}
    while True:
        nxt = sorted(w for w in graph[path[-1]] if w in component)
        back = [w for w in nxt if w == start]
        if back and len(path) > 1:
            return path + [start]
        step = next((w for w in nxt if w not in seen), None)
        if step is None:  # every way on is seen: close the loop where it repeats
            w = nxt[0]
            return path[path.index(w) :] + [w]
        path.append(step)
        seen.add(step)


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b": ""}, "b": {"c": ""}, "c": {"a": ""}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b": ""}, "b": {}}) == []


def test_no_import_cycle_between_subpackages():
    graph = edges()
    assert "stages" in graph and "graph" in graph["stages"]  # the scan sees real imports
    found = cycles(graph)
    lines = [
        " -> ".join(c) + ": " + ", ".join(graph[a][b] for a, b in zip(c, c[1:], strict=False))
        for c in found
    ]
    assert not found, "import cycles between cpr_neo4j's subpackages:\n" + "\n".join(lines)
