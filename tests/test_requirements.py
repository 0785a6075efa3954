"""Every third-party module that the project's code and tests import is named in a requirements file, so the README's
install command is enough for its test command on a new machine."""

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
REQUIREMENT_FILES = ("requirements.txt", "requirements-dev.txt")
FIRST_PARTY = {"app", "mdlm_hf", "mdlm_space", "training", "benchmarks", "evals", "studio", "lab", "tests"}
SOURCES = ("tests", "mdlm_hf", "mdlm_space", "training", "benchmarks", "evals", "studio", "lab")


def eager_nodes(tree: ast.AST, in_tests: bool):
    """The nodes whose imports run when the module loads: a test file's all; elsewhere not those inside a function
    (a lazy import of an optional extra, such as trackio) or a `try` that catches ImportError."""
    for node in ast.iter_child_nodes(tree):
        if not in_tests and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if not in_tests and isinstance(node, ast.Try) and any(catches_import_error(h) for h in node.handlers):
            continue
        yield node
        yield from eager_nodes(node, in_tests)


def catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = ast.dump(handler.type) if handler.type is not None else "ImportError"
    return "ImportError" in names or "ModuleNotFoundError" in names


def imported_modules() -> dict[str, Path]:
    """Each top-level module the project's Python files import eagerly, with one file that imports it."""
    files = [REPO_ROOT / "app.py"] + [f for folder in SOURCES for f in sorted((REPO_ROOT / folder).rglob("*.py"))]
    found = {}
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in eager_nodes(tree, in_tests=path.parent.name == "tests"):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], path)
    return found


def required_distributions() -> set[str]:
    """The distribution names the requirement files list, normalised (PEP 503)."""
    names = set()
    for file in REQUIREMENT_FILES:
        for line in (REPO_ROOT / file).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line:
                names.add(normalise(re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0]))
    return names


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_imported_module_is_in_a_requirement_file():
    distributions = packages_distributions()
    required = required_distributions()
    missing = []
    for module, path in sorted(imported_modules().items()):
        if module in FIRST_PARTY or module in sys.stdlib_module_names or module == "__future__":
            continue
        owners = {normalise(name) for name in distributions.get(module, [])}
        if not owners & required:
            where = path.relative_to(REPO_ROOT)
            missing.append(f"{module} (imported by {where}; installed as {sorted(owners) or 'nothing'})")
    assert not missing, "modules no requirement file names: " + "; ".join(missing)


def test_the_check_fails_without_the_dev_requirements(monkeypatch):
    """Without requirements-dev.txt the check names hypothesis (which the fuzz tests import) and pytest."""
    monkeypatch.setattr(sys.modules[__name__], "REQUIREMENT_FILES", ("requirements.txt",))
    with pytest.raises(AssertionError, match=r"hypothesis \(imported by tests/test_fuzz.py"):
        test_every_imported_module_is_in_a_requirement_file()
