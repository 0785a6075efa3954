"""Upload an exported model directory to the Hugging Face Hub.

huggingface-cli login   # or set HF_TOKEN
python training/push_to_hub.py pretrained/mdlm-shakespeare-char user/mdlm-shakespeare-char
"""

from __future__ import annotations

import argparse
from pathlib import Path

from training.export import push_to_hub


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export_dir", help="directory written by training/export.py or train.py --export-dir")
    parser.add_argument("repo_id", help="e.g. your-name/mdlm-shakespeare-char")
    parser.add_argument("--private", action="store_true")
    args = parser.parse_args(argv)
    print(push_to_hub(Path(args.export_dir), args.repo_id, private=args.private))


if __name__ == "__main__":
    main()
