"""The docs agree with the repository and with themselves: every command names a module that exists, every path
named exists, no line reads as a diary, and each fact the docs repeat is given one way."""

import importlib.util
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted(
    {
        REPO_ROOT / "README.md",
        *REPO_ROOT.glob("docs/*.md"),
        *REPO_ROOT.glob("*/README.md"),
        *REPO_ROOT.glob("training/*.md"),
        *REPO_ROOT.glob("mdlm_hf/*_card.md"),
        *REPO_ROOT.glob("pretrained/*/README.md"),
    }
)
PROJECT_PACKAGES = ("mdlm_hf", "mdlm_space", "training", "benchmarks", "evals", "studio", "lab", "tests")
# a path into the repository's folders (runs/ is git-ignored: what a command writes, not what the repository holds)
PATH = re.compile(r"(?<![\w/.-])((?:" + "|".join(PROJECT_PACKAGES) + r"|docs|pretrained|\.ci)/[\w./*-]*[\w/*])")
COMMAND = re.compile(r"python -m ([\w.]+)")
# a one-off study's code, named beside its table as a pointer into git history: a file the tree no longer has
REMOVED = re.compile(r"git log --diff-filter=D -- ([\w./-]+)")
# words a line uses when it tells how the project got here rather than how it is
DIARY = re.compile(r"\bnot kept\b|\bNext\**:|\bnot in the repository\b|\bnow\b|\blast session\b|\bthis session\b", re.I)


def doc_lines():
    for path in DOCS:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            yield path.relative_to(REPO_ROOT), number, line


def module_exists(name: str) -> bool:
    """A project module by its file, anything else by importlib (pytest, pip, torch.distributed.run...)."""
    top = name.split(".")[0]
    if top in PROJECT_PACKAGES:
        base = REPO_ROOT.joinpath(*name.split("."))
        return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file() or (base / "__main__.py").is_file()
    return importlib.util.find_spec(top) is not None


def test_the_docs_are_found():
    names = {str(path.relative_to(REPO_ROOT)) for path in DOCS}
    assert {"README.md", "docs/benchmarks.md", "docs/decisions.md", "evals/README.md", "benchmarks/README.md"} <= names
    assert "lab/README.md" in names
    assert "mdlm_hf/model_card.md" in names and "pretrained/mdlm-shakespeare-char/README.md" in names


def test_every_command_names_a_module_that_exists():
    # docs/benchmarks.md ran python -m evals.long_text_speed, which is benchmarks.long_text_speed
    missing = [f"{path}:{n}: {name}" for path, n, line in doc_lines() for name in COMMAND.findall(line)]
    missing = [entry for entry in missing if not module_exists(entry.rsplit(": ", 1)[1])]
    assert not missing, missing


def test_every_repository_path_named_exists():
    # the docstrings and docs named moved or deleted files (benchmarks/line_breaks.py)
    missing = []
    for path, number, line in doc_lines():
        for named in PATH.findall(line):
            if any(mark in named for mark in ("*", "...", "<", "NAME")) or named in REMOVED.findall(line):
                continue
            if not (REPO_ROOT / named).exists():
                missing.append(f"{path}:{number}: {named}")
    assert not missing, missing


def test_a_pointer_into_git_history_names_a_removed_file():
    # a deleted study's table kept its dead command; its pointer must not name a file the tree still holds either
    pointers = [(path, n, named) for path, n, line in doc_lines() for named in REMOVED.findall(line)]
    assert any(str(path) == "docs/benchmarks.md" for path, _, _ in pointers)
    alive = [f"{path}:{n}: {named}" for path, n, named in pointers if (REPO_ROOT / named).exists()]
    assert not alive, alive


def test_no_line_reads_as_a_diary():
    found = [f"{path}:{n}: {line.strip()[:100]}" for path, n, line in doc_lines() if DIARY.search(line)]
    assert not found, found


def doc_blocks():
    """Each doc's paragraphs and tables: lines between blank lines."""
    for path in DOCS:
        for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
            yield path.relative_to(REPO_ROOT), block


def test_valid_words_name_their_word_list():
    # "valid words" were 0.919 in one place and 0.948 in another, counted against different lists, neither named
    named = re.compile(r"words\.txt|word list|lexicon|all of Shakespeare", re.I)
    unnamed = [
        f"{path}: {block.strip()[:80]}"
        for path, block in doc_blocks()
        if re.search(r"valid[ -]words?\b[^.]{0,40}?\d\.\d{2,3}|\d\.\d{2,3}[^.]{0,20}valid words", block, re.I)
        and not named.search(block)
    ]
    assert not unnamed, unnamed


def test_the_docs_name_only_app_objects_that_exist():
    # the docs said the torch work runs on `app.MODEL_THREAD`, which does not exist
    import importlib

    for path in (REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))):
        for name in re.findall(r"`((?:app|mdlm_space)(?:\.\w+)+)`", path.read_text(encoding="utf-8")):
            if name == "app.py" or (REPO_ROOT / f"{name.replace('.', '/')}.py").exists():
                continue  # a file or a module
            module, _, attribute = name.rpartition(".")
            assert hasattr(importlib.import_module(module), attribute), f"{path.name}: {name}"
