"""The package's shape, checked on its source: imports go one way (down the layers of
docs/design.md, LAYERS here; no cycle among pipeline modules; imports inside functions counted too)
and no function in pipeline/ is over 60 lines.

An AST walk, not import-linter: the graph is small, and a function-level `from pipeline import x`
is an edge like any other (a lazy import only hides a cycle from the interpreter, not from a reader).
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "pipeline"
MAX_LINES = 60
# The layers, top first (docs/design.md): a module imports from its own layer or below. A module is
# placed by its top-level name in pipeline/ (pipeline.stages.facemesh: "stages"); the package's
# __init__ ("pipeline": its version and lazy API names) is at the bottom.
LAYERS = [
    ("cli", "__main__"),
    ("api",),
    ("report", "evaluate", "optimize", "batch", "deploy", "serve"),
    ("control",),
    ("arguments",),
    ("profile",),
    ("bundle",),
    ("runner", "outputs"),
    ("builder",),
    ("spec",),
    ("stages",),
    ("runtime",),
    ("convert",),
    ("zoo", "catalog", "modelcache", "sources", "cameras", "tddfa_net"),
    ("paths", "errors", "settings", "results", "measures", "boxes", "draw", "extras", "pickled", "tomlfile", "cluster",
     "views", "pipeline"),
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, modules: dict) -> str | None:
    """The pipeline module an imported dotted name lives in (pipeline.a.b.func -> pipeline.a.b)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path, modules: dict) -> set[str]:
    """Every pipeline module `module` imports, at the top or inside a function."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {_resolve(a.name, modules) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from ..a import b
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            # `from pipeline import zoo` imports the module pipeline.zoo, not only the package
            found |= {_resolve(f"{base}.{a.name}", modules) for a in node.names}
    return {m for m in found if m and m != module and m.startswith("pipeline")}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _imports(m, p, modules) for m, p in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_among_pipeline_modules():
    found = list(cycles(import_graph()))
    assert not found, "import cycles (imports inside functions count): " + "; ".join(" <-> ".join(c) for c in found)


def layer(module: str) -> int:
    """The module's layer, 0 at the top; a module in no layer fails, to be placed in LAYERS."""
    name = module.split(".")[1] if "." in module else module
    found = [i for i, names in enumerate(LAYERS) if name in names]
    assert found, f"{module} is in no layer: add '{name}' to LAYERS (tests/test_structure.py) and docs/design.md"
    return found[0]


def test_imports_go_down_the_layers():
    graph = import_graph()
    up = sorted(f"{m} -> {i}" for m, imported in graph.items() for i in imported if layer(i) < layer(m))
    assert not up, "imports that point up the layers (docs/design.md): " + "; ".join(up)


def test_the_cycle_check_sees_imports_inside_functions():
    """The check itself: a function-level import closing a loop is a cycle."""
    graph = import_graph()
    assert "pipeline.builder" in graph["pipeline.runner"]  # a top-level `from pipeline import builder`
    assert "pipeline.control.app" in graph["pipeline.cli.run"]  # only inside _mouse()
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def long_functions(limit: int = MAX_LINES) -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1  # from `def` to its last line, docstring included
                if lines > limit:
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    return out


def test_no_function_in_pipeline_is_over_60_lines():
    assert not long_functions(), "split these: " + ", ".join(long_functions())
