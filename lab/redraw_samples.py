"""Redraw an export's samples with today's default sampler, without evaluating it again.

    python -m lab.redraw_samples pretrained/mdlm-shakespeare-char

When the default sampler changes, the card's samples and metrics.json's "samples" and "sampling" are drawn
again (as the export draws them: `evaluate.draw_samples`, seeds 0, 1, 2); every other figure stays as measured.
Both files are rewritten atomically, or neither when the card has no Samples section.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from mdlm_hf import MDLM
from training.atomic import atomic_write_bytes
from training.card import samples_section
from training.evaluate import draw_samples

SECTION = re.compile(r"^## Samples \(.*?(?=^## )", re.DOTALL | re.MULTILINE)


def redraw_samples(export_dir: Path) -> dict:
    """Draws the samples again and writes them into `export_dir`'s metrics.json and card; returns them."""
    card_path, metrics_path = export_dir / "README.md", export_dir / "metrics.json"
    if not card_path.is_file() or not metrics_path.is_file():
        raise ValueError(f"{export_dir} is not an export: it needs README.md and metrics.json")
    card = card_path.read_text(encoding="utf-8")
    if not SECTION.search(card):
        raise ValueError(f"{card_path} has no '## Samples (...)' section followed by another section")
    try:
        metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    except ValueError as error:  # not UTF-8, not JSON
        raise ValueError(f"{metrics_path} is not readable JSON ({error})") from None
    if not isinstance(metrics, dict) or not isinstance(metrics.get("samples", []), list):
        raise ValueError(f"{metrics_path} is not an export's metrics: it should map names to values, samples a list")
    model = MDLM.from_pretrained(export_dir)
    samples = draw_samples(model, num_texts=len(metrics.get("samples", [])) or 3)
    card = SECTION.sub(lambda _: samples_section(samples) + "\n", card, count=1)
    atomic_write_bytes(metrics_path, json.dumps({**metrics, **samples}, indent=2).encode("utf-8"))
    atomic_write_bytes(card_path, card.encode("utf-8"))
    return samples


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export_dir", type=Path, help="an export directory (README.md, metrics.json, weights)")
    args = parser.parse_args(argv)
    try:
        samples = redraw_samples(args.export_dir)
    except ValueError as error:
        sys.exit(f"redraw_samples: {error}")
    print(f"redrew {len(samples['samples'])} samples in {args.export_dir} with {samples['sampling']}")


if __name__ == "__main__":
    main()
