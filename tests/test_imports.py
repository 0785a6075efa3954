"""The package's, training's, the app's, the benchmarks', the evals' and the lab's import graph has no cycle (train
and export imported each other), packages import one way (the product never reaches into the lab), the app stays a
package a newcomer can read (app.py was one 1,400-line file), and so do the package and training (short modules,
short functions)."""

import ast
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "mdlm_hf",
    "mdlm_hf/sampling",
    "training",
    "mdlm_space",
    "mdlm_space/tabs",
    "benchmarks",
    "evals",
    "studio",
    "lab",
)
# the packages each package may import: the library below all; the app on the library alone; training on the library
# alone (it imported the evals to judge a GPU window's models: that is the lab's); the lab on anything but the app,
# which nothing imports (the benchmarks started the app through app.py, not through mdlm_space)
MAY_IMPORT = {
    "mdlm_hf": set(),
    "mdlm_space": {"mdlm_hf"},
    "app": {"mdlm_hf", "mdlm_space"},
    "training": {"mdlm_hf"},
    "studio": {"mdlm_hf", "training"},
    "evals": {"mdlm_hf", "training", "studio"},
    "benchmarks": {"mdlm_hf", "training", "studio", "mdlm_space", "evals"},
    "lab": {"mdlm_hf", "mdlm_space", "training", "studio", "evals", "benchmarks"},
}
APP_FILES = ("app.py", "mdlm_space/*.py", "mdlm_space/tabs/*.py")
MAX_APP_FILE_LINES, MAX_APP_FUNCTION_LINES = 400, 60
LIBRARY_FILES = ("mdlm_hf/*.py", "mdlm_hf/sampling/*.py", "training/*.py")
MAX_LIBRARY_FILE_LINES, MAX_LIBRARY_FUNCTION_LINES = 450, 60


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
    assert {"mdlm_space.layout", "mdlm_space.tabs.generate"} <= graph.keys()
    assert {"mdlm_hf.sampling.loop", "mdlm_hf.sampling.keeper"} <= graph.keys()  # the sampler's files are checked too
    found = cycle(graph)
    assert found is None, " -> ".join(found)


def test_speed_and_quality_import_neither_the_other():
    # both leaned on each other (benchmarks/common.py, evals.structure_suite's rules): what they share is studio/
    graph = import_graph()
    crossing = [
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        for mine, theirs in (("benchmarks.", "evals."), ("evals.", "benchmarks."))
        if module.startswith(mine) and target.startswith(theirs)
    ]
    assert not crossing, crossing
    assert "studio.common" in graph["evals.structure_suite"] and "studio.rules" in graph["benchmarks.generate_speed"]


def package_of(path: Path, root: Path = REPO_ROOT) -> str:
    """The package a file belongs to: its top folder, or `app` for app.py."""
    parts = path.relative_to(root).parts
    return parts[0] if len(parts) > 1 else path.stem


def packages_imported(path: Path, root: Path = REPO_ROOT) -> set[str]:
    """The project packages a file imports, anywhere in it (a late import inside a function is still an edge)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return (found & MAY_IMPORT.keys()) - {package_of(path, root)}


def imports_against_the_order(root: Path = REPO_ROOT) -> list[str]:
    """Each import of a package that its importer may not import, as "file -> package"."""
    files = [root / "app.py", *(path for package in MAY_IMPORT for path in sorted((root / package).rglob("*.py")))]
    return [
        f"{path.relative_to(root).as_posix()} -> {target}"
        for path in files
        if path.is_file()
        for target in sorted(packages_imported(path, root) - MAY_IMPORT[package_of(path, root)])
    ]


def test_packages_import_one_way():
    for package in MAY_IMPORT.keys() - {"app"}:
        assert (REPO_ROOT / package / "__init__.py").is_file(), package  # each package's modules are read
    wrong = imports_against_the_order()
    assert not wrong, "imports against mdlm_hf <- training <- studio <- evals, benchmarks <- lab: " + ", ".join(wrong)


def test_the_order_check_finds_a_late_import_of_the_lab_and_of_the_app(tmp_path):
    for package in ("training", "lab", "mdlm_space"):
        (tmp_path / package).mkdir()
    (tmp_path / "app.py").write_text("import mdlm_space.layout\n")
    (tmp_path / "lab" / "job.py").write_text("from training import train\nfrom evals.reader import judge\n")
    (tmp_path / "training" / "train.py").write_text("def main():\n    from lab import job\n    import studio.common\n")
    (tmp_path / "mdlm_space" / "serve.py").write_text("def main():\n    from app import main\n")
    assert imports_against_the_order(tmp_path) == [
        "mdlm_space/serve.py -> app",
        "training/train.py -> lab",
        "training/train.py -> studio",
    ]


def test_the_cycle_check_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def long_parts(path: Path, max_file: int = MAX_APP_FILE_LINES, max_function: int = MAX_APP_FUNCTION_LINES) -> list[str]:
    """What in a file is over the limits (the app's by default): the file itself, or a function, as "name: N lines"."""
    text = path.read_text(encoding="utf-8")
    found = [f"{path.name}: {text.count(chr(10))} lines"] if text.count("\n") > max_file else []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > max_function:
                found.append(f"{path.name}:{node.name}: {length} lines")
    return found


def test_the_app_is_a_package_of_short_files_and_functions():
    app_files = [path for pattern in APP_FILES for path in sorted(REPO_ROOT.glob(pattern))]
    assert len(app_files) >= 10 and (REPO_ROOT / "app.py").read_text().count("\n") < 100  # the entry point is small
    assert [part for path in app_files for part in long_parts(path)] == []


def test_the_package_and_training_are_short_files_and_functions():
    files = [path for pattern in LIBRARY_FILES for path in sorted(REPO_ROOT.glob(pattern))]
    assert len(files) >= 50  # the globs found the package, the sampler and training
    limits = (MAX_LIBRARY_FILE_LINES, MAX_LIBRARY_FUNCTION_LINES)
    found = [
        f"{path.parent.relative_to(REPO_ROOT).as_posix()}/{part}"
        for path in files
        for part in long_parts(path, *limits)
    ]
    assert not found, f"over {limits[0]} lines a file or {limits[1]} a function: " + ", ".join(found)


def test_the_length_check_finds_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_APP_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n")
    assert long_parts(tmp_path / "long.py") == [f"long.py:long: {MAX_APP_FUNCTION_LINES + 1} lines"]
    file_limit = MAX_APP_FUNCTION_LINES  # the limits are the caller's: here the file is the long part
    assert long_parts(tmp_path / "long.py", file_limit, 100) == [f"long.py: {MAX_APP_FUNCTION_LINES + 1} lines"]
