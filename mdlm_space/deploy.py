"""Deploy the app as a Hugging Face Space: one command that uploads what the Space runs, and nothing else.

    python -m mdlm_space.deploy USER/SPACE_NAME            # creates the Space if needed, then uploads
    python -m mdlm_space.deploy USER/SPACE_NAME --dry-run  # lists the files and their size, uploads nothing

The Space runs `app.py` with the packages in requirements.txt; README.md's front matter configures it. Uploaded:
the app (`app.py`, `mdlm_space/`), the package (`mdlm_hf/`), the shipped models (`pretrained/`),
requirements.txt, README.md and its picture. Never `runs/`, tests, training or benchmark output. The Hub stores
the weights and images as large files on its own (no `.gitattributes` needed with this upload). Log in first
with `hf auth login`, or set HF_TOKEN.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ALLOW_PATTERNS = [
    "app.py",
    "README.md",
    "docs/app.png",  # the README's picture
    "requirements.txt",
    "mdlm_space/*.py",  # "**/" matches subfolders only: the package's own modules need their own pattern
    "mdlm_space/**/*.py",
    "mdlm_hf/*.py",
    "mdlm_hf/**/*.py",
    "mdlm_hf/*.md",  # the model cards' templates
    "pretrained/**",
]
IGNORE_PATTERNS = ["**/__pycache__/**", "*.pyc", "**/.*"]


def space_files(root: Path = REPO_ROOT) -> list[Path]:
    """The files the upload sends, relative to `root`, as `upload_folder` filters them."""
    from huggingface_hub.utils import filter_repo_objects

    names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    return [Path(n) for n in filter_repo_objects(names, allow_patterns=ALLOW_PATTERNS, ignore_patterns=IGNORE_PATTERNS)]


def deploy(repo_id: str, private: bool = False, token: str | None = None, root: Path = REPO_ROOT) -> str:
    """Creates the Space `repo_id` (Gradio SDK) if needed and uploads the app's files; returns the commit URL."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="space", space_sdk="gradio", private=private, exist_ok=True)
    commit = api.upload_folder(
        repo_id=repo_id,
        repo_type="space",
        folder_path=root,
        allow_patterns=ALLOW_PATTERNS,
        ignore_patterns=IGNORE_PATTERNS,
        commit_message="Deploy mdlm_hf's app",
    )
    return commit.commit_url


def main(argv: list[str] | None = None) -> None:
    """`python -m mdlm_space.deploy`: upload the Space, or list what would go (--dry-run)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo_id", help="the Space: USER/NAME or ORG/NAME")
    parser.add_argument("--private", action="store_true", help="create the Space private")
    parser.add_argument("--dry-run", action="store_true", help="list the files and their size; upload nothing")
    args = parser.parse_args(argv)
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(args.repo_id)
    except HFValidationError as error:
        parser.error(f"repo_id {args.repo_id!r} is not a Hub repo id: {error}")
    if args.repo_id.count("/") != 1:
        parser.error(f"repo_id {args.repo_id!r}: give USER/NAME (a Space lives under a user or an organisation)")
    files = space_files()
    size = sum((REPO_ROOT / f).stat().st_size for f in files)
    print(f"{len(files)} files, {size / 1e6:.1f} MB, for the Space {args.repo_id}")
    if args.dry_run:
        print("\n".join(f"  {f}" for f in files))
        return
    try:
        print(f"deployed: {deploy(args.repo_id, private=args.private)}")
    except Exception as error:  # no network, no credentials, no rights to the repo: one line, not a traceback
        sys.exit(f"error: could not deploy to {args.repo_id}: {type(error).__name__}: {error}")


if __name__ == "__main__":
    main()
