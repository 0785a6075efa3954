"""What the training tests share: tiny flags for a run of seconds, a run by them, and the export's command line."""

import subprocess
import sys

from tests.conftest import REPO_ROOT
from training import train

TINY_ARGS = [
    "--n-layer",
    "1",
    "--n-head",
    "2",
    "--n-embd",
    "32",
    "--block-size",
    "32",
    "--batch-size",
    "4",
    "--warmup-steps",
    "2",
    "--eval-interval",
    "5",
    "--eval-chars",
    "256",
    "--log-interval",
    "2",
    "--dtype",
    "float32",
    "--threads",
    "1",
]


def run(text_file, out_dir, *extra):
    return train.main(["--data", str(text_file), "--out-dir", str(out_dir), *TINY_ARGS, *extra])


def export_cli(*flags):
    return subprocess.run(
        [sys.executable, "-m", "training.export", *map(str, flags)], capture_output=True, text=True, cwd=REPO_ROOT
    )
