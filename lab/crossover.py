"""The crossover: masked diffusion against its autoregressive twin on the same text, by characters trained.

With data repeated for many epochs, a masked diffusion model keeps gaining after an autoregressive model of the same
shape has stopped, and overtakes it (Prabhudesai et al., "Diffusion Beats Autoregressive in Data-Constrained
Settings", arXiv 2507.15857). Two tables, both scored on TinyShakespeare's validation split and the held-out plays:

    python -m evals.heldout_plays          # once: runs/heldout/heldout_plays.txt
    python -m lab.crossover --data tinyshakespeare.txt --out runs/crossover          # the CPU rehearsal
    python -m lab.crossover --data tinyshakespeare.txt --models pretrained/mdlm-shakespeare-char \\
        pretrained/mdlm-shakespeare-char-ar OUT/unpacked/v4 OUT/unpacked/twin-v4       # saved models, by lineage

The rehearsal trains a small diffusion model and its twin (the same shape; the twin with the job's dropout 0.1) on
the first --unique-chars of TinyShakespeare's training split, and scores both at each epoch count of --epochs: the
data-constrained regime at the scale of a CPU. A saved model's characters are those of every stage of its lineage
(metrics.json's training stages). Diffusion: ELBO (4 mask draws, seed 0) and exact left-to-right NLL (on the first
--nll-chars); the twin: its NLL. The rows go to OUT/crossover.json and a markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from lab import gpu_job
from mdlm_hf import MDLM
from mdlm_hf.objectives import objective_of
from training import train
from training.checkpoints import build_model, load_checkpoint
from training.corpus import read_texts, split_text

SHAPE = ["--n-layer", "4", "--n-head", "4", "--n-embd", "128", "--block-size", "128"]
RECIPE = ["--optimizer", "muon", "--zero-init-residual"]
RECIPE += ["--loss-weighting", "uniform", "--ema", "0", "--batch-size", "32"]
RECIPE += ["--eval-chars", "4096", "--dtype", "float32", "--log-interval", "50"]
TWIN = ["--objective", "ar", "--dropout", "0.1"]  # the job's twin recipe


def held_out_text(path: Path, chars: int) -> str:
    """The first `chars` characters of the held-out plays."""
    return path.read_text(encoding="utf-8")[:chars]


def unique_text(data: Path, chars: int, scored: str) -> str:
    """The first `chars` of the training split, and one closing line of the characters the scored text has and they
    lack (a model's vocabulary is its text's; a few dozen characters, so every scored character can be read)."""
    train_text = split_text(read_texts([data]))[0][:chars]
    missing = sorted(set(scored) - set(train_text))
    return train_text + ("\n" + "".join(missing) + "\n" if missing else "")


def scores(model: MDLM, val: str, heldout: str, nll_chars: int) -> dict[str, float]:
    """A diffusion model's ELBO and exact NLL on the validation text and its ELBO on the held-out text; a twin's NLL
    on both: the GPU job's figures (`lab.gpu_job.score`), in fp32."""
    model = model.float().eval()
    val_ids, heldout_ids = (torch.tensor(model.tokenizer.encode(text)) for text in (val, heldout))
    return gpu_job.score(model, val_ids, heldout_ids, nll_chars)


