"""Turn a training run into the directory a Hub repo holds, and optionally upload it.

    python -m training.export --run-dir runs/shakespeare --export-dir pretrained/mdlm-shakespeare-char \\
        --data ../shared/data/tinyshakespeare.txt [--push-to-hub user/mdlm-shakespeare-char]

The export holds the weights and config, a model card with measured metrics (training/card.py, or for an
autoregressive twin mdlm_hf/twin_card.md), its figures, metrics.json, words.txt (the app's word list), demo.json (the
app's subject, prompt and examples), casts.json (each play's speakers), the images the --recipe links and
.mdlm_export.json, the list of its files. It is written beside the directory and swapped in (training/export_dir.py),
so the directory must be new, empty or an earlier export. --data must be the text the run trained on (its
tokens.json records the hash); --other-data measures the card's metrics on another text.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

from safetensors import SafetensorError

from mdlm_hf import MDLM
from mdlm_hf.devices import DEVICE_HELP, choose_device, device_problem
from mdlm_hf.objectives import objective_of
from mdlm_hf.plots import accuracy_figure
from training.card import TrainingData, demo_metadata, describe_training_data, model_card_details, training_stages
from training.casts import training_casts, write_casts
from training.checkpoints import RunError, build_model, load_checkpoint, prepare_dir
from training.corpus import SEPARATOR, read_texts, scan_text, split_text, texts_trained_on
from training.evaluate import evaluate_model
from training.export_dir import check_export_dir, staged
from training.flags import CARD_FLAGS, FLAGS_BY_NAME, add_flags
from training.plots import training_curve_figure
from training.push_to_hub import push_to_hub
from training.run_options import push_problem
from training.weights import BF16_TOLERANCE, ELBO_SAMPLES, WEIGHTS_DTYPES, choose_weights, write_weights
from training.words import save_word_list

EXPORT_FILES = (
    "README.md",
    "accuracy_vs_mask_ratio.png",
    "casts.json",
    "config.json",
    "demo.json",
    "metrics.json",
    "model.safetensors",
    "training_curve.png",
    "words.txt",
    ".mdlm_export.json",
)


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp")  # what a recipe may attach


def recipe_with_images(recipe_path: Path, image_root: Path | None = None) -> tuple[str, list[Path]]:
    """The recipe's markdown with its local image links pointing at the export's copies (`results/plot.png` becomes
    `plot.png`, beside the card), and those images. Only images by a relative path, beside or below `image_root`
    (default: the recipe's directory) are attached, as the export may go public; any other local link is a ValueError.
    """
    recipe_path = Path(recipe_path)
    root = Path(image_root if image_root is not None else recipe_path.parent).resolve()
    try:
        notes = recipe_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise ValueError(f"--recipe {recipe_path}: not a UTF-8 text file this program can read ({reason})") from None
    images: dict[str, Path] = {}

    def relink(match: re.Match) -> str:
        alt, target = match.group(1), match.group(2)
        if "://" in target:
            return match.group(0)
        image = (recipe_path.parent / target).resolve()  # symbolic links followed: where the bytes really are
        if Path(target).is_absolute() or target.startswith("~"):
            raise ValueError(f"{recipe_path} links to {target}: only images by a relative path are attached")
        if Path(target).suffix.lower() not in IMAGE_SUFFIXES or image.suffix.lower() not in IMAGE_SUFFIXES:
            raise ValueError(f"{recipe_path} links to {target}: only images ({', '.join(IMAGE_SUFFIXES)}) are attached")
        if not image.is_relative_to(root):
            raise ValueError(
                f"{recipe_path} links to {target}, outside {root}: only images beside or below it are attached "
                "(python -m training.export --recipe-root widens that)"
            )
        if not image.is_file():
            raise ValueError(f"{recipe_path} links to {target}, which does not exist")
        if image.name in EXPORT_FILES or images.get(image.name, image) != image:
            raise ValueError(f"{recipe_path}: image name {image.name!r} clashes with another file of the export")
        images[image.name] = image
        return f"![{alt}]({image.name})"

    return re.sub(r"!\[([^\]]*)\]\(([^)\s]+)\)", relink, notes), list(images.values())


def export_model(
    model: MDLM,
    export_dir: Path,
    train_text: str,
    val_text: str,
    run: dict,
    data: TrainingData,
    casts: dict,
    recipe: tuple[str, Iterable[Path]] = ("", ()),
    weights_dtype: str = "auto",
    repo_id: str | None = None,
) -> dict:
    """Writes the Hub-ready directory for `model` (staged, then swapped in); returns the evaluation report. `recipe`:
    the card's recipe notes and the images they link (`recipe_with_images`); `repo_id`: where it will be pushed."""
    if weights_dtype == "auto":
        score = objective_of(model).score_label
        print(f"export: measuring the validation {score} of fp32 and bf16 weights...", flush=True)
    model, weights_facts, score = choose_weights(model, val_text, weights_dtype)
    # what the shipped weights score (their validation score, with the same masks, was measured by the choice)
    print(f"export: evaluating the {weights_facts['weights_dtype']} weights for the model card...", flush=True)
    report = {**evaluate_model(model, val_text, ELBO_SAMPLES, score=score, progress=True), **weights_facts}
    print(f"export: writing {export_dir}...", flush=True)
    model = model.cpu()  # the files are written from host memory, wherever the evaluation ran
    name = repo_id.split("/")[-1] if repo_id else export_dir.name
    card = model_card_details(model, report, run, recipe[0], data=data, repo_id=repo_id, model_name=name)
    try:
        with staged(export_dir) as staging:
            model.save_pretrained(staging, model_card_kwargs=card)
            write_weights(model, staging, report["weights_dtype"])
            left_out = save_word_list(train_text, staging / "words.txt")
            print(f"export: words.txt leaves out {left_out} words: stray letters, a foreign passage's (training.words)")
            write_casts(casts, staging / "casts.json")
            demo = json.dumps(demo_metadata(model, data, val_text), indent=2, ensure_ascii=False)
            (staging / "demo.json").write_text(demo, encoding="utf-8")
            write_figures(model, report, run.get("history", {}), recipe[1], staging)
            facts = {k: run.get(k) for k in ("step", "tokens_seen", "wall_time")}
            facts["stages"] = training_stages(run, data)  # the lineage a later --init-from of this export extends
            (staging / "metrics.json").write_text(json.dumps({**report, "training": facts}, indent=2))
    except (OSError, SafetensorError) as error:  # a full disk, a file size limit: one line, nothing half-written
        reason = getattr(error, "strerror", None) or str(error)
        raise ValueError(f"could not write the export beside {export_dir} ({reason}); it was left as it was") from None
    return report


def write_figures(model: MDLM, report: dict, history: dict, attachments: Iterable[Path], staging: Path) -> None:
    """The card's figures (accuracy by mask ratio, a diffusion model's; the training curve) and the recipe's images."""
    if "accuracy_by_mask_ratio" in report:  # a diffusion model's
        accuracy_figure(report["accuracy_by_mask_ratio"]).savefig(staging / "accuracy_vs_mask_ratio.png", dpi=120)
    training_curve_figure(history, objective_of(model).score_label).savefig(staging / "training_curve.png", dpi=120)
    for attachment in attachments:  # the images the card's recipe section shows
        shutil.copyfile(attachment, staging / Path(attachment).name)


def export_run(
    run_dir: Path,
    export_dir: Path,
    data_path: Path | str | Iterable[Path | str],
    push_to_hub_repo: str | None = None,
    recipe_path: Path | None = None,
    weights_dtype: str = "auto",
    private: bool = False,
    recipe_root: Path | None = None,
    dataset_name: str | None = None,
    license: str | None = None,
    language: str | None = None,
    train_extra: Iterable[Path | str] = (),
    device: str = "cpu",
    other_data: bool = False,
) -> dict:
    """Exports the best checkpoint of a run (the latest if none was kept) and optionally uploads it. `data_path`:
    the training text, or its files in training's order; `train_extra`: the files that joined the training split
    only; `other_data`: the text may be one the run did not train on. The rest are python -m training.export's flags."""
    run_dir, export_dir = Path(run_dir), Path(os.path.abspath(export_dir))
    check_export_dir(export_dir, run_dir)
    run, model = load_run(run_dir)
    data_paths = [data_path] if isinstance(data_path, (str, Path)) else list(data_path)
    extra_paths = list(train_extra)
    if not other_data:
        check_run_text(run_dir, data_paths, extra_paths)
    train_text, val_text, data = run_texts(model, data_paths, extra_paths, dataset_name, license, language)
    casts = training_casts(data_paths, extra_paths)
    recipe = recipe_with_images(recipe_path, recipe_root) if recipe_path else ("", [])
    prepare_dir(export_dir.parent, "--export-dir's parent")
    model = model.to(device)
    report = export_model(
        model, export_dir, train_text, val_text, run, data, casts, recipe, weights_dtype, push_to_hub_repo
    )
    label, nats = objective_of(model).score_label, report[f"val_{objective_of(model).score}_nats_per_char"]
    print(f"exported to {export_dir}: validation {label} {nats:.4f} nats/char")
    if push_to_hub_repo:
        print(f"pushed: {push_to_hub(export_dir, push_to_hub_repo, private=private)}")
    return report


def run_texts(
    model: MDLM,
    data_paths: list[Path | str],
    extra_paths: list[Path | str],
    dataset_name: str | None = None,
    license: str | None = None,
    language: str | None = None,
) -> tuple[str, str, TrainingData]:
    """The training text (the split's training part, then the extra files), the validation text, and what the card
    says of them (`describe_training_data`: the dataset's name, license and language, None for its defaults)."""
    train_text, val_text = split_text(read_texts(data_paths))
    extra_text = read_texts(extra_paths) if extra_paths else ""
    split_name, extra_name = (" + ".join(Path(p).stem for p in paths) for paths in (data_paths, extra_paths))
    file_names = " + ".join(name for name in (split_name, extra_name) if name)
    extra = {"extra_chars": len(extra_text), "extra_name": extra_name, "split_name": split_name}
    data = describe_training_data(model, train_text, val_text, dataset_name, license, language, file_names, **extra)
    if extra_paths:
        train_text += SEPARATOR + extra_text
    return train_text, val_text, data


def load_run(run_dir: Path) -> tuple[dict, MDLM]:
    """The run's latest checkpoint (its counters and history) and the model of its best one (else the latest)."""
    latest = run_dir / "ckpt.pt"
    if not latest.is_file():
        raise ValueError(f"{run_dir} has no ckpt.pt: is it a training run's --out-dir?")
    run = load_checkpoint(latest)
    best_path = run_dir / "best.pt"
    model = build_model(load_checkpoint(best_path), best_path) if best_path.is_file() else build_model(run, latest)
    return run, model


def check_run_text(run_dir: Path, data_paths: list[Path | str], extra_paths: list[Path | str]) -> None:
    """A ValueError when --data (with --train-extra) is not a text the run trained on, by the hashes its tokens.json
    records: the card's metrics would come from text the run never saw. A run without tokens.json is not checked."""
    trained = texts_trained_on(run_dir)
    if not trained:
        return
    given = (scan_text(data_paths).sha256, scan_text(extra_paths).sha256 if extra_paths else None)
    if given in {(record["sha256"], record["train_extra_sha256"]) for record in trained}:
        return
    files = trained[0]["files"] if isinstance(trained[0]["files"], list) else []
    named = ", ".join(map(str, files)) or "(unnamed)"
    extra = " with --train-extra" if trained[0]["train_extra_sha256"] else ""
    typed = " ".join(map(str, data_paths))
    if extra_paths:
        typed += f" --train-extra {' '.join(map(str, extra_paths))}"
    raise ValueError(
        f"--data {typed} is not the text the run trained on ({named}{extra}), so the card's metrics would describe "
        "text it never saw: give the run's own files in its order, or pass --other-data to export on this text anyway"
    )


def build_parser() -> argparse.ArgumentParser:
    """The command line's flags, with the module's docstring as its help."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--export-dir", required=True)
    parser.add_argument(
        "--data",
        required=True,
        nargs="+",
        metavar="FILE",
        help="the training text, or its files in the order training was given them (for the validation split and "
        "word list)",
    )
    parser.add_argument(
        "--train-extra", nargs="+", default=[], metavar="FILE", help="the files training's --train-extra named"
    )
    parser.add_argument(
        "--other-data",
        action="store_true",
        help="measure the card's metrics on --data even though it is not the text the run trained on",
    )
    parser.add_argument("--device", default="cpu", help=f"where the evaluation runs: {DEVICE_HELP}")
    add_flags(parser, (FLAGS_BY_NAME["push_to_hub"], *CARD_FLAGS))
    parser.add_argument(
        "--recipe",
        default=None,
        help="markdown file with the recipe and ablations, appended to the card; the images it links by a relative "
        "path beside or below --recipe-root are copied beside the card",
    )
    parser.add_argument(
        "--recipe-root",
        default=None,
        help="the directory the recipe's images may come from (default: the recipe's own directory)",
    )
    parser.add_argument(
        "--weights-dtype",
        choices=WEIGHTS_DTYPES,
        default="auto",
        help=f"auto: bf16 tensors (half the size) when they cost <= {BF16_TOLERANCE} nats/char of validation NELBO",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    """`python -m training.export`: the flags checked before any work, then the export, its failures as one line."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.recipe_root and not args.recipe:
        parser.error("--recipe-root needs --recipe")
    if problem := push_problem(args.push_to_hub, args.private) or device_problem(args.device):
        parser.error(problem)
    try:
        export_run(
            Path(args.run_dir),
            Path(args.export_dir),
            [Path(name) for name in args.data],
            args.push_to_hub,
            args.recipe,
            args.weights_dtype,
            recipe_root=args.recipe_root,
            train_extra=[Path(name) for name in args.train_extra],
            device=str(choose_device(args.device)),
            other_data=args.other_data,
            **{f.name: getattr(args, f.name) for f in CARD_FLAGS},  # --private and what the card says
        )
    except (ValueError, RunError) as error:  # bad input, no network or credentials: one line, no traceback
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    main()
