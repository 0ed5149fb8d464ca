"""No import circle among hailq's modules: each module's imports at import time (not
those under ``TYPE_CHECKING``, nor those inside functions) form no loop."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def modules() -> dict[str, Path]:
    found = {}
    for path in (SRC / "hailq").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The hailq modules ``name`` imports when it is imported."""
    out: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                test = node.test
                if getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING":
                    visit(node.orelse)
                    continue
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = name.split(".")[:None if path.name == "__init__.py" else -1]
                    package = package[:len(package) - node.level + 1]
                    base = ".".join(package + ([node.module] if node.module else []))
                subs = {f"{base}.{a.name}" for a in node.names} & known.keys()
                out.update(subs)
                if len(subs) < len(node.names):
                    out.add(base)  # a name the module itself defines

    visit(ast.parse(path.read_text()).body)
    return (out & known.keys()) - {name}


def test_no_module_imports_itself_through_others() -> None:
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done
    loops: list[list[str]] = []

    def walk(name: str, trail: list[str]) -> None:
        state[name] = 1
        for other in sorted(graph[name]):
            if state.get(other) == 1:
                loops.append([*trail[trail.index(other):], other])
            elif other not in state:
                walk(other, [*trail, other])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            walk(name, [name])
    assert loops == []
    assert len(graph) > 100 and graph["hailq.runtime.worker"]  # it did read the imports