def rehearse(args: argparse.Namespace, val: str, heldout: str) -> list[dict]:
    """Trains the small pair on the unique text, scoring each at every epoch count; the rows."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    text = unique_text(Path(args.data), args.unique_chars, val + heldout)
    (out / "unique.txt").write_text(text, encoding="utf-8")
    chars_per_step = 32 * 128
    trained_chars = int(len(text) * 0.9)  # training.train keeps its own last tenth to pick weights by
    last = max(round(epoch * trained_chars / chars_per_step) for epoch in args.epochs)
    rows = []
    for objective, extra in (("diffusion", []), ("ar", TWIN)):
        run = out / objective
        flags = ["--data", str(out / "unique.txt"), *SHAPE, *RECIPE, *extra, "--out-dir", str(run)]
        flags += ["--max-steps", str(last), "--eval-interval", str(last), "--threads", str(args.threads)]
        flags += ["--warmup-steps", str(min(50, last // 10))]
        for epoch in sorted(args.epochs):
            step = max(round(epoch * trained_chars / chars_per_step), 1)
            resume = ["--resume"] if (run / "ckpt.pt").is_file() else []
            stop = ["--stop-at-step", str(step)] if step < last else []
            train.main([*flags, *resume, *stop])
            model = build_model(load_checkpoint(run / "ckpt.pt"), run / "ckpt.pt")  # the weights as they are now
            row = {"model": objective, "epochs": epoch, "characters": step * chars_per_step, "unique": trained_chars}
            rows.append({**row, **scores(model, val, heldout, args.nll_chars)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def lineage_characters(folder: Path) -> tuple[int | None, str]:
    """Every stage's characters together (None where one is not recorded), and the stages' texts."""
    try:
        training = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))["training"]
    except (OSError, ValueError, KeyError) as error:
        raise ValueError(f"{folder} has no readable metrics.json with its training ({error})") from None
    stages = training.get("stages") or [{"characters": training.get("tokens_seen"), "text": "not recorded"}]
    counts = [stage.get("characters") for stage in stages]
    total = sum(counts) if all(isinstance(count, int) for count in counts) else None
    return total, " + ".join(str(stage.get("text")) for stage in stages)


def saved_rows(args: argparse.Namespace, val: str, heldout: str) -> list[dict]:
    """The saved models' rows: their lineage's characters and their scores."""
    rows = []
    for folder in map(Path, args.models):
        characters, texts = lineage_characters(folder)
        model = MDLM.from_pretrained(str(folder), fast=False)
        if unknown := model.tokenizer.unknown_chars(val + heldout):
            raise ValueError(f"{folder} cannot read the scored text's {''.join(unknown)[:20]!r}")
        kind = objective_of(model).name
        rows.append({"model": str(folder), "objective": kind, "characters": characters, "text": texts})
        rows[-1].update(scores(model, val, heldout, args.nll_chars))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def fmt(value: float | None) -> str:
    """A score to 3 places, or a dash."""
    return f"{value:.3f}" if isinstance(value, float) else "-"


def table(rows: list[dict]) -> str:
    """The rows as markdown: diffusion's ELBO, exact NLL and held-out ELBO; the twin's NLL on both."""
    lines = [
        "| model | characters trained | epochs | val ELBO | val exact NLL | held-out ELBO | val NLL (twin) "
        "| held-out NLL (twin) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        chars = f"{row['characters']:,}" if row.get("characters") else "not recorded"
        epochs = f"{row['epochs']:g}" if "epochs" in row else "-"
        figures = [row.get(key) for key in ("val_elbo", "val_exact_nll", "heldout_elbo", "val_nll", "heldout_nll")]
        lines.append(f"| {row['model']} | {chars} | {epochs} | " + " | ".join(map(fmt, figures)) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    """Parses the flags, trains or loads, scores; returns the rows."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="TinyShakespeare (its validation split is scored)")
    parser.add_argument("--heldout", default="runs/heldout/heldout_plays.txt", help="evals.heldout_plays' text")
    parser.add_argument("--heldout-chars", type=int, default=32768, help="the held-out plays' first characters")
    parser.add_argument("--val-chars", type=int, default=0, help="the validation split's first characters (0: all)")
    parser.add_argument("--nll-chars", type=int, default=4096, help="a diffusion model's exact NLL on these")
    parser.add_argument("--models", nargs="+", default=None, help="saved models to score instead of the rehearsal")
    parser.add_argument("--unique-chars", type=int, default=100_000, help="the rehearsal's text")
    parser.add_argument("--epochs", type=float, nargs="+", default=[1, 4, 16, 64, 128], help="where it is scored")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="runs/crossover", help="the rehearsal's runs and crossover.json")
    args = parser.parse_args(argv)
    for path in (args.data, args.heldout):
        if not Path(path).is_file():
            parser.error(f"{path} does not exist or is not a file")
    if min(args.heldout_chars, args.nll_chars, args.unique_chars) < 1 or args.val_chars < 0 or min(args.epochs) <= 0:
        parser.error("--heldout-chars, --nll-chars, --unique-chars and --epochs must be above 0, --val-chars >= 0")
    torch.set_num_threads(args.threads)
    val = split_text(read_texts([Path(args.data)]))[1]
    val = val[: args.val_chars] if args.val_chars else val
    heldout = held_out_text(Path(args.heldout), args.heldout_chars)
    try:
        rows = saved_rows(args, val, heldout) if args.models else rehearse(args, val, heldout)
    except ValueError as error:
        sys.exit(f"error: {error}")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "crossover.json").write_text(json.dumps(rows, indent=2))
    print(table(rows))
    return rows


if __name__ == "__main__":
    main()
