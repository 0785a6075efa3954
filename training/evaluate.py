"""Evaluate a trained model as its objective measures it (mdlm_hf/objectives.py): a diffusion model's validation
ELBO, exact NLL, masked-token accuracy by mask ratio and samples; an autoregressive twin's exact NLL and samples.

python -m training.evaluate --model pretrained/mdlm-shakespeare-char --data ../shared/data/tinyshakespeare.txt
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import sys
import tempfile
from pathlib import Path

import torch

from mdlm_hf import MDLM
from mdlm_hf.devices import DEVICE_HELP, choose_device, device_problem
from mdlm_hf.objectives import objective_of
from mdlm_hf.plots import accuracy_figure
from training.atomic import atomic_write_bytes
from training.corpus import read_texts, split_text

NLL_BATCH = 64  # windows (a twin) or canvases (a diffusion model's reveal chain) a pass of the exact NLL reads
SAMPLE_TEXTS = 3  # the texts a report samples for the card


def evaluate_model(
    model: MDLM,
    val_text: str,
    num_samples: int = 4,
    nll_chars: int = 16384,
    progress: bool = False,
    score: float | None = None,
) -> dict:
    """The model's report, as its objective measures it: its validation score over the whole split (a diffusion
    model's NELBO with `num_samples` mask draws per window, a twin's exact NLL), the exact NLL of its first
    `nll_chars` in each order the objective takes, the objective's figures, and samples. `score`: the validation
    score where the caller measured it already (the same masks); `progress`: a line as each phase starts."""

    def phase(line: str) -> None:
        if progress:
            print(f"evaluate: {line}...", flush=True)

    objective = objective_of(model)
    tokens = torch.tensor(model.tokenizer.encode(val_text), dtype=torch.long)
    if score is None:
        phase(f"validation {objective.score_label} over {tokens.numel():,} characters")
        score = objective.validation_nats(model, tokens, num_samples, torch.Generator().manual_seed(0))
    nll_tokens = tokens[:nll_chars]
    orders = objective.nll_orders if nll_chars else ()
    if orders:
        phase(f"exact NLL over {nll_tokens.numel():,} characters in {len(orders)} order(s)")
    nll = {order: objective.exact_nll(model, nll_tokens, order, NLL_BATCH, progress) for order in orders}
    phase("its objective's own figures (a diffusion model's: masked-token accuracy by mask ratio)")
    figures = objective.figures(model, tokens, num_samples, 0)  # seed 0, as every draw of the report
    length = min(256, model.block_size)
    phase(f"sampling {SAMPLE_TEXTS} texts of {length} characters")
    return {
        f"val_{objective.score}_nats_per_char": score,
        f"val_{objective.score}_bits_per_char": score / math.log(2),
        "val_chars": tokens.numel(),
        "exact_nll_nats_per_char": nll,
        "exact_nll_chars": nll_tokens.numel() if nll_chars else 0,
        **figures,
        **draw_samples(model),
    }


def draw_samples(model: MDLM, num_texts: int = SAMPLE_TEXTS, seed: int = 0) -> dict:
    """The card's samples with the default sampler (an autoregressive twin's own: left to right, temperature 1),
    without a play's rules, which read the export's own files (so the export and a redraw from its folder agree):
    {"samples": texts, "sampling": their length and options}."""
    length = min(256, model.block_size)
    objective = objective_of(model)
    defaults = objective.default_options()
    sampling = {name: getattr(defaults, name) for name in objective.recorded_options}
    rules_off = dict(real_words=False, keep_cast=False)
    texts = [model.generate(length, seed=seed + i, **sampling, **rules_off) for i in range(num_texts)]
    return {"samples": texts, "sampling": {"length": length, **sampling}}


def out_problem(out: Path) -> str | None:
    """Why metrics could not be written under `out`, found by making it and a file in it, then removing what was
    made (a failed run leaves no empty folder; asking os.access passed /proc, whose folders cannot be made)."""
    existing = out.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"--out {out} is not a directory this program can write to ({existing} is a file)"
    made = [folder for folder in [out.absolute(), *out.absolute().parents] if not folder.exists()]
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as error:
        return f"--out {out} is not a directory this program can write to ({error.strerror or error})"
    finally:
        for folder in made:  # deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()
    return None


def main(argv: list[str] | None = None) -> dict:
    """`python -m training.evaluate`: measures a saved model on its text's validation split; returns the report."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="local directory or Hub repo id")
    parser.add_argument(
        "--data",
        required=True,
        nargs="+",
        metavar="FILE",
        help="the text the model was trained on (its files in the order training was given them); "
        "its last 10 %% is evaluated",
    )
    parser.add_argument("--num-samples", type=int, default=4, help="mask draws per validation window")
    parser.add_argument(
        "--nll-chars",
        type=int,
        default=16384,
        help="validation characters for the exact NLL (one forward pass each, per order); 0: skip",
    )
    parser.add_argument("--out", default=None, help="directory for metrics.json and the accuracy plot")
    parser.add_argument("--device", default="cpu", help=f"{DEVICE_HELP} (off the CPU: the exact fp32 weights)")
    args = parser.parse_args(argv)
    if args.num_samples < 1 or args.nll_chars < 0:
        parser.error("--num-samples must be >= 1 and --nll-chars >= 0")
    if problem := device_problem(args.device):
        parser.error(problem)
    if args.out is not None:  # refused now, not after the evaluation (an empty one wrote nothing, and said nothing)
        if not args.out.strip():
            parser.error("--out is empty: give a directory")
        if problem := out_problem(Path(args.out)):
            parser.error(problem)
    device = choose_device(args.device)
    print(f"evaluate: loading {args.model} and the validation split of {' '.join(args.data)}...", flush=True)
    # the fast path's bf16 copy is a CPU choice; elsewhere the weights as saved
    model = MDLM.from_pretrained(args.model, **({} if device.type == "cpu" else {"fast": False})).to(device)
    objective = objective_of(model)
    if "eval_samples" not in objective.settings and args.num_samples != 4:
        parser.error(
            f"--num-samples draws masks for the ELBO; the {objective.score_label} of {objective.title} draws none"
        )
    _, val_text = split_text(read_texts(args.data))
    report = evaluate_model(model, val_text, args.num_samples, nll_chars=args.nll_chars, progress=True)
    print_report(report, objective.score, objective.score_label)
    if args.out:
        write_report(Path(args.out), report)
    return report


