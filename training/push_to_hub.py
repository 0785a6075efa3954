"""Upload an exported model directory to the Hugging Face Hub.

hf auth login   # or set HF_TOKEN
python -m training.push_to_hub pretrained/mdlm-shakespeare-char user/mdlm-shakespeare-char [--private]

The export's words.txt lists every word of the training text; --private keeps the repo private.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from training.checkpoints import RunError
from training.export import push_to_hub


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
