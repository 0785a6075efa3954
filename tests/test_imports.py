"""The package's and training's import graph has no cycle (issue 25: train and export imported each other)."""

import ast
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("mdlm_hf", "training")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """The project modules a file imports, anywhere in it (inside functions too: a late import is still an edge);
    `from package import name` is an edge to the submodule where `name` is one, else to the package."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom) and node.module in modules:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & modules
            found |= submodules or {node.module}
            if len(submodules) < len(node.names):  # names, not modules, come from the package itself too
                found.add(node.module)
    return found - {module_name(path)}


def import_graph() -> dict[str, set[str]]:
    files = [path for package in PACKAGES for path in (REPO_ROOT / package).glob("*.py")]
    modules = {module_name(path) for path in files}
    return {module_name(path): imports(path, modules) for path in files}


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph`, as the modules around it, or None."""
    state, stack = {}, []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                return stack[stack.index(target) :] + [target]
            if target not in state and (found := visit(target)):
                return found
        state[module] = "done"
        stack.pop()
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    assert {"mdlm_hf.model", "training.train", "training.export", "training.checkpoints"} <= graph.keys()
    assert "training.checkpoints" in graph["training.export"]  # export reads checkpoints without train
    found = cycle(graph)
    assert found is None, " -> ".join(found)


def test_the_cycle_check_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None