def write_report(out: Path, report: dict) -> None:
    """Writes metrics.json and a diffusion model's accuracy plot under `out`, each whole or not at all; where that
    fails (a full disk) removes what this call created, and `out` where it made it, keeps an earlier report's files
    as they were, and exits with one line naming the file."""
    made, created = not out.exists(), []
    target = out / "metrics.json"
    try:
        out.mkdir(parents=True, exist_ok=True)
        files = {target: json.dumps(report, indent=2).encode()}
        if "accuracy_by_mask_ratio" in report:  # a diffusion model's
            figure = io.BytesIO()
            accuracy_figure(report["accuracy_by_mask_ratio"]).savefig(figure, dpi=120, format="png")
            files[out / "accuracy_vs_mask_ratio.png"] = figure.getvalue()
        for target, payload in files.items():
            new = not target.exists()
            atomic_write_bytes(target, payload)
            created += [target] if new else []
    except OSError as error:
        for path in created:
            path.unlink(missing_ok=True)
        if made:
            with contextlib.suppress(OSError):
                out.rmdir()
        kept = "nothing was left in" if made else "the files there before were left as they were in"
        sys.exit(f"error: could not write {target} ({error.strerror or error}); {kept} {out}")


def print_report(report: dict, score: str, label: str) -> None:
    """The report's figures and samples, as the command line shows them: its validation `score` ("nelbo", "nll")
    under its `label`."""
    key = f"val_{score}"
    print(
        f"validation {label}: {report[key + '_nats_per_char']:.4f} nats/char, "
        f"{report[key + '_bits_per_char']:.4f} bits/char over {report['val_chars']:,} chars"
    )
    for order, nats in report["exact_nll_nats_per_char"].items():
        print(f"exact NLL, {order} order: {nats:.4f} nats/char over the first {report['exact_nll_chars']:,} chars")
    if "accuracy_by_mask_ratio" in report:  # a diffusion model's
        print("mask ratio | accuracy")
        for ratio, accuracy in report["accuracy_by_mask_ratio"]:
            print(f"{ratio:10.1f} | {accuracy:.3f}")
    for i, text in enumerate(report["samples"]):
        print(f"--- sample {i} ---\n{text}")


if __name__ == "__main__":
    try:
        main()
    except (ValueError, OSError) as error:  # a missing or malformed model or text, an unreachable Hub: one line
        sys.exit(f"error: {error}")
