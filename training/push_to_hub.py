"""Upload an exported model directory to the Hugging Face Hub.

hf auth login   # or set HF_TOKEN
python -m training.push_to_hub pretrained/mdlm-shakespeare-char user/mdlm-shakespeare-char [--private]

The export's words.txt lists every word of the training text; --private keeps the repo private.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from mdlm_hf import MDLM
from training.atomic import atomic_write_bytes
from training.card import python_string
from training.checkpoints import RunError
from training.run_options import repo_id_problem


def push_to_hub(export_dir: Path, repo_id: str, token: str | None = None, private: bool = False) -> str:
    """Creates the model repo if needed and uploads the export directory; returns the commit URL. `private`: a new
    repo is private, an existing public one refused (it would stay public). No network or credentials: a RunError."""
    from huggingface_hub import HfApi

    export_dir = Path(export_dir)
    missing = [f for f in ("config.json", "model.safetensors", "README.md") if not (export_dir / f).is_file()]
    if missing:
        raise ValueError(f"{export_dir} is not an export directory: missing {', '.join(missing)}")
    if problem := repo_id_problem(repo_id):
        raise ValueError(problem)
    try:  # what users will load: refused here rather than uploaded broken (a truncated model.safetensors)
        MDLM.from_pretrained(export_dir, fast=False)
    except Exception as error:
        raise ValueError(f"{export_dir} does not load as a model, so it is not pushed: {error}") from None
    card_path = export_dir / "README.md"
    card_before = card_path.read_bytes()
    name_repo_in_card(card_path, repo_id)
    print(f"pushing {export_dir} to the {'private' if private else 'public'} repo {repo_id}...", flush=True)
    try:
        api = HfApi(token=token)
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        if private and not api.repo_info(repo_id, repo_type="model").private:
            raise RunError(f"{repo_id} exists and is public; make it private on the Hub first, or omit --private")
        commit = api.upload_folder(
            folder_path=str(export_dir), repo_id=repo_id, repo_type="model", commit_message="Upload mdlm_hf model"
        )
    except BaseException as error:
        if card_path.read_bytes() != card_before:  # a failed push leaves the export as it was, byte for byte
            atomic_write_bytes(card_path, card_before)
        if isinstance(error, RunError) or not isinstance(error, Exception):  # Ctrl-C, exit: as they are
            raise
        first_line = (str(error).strip().splitlines() or [""])[0]
        raise RunError(
            f"could not push to {repo_id} ({type(error).__name__}: {first_line}); check the network and log in "
            f"with `hf auth login` (or set HF_TOKEN); the export in {export_dir} is complete: push it later with "
            f"python -m training.push_to_hub {export_dir} {repo_id}"
        ) from error
    return str(commit)


def name_repo_in_card(card_path: Path, repo_id: str) -> None:
    """Points the card's usage example (its first `MDLM.from_pretrained("...")`) at `repo_id`, if it is elsewhere."""
    card = card_path.read_text(encoding="utf-8")
    usage = f"MDLM.from_pretrained({python_string(repo_id)})"
    named = re.sub(r'MDLM\.from_pretrained\("[^"\n]*"\)', lambda _: usage, card, count=1)
    if named != card:
        atomic_write_bytes(card_path, named.encode("utf-8"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export_dir", help="directory written by training/export.py or train.py --export-dir")
    parser.add_argument("repo_id", help="e.g. your-name/mdlm-shakespeare-char")
    parser.add_argument("--private", action="store_true", help="create the repo private (refused if it is public)")
    args = parser.parse_args(argv)
    try:
        print(push_to_hub(Path(args.export_dir), args.repo_id, private=args.private))
    except (ValueError, RunError) as error:  # not an export, no network, no credentials: one line
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    main()
