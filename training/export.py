"""Turn a training run into the directory a Hub repo holds, and optionally upload it.

    python -m training.export --run-dir runs/shakespeare --export-dir pretrained/mdlm-shakespeare-char \\
        --data ../shared/data/tinyshakespeare.txt [--push-to-hub user/mdlm-shakespeare-char]

The export holds model.safetensors, config.json, a model card README.md with measured metrics,
training_curve.png, accuracy_vs_mask_ratio.png, metrics.json, words.txt (the training split's
word list, used by the app's valid-word metric) and demo.json (the app's title subject, prompt, infill
examples and sample text for this model), plus the images beside or below the --recipe
markdown that it links, and .mdlm_export.json, the list of the files it wrote. It is written to a temporary
directory and then swapped in, so an interrupted export never leaves a half-written model behind. The swap
replaces the export directory, so that must be new, empty or an earlier export holding only the files its
list names; anything else is refused. --data must be the text the run trained on (its tokens.json records
the text's hash); --other-data measures the card's metrics on another text. words.txt holds every word of
the training text: --private keeps the pushed repo private.

The card describes the run's own data: --dataset-name, its size, --license and --language in the front
matter (omitted when not given), the measured validation NELBO as a model-index entry, a usage example
whose prompt and infill template come from the validation text, and the repo id when pushed. Lines
about Shakespeare, and `datasets: karpathy/tiny_shakespeare`, language en and license mit (unless given),
appear only when the text is TinyShakespeare (recognised by its md5).

An autoregressive twin's run (training.train --objective ar) exports the same way, with its own card
(mdlm_hf/twin_card.md): its exact validation NLL where the diffusion model's card has the NELBO, and no
accuracy_vs_mask_ratio.png.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch
from huggingface_hub import EvalResult

from mdlm_hf import MDLM, ElboResult, elbo
from mdlm_hf.autoregressive import autoregressive_nll
from mdlm_hf.data import TINYSHAKESPEARE_MD5, TRAIN_FRACTION, atomic_write_bytes, split_text
from mdlm_hf.devices import DEVICE_HELP, choose_device, device_problem
from mdlm_hf.metrics import save_word_list
from training.checkpoints import RunError, build_model, load_checkpoint, prepare_dir
from training.corpus import SEPARATOR, read_texts, scan_text, texts_trained_on
from training.evaluate import evaluate_model, plot_accuracy
from training.plots import training_curve_figure
from training.run_options import DIFFUSION_ONLY, add_card_arguments, check_license, repo_id_problem

WEIGHTS_DTYPES = ("auto", "float32", "bfloat16")
ELBO_SAMPLES = 4  # mask draws per validation window in the exported metrics
BF16_TOLERANCE = 0.003  # nats/char a bf16 weights file may cost on the validation split; beyond it ship fp32

EXPORT_FILES = (
    "README.md",
    "accuracy_vs_mask_ratio.png",
    "config.json",
    "demo.json",
    "metrics.json",
    "model.safetensors",
    "training_curve.png",
    "words.txt",
    ".mdlm_export.json",
)
MANIFEST = ".mdlm_export.json"  # the export's list of the files it wrote, which the next export may replace
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp")  # what a recipe may attach
TINYSHAKESPEARE_HUB_ID = "karpathy/tiny_shakespeare"
SHAKESPEARE_USAGE = ("ROMEO:\n", "To be, or not to be, ________ is the question:")  # the card's prompt and infill
SPEAKER_LINE = re.compile(r"[^\W\d_][^:]{0,30}:")  # "ROMEO:", "First Citizen:": a prompt a play would continue
PROMPT_CHARS = 40  # the longest prompt the usage example takes from the text
INFILL_CHARS = 80  # the longest line it blanks a word of
DEMO_SAMPLE_CHARS = 1000  # the app's sample text: its first line is the forward process's, all of it the plot's


def check_export_dir(export_dir: Path, run_dir: Path | None = None) -> None:
    """Refuses an export directory that the export's swap would destroy: anything but a new directory, an empty
    one or an earlier export whose every file its manifest (.mdlm_export.json) lists; and a `.NAME.old` beside it
    that is not an earlier export (the swap's backup name)."""
    export_dir = Path(os.path.abspath(export_dir))
    if run_dir is not None:
        run_dir = Path(os.path.abspath(run_dir))
        if export_dir == run_dir or export_dir in run_dir.parents:
            raise ValueError(
                f"--export-dir {export_dir} is the run's directory or holds it: the export replaces its directory, "
                "so give it one of its own (e.g. a new one inside the run's)"
            )
    if export_dir.is_symlink() or (export_dir.exists() and not export_dir.is_dir()):
        raise ValueError(f"--export-dir {export_dir} exists and is not a directory; give a new directory")
    backup = backup_path(export_dir)
    if (backup.exists() or backup.is_symlink()) and foreign_entries(backup) != []:
        raise ValueError(
            f"{backup} is in the way: the export uses that name while it swaps {export_dir.name} in, and it is not "
            "an earlier export; move it elsewhere"
        )
    if not export_dir.exists():
        return
    foreign = foreign_entries(export_dir)
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise ValueError(
            f"--export-dir {export_dir} is not empty and not an earlier export ({shown}); the export replaces only "
            f"the files it wrote itself (those its {MANIFEST} lists), so give a new directory"
        )


def foreign_entries(directory: Path) -> list[str] | None:
    """The entries of `directory` an export did not write (its manifest does not list them), sorted; None when
    `directory` is not a directory at all."""
    if directory.is_symlink() or not directory.is_dir():
        return None
    own = manifest_files(directory)
    return sorted(
        entry.name + ("/" if entry.is_dir() else "")
        for entry in directory.iterdir()
        if entry.is_symlink() or not entry.is_file() or (entry.name not in own and entry.name != MANIFEST)
    )


def manifest_files(directory: Path) -> set[str]:
    """The file names an earlier export's manifest lists (none if it has no readable manifest)."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list):
        return set()
    return {name for name in files if isinstance(name, str) and name and Path(name).name == name}


def write_manifest(staging: Path) -> None:
    """Lists the files the export wrote, so that the next export into the directory replaces those and no other."""
    files = sorted(entry.name for entry in staging.iterdir())
    payload = {"written_by": "python -m training.export", "files": files}
    (staging / MANIFEST).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def backup_path(export_dir: Path) -> Path:
    """Where the swap keeps the previous export until the new one is in place."""
    return export_dir.with_name(f".{export_dir.name}.old")


def current_umask() -> int:
    """The process's umask (read by setting it, then setting it back)."""
    umask = os.umask(0)
    os.umask(umask)
    return umask


def apply_umask(staging: Path) -> None:
    """Gives the staging directory and its files the modes the umask gives (mkdtemp's is 0700, mkstemp's 0600)."""
    umask = current_umask()
    for entry in staging.iterdir():
        entry.chmod(0o666 & ~umask)
    staging.chmod(0o777 & ~umask)


def replace_directory(staging: Path, export_dir: Path) -> None:
    """Swaps the finished staging directory in for `export_dir` (an earlier export, which is deleted).

    A swap killed half-way leaves `.NAME.old` beside it: the previous export, which the next swap removes
    (when NAME is missing, the kill came between the two renames, and `.NAME.old` is all that was there).
    Anything else by that name is a user's, and is refused rather than deleted.
    """
    old = backup_path(export_dir)
    if old.exists() or old.is_symlink():
        if foreign_entries(old) != []:
            raise ValueError(f"{old} is in the way and is not an earlier export; move it elsewhere")
        shutil.rmtree(old)
    if export_dir.exists():
        export_dir.rename(old)
    staging.rename(export_dir)
    shutil.rmtree(old, ignore_errors=True)


@dataclass(frozen=True)
class TrainingData:
    """What the model card says of the training text, and the terms the run gives its model (None: not stated)."""

    name: str
    chars: int
    val_chars: int
    tinyshakespeare: bool = False
    hub_id: str | None = None  # the Hub dataset it is
    license: str | None = None
    language: str | None = None
    prompt: str = SHAKESPEARE_USAGE[0]  # the usage example's
    infill: str | None = SHAKESPEARE_USAGE[1]  # None: the example has no infill line


def describe_training_data(
    model: MDLM,
    train_text: str,
    val_text: str,
    name: str | None = None,
    license: str | None = None,
    language: str | None = None,
    default_name: str = "its training text",
) -> TrainingData:
    """The card's facts of the text: TinyShakespeare (by md5) gets its name, Hub id, license mit and language en
    unless given; any other text its `name` (else `default_name`), the given terms only, and usage examples drawn
    from its validation split."""
    if license is not None:
        check_license(license)
    text_md5 = hashlib.md5((train_text + val_text).encode("utf-8")).hexdigest()
    size = {"chars": len(train_text) + len(val_text), "val_chars": len(val_text)}
    terms = {"license": license, "language": language}
    if text_md5 == TINYSHAKESPEARE_MD5:
        terms = {"license": license or "mit", "language": language or "en"}
        return TrainingData(
            name or "TinyShakespeare", tinyshakespeare=True, hub_id=TINYSHAKESPEARE_HUB_ID, **size, **terms
        )
    prompt, infill = usage_examples(model, val_text)
    return TrainingData(name or default_name, prompt=prompt, infill=infill, **size, **terms)


def usage_examples(model: MDLM, val_text: str) -> tuple[str, str | None]:
    """A prompt and an infill template from the validation text, in the model's characters: the first speaker-like
    line ("NAME:") of its first 200 lines, else the first words of its first line; and its first line of 3 or more
    words with the middle word blanked (None if it has none). Its first line, perhaps cut by the split, is skipped.
    """
    longest_prompt = max(1, min(PROMPT_CHARS, model.block_size // 2))
    lines = [line.strip() for line in val_text.split("\n")[1:]] or [val_text.strip()]
    lines = [line for line in lines if line and not model.tokenizer.unknown_chars(line)]
    speaker = next((line for line in lines[:200] if len(line) < longest_prompt and SPEAKER_LINE.fullmatch(line)), None)
    if speaker:
        prompt = speaker + "\n"
    elif lines and len(lines[0]) < longest_prompt:
        prompt = lines[0] + "\n"
    elif lines:
        cut = lines[0][:longest_prompt]
        prompt = cut.rsplit(" ", 1)[0] if " " in cut.strip() else cut
    else:
        prompt = ""
    infill = None
    for line in lines:
        words = list(re.finditer(r"\S+", line))
        if len(words) >= 3 and "_" not in line and len(line) <= min(INFILL_CHARS, model.block_size):
            middle = words[len(words) // 2]
            infill = line[: middle.start()] + "_" * len(middle.group()) + line[middle.end() :]
            break
    return prompt, infill


def demo_metadata(model: MDLM, data: TrainingData, val_text: str) -> dict:
    """What the app (app.py) shows for the model, saved as demo.json: its subject, default prompt and infill
    examples (each "_" a blank) and a sample text from the validation split; TinyShakespeare's are the app's own
    (Shakespeare's), so its demo.json names only the subject."""
    if data.tinyshakespeare:
        return {"subject": "Shakespeare"}
    lines = [line for line in val_text.split("\n")[1:] if line.strip() and not model.tokenizer.unknown_chars(line)]
    sample = "\n".join(lines)[:DEMO_SAMPLE_CHARS]
    metadata = {"prompt": data.prompt, "examples": [data.infill] if data.infill else []}
    if data.name != "its training text":  # describe_training_data's stand-in for no name
        metadata["subject"] = data.name
    if sample:
        metadata |= {"sample": sample, "sample_name": f"the validation text of {data.name} (unseen in training)"}
    return metadata


def python_string(text: str) -> str:
    """`text` as a double-quoted Python string literal (JSON's escapes are Python's)."""
    return json.dumps(text, ensure_ascii=False)


def character_count(chars: int) -> str:
    return f"about {chars / 1e6:.1f} million characters" if chars >= 10**6 else f"{chars:,} characters"


def samples_section(report: dict) -> str:
    """The card's Samples section: its heading (length and sampling options) and each sample in a code block."""
    options = ", ".join(f"{name} {value}" for name, value in report["sampling"].items() if name != "length")
    samples = "\n\n".join(f"```\n{t}\n```" for t in report["samples"])
    return f"## Samples ({report['sampling']['length']} characters; sampling options: {options})\n\n{samples}\n"


# the autoregressive reference the card names beside a TinyShakespeare model's exact NLL: nanoGPT's character
# model (github.com/karpathy/nanoGPT, shakespeare_char), its validation loss on the same split
NANOGPT_REFERENCE = {"name": "nanoGPT's autoregressive character model", "nats": 1.47}
# the run's settings the card's recipe line names, in this order
RECIPE_KEYS = (
    "n_layer n_head n_embd block_size dropout position_encoding norm mlp qk_norm zero_init_residual batch_size "
    "max_steps optimizer lr min_lr muon_lr muon_weight_decay warmup_steps weight_decay beta2 grad_clip ema "
    "objective loss_weighting t_min stream_masks"
).split()


def model_card_details(
    model: MDLM,
    report: dict,
    run: dict,
    recipe_notes: str = "",
    *,
    data: TrainingData,
    repo_id: str | None = None,
    model_name: str = "mdlm_hf",
) -> dict:
    """Values for the model card template (mdlm_hf/model_card.md): front matter, usage example, and the measured
    figures of `report` (metrics.json) and `run` (the checkpoint) that its sections show. `data`: the training
    text's facts; `repo_id`: where it is pushed (None: not yet); `model_name`: the model-index entry's name."""
    block = model.block_size
    prompt = data.prompt[: block - 1]
    kind = "a masked diffusion language model"
    if model.causal:
        kind = f"the autoregressive twin of {kind}"
    return {
        "title": f"mdlm_hf: {kind} of {'Shakespeare' if data.tinyshakespeare else data.name}, character by character",
        "card_data": card_front_matter(report, data, model_name),
        "repo_id": repo_id,
        "prompt": python_string(prompt) if prompt else "",
        "infill": python_string(data.infill) if data.infill and len(data.infill) <= block else "",
        "generate_length": min(256, block),
        "complete_length": min(200, block - len(prompt)),
        "block_size": block,
        "validation_percent": round(100 * (1 - TRAIN_FRACTION)),
        "evaluation": evaluation_facts(report),
        "training": training_facts(model, report, run, data),
        "reference": NANOGPT_REFERENCE if data.tinyshakespeare else None,
        "recipe_notes": recipe_notes,
        "samples": samples_section(report),
    }


def evaluation_facts(report: dict) -> dict:
    """The card's Evaluation section from metrics.json: the validation score (a diffusion model's NELBO, mask draws
    and accuracy by mask ratio; a twin's exact NLL) and the exact NLL on the split's first characters."""
    exact_nll = [
        {"order": order.replace("_", "-"), "chars": report["exact_nll_chars"], "nats": nats}
        for order, nats in report.get("exact_nll_nats_per_char", {}).items()
    ]
    if "val_nll_nats_per_char" in report:  # an autoregressive twin
        nll = {"nll": report["val_nll_nats_per_char"], "nll_bits": report["val_nll_bits_per_char"]}
        return {"val_chars": report["val_chars"], **nll, "exact_nll": exact_nll}
    return {
        "val_chars": report["val_chars"],
        "nelbo": report["val_nelbo_nats_per_char"],
        "nelbo_bits": report["val_nelbo_bits_per_char"],
        "mask_draws": report["elbo_mask_samples_per_window"],
        "exact_nll": exact_nll,
        "accuracy": report["accuracy_by_mask_ratio"],
    }


def card_front_matter(report: dict, data: TrainingData, model_name: str) -> dict:
    """The card's front matter: the text's terms and the model-index entry of the validation NELBO (a twin's NLL)."""
    name = "nll" if "val_nll_nats_per_char" in report else "nelbo"
    nelbo = EvalResult(
        task_type="text-generation",
        task_name="Character-level language modelling",
        dataset_type=data.hub_id or data.name,
        dataset_name=data.name,
        metric_type=name,
        metric_name=f"validation {name.upper()}, last 10 % of the text (nats/char)",
        metric_value=round(report[f"val_{name}_nats_per_char"], 4),
    )
    datasets = [data.hub_id] if data.hub_id else None
    return {
        "license": data.license,
        "language": data.language,
        "datasets": datasets,
        "model_name": model_name,
        "eval_results": [nelbo],
    }


def training_facts(model: MDLM, report: dict, run: dict, data: TrainingData) -> dict:
    """The card's Training section and Limitations: the text, the weights, and the run's steps, time and recipe."""
    args, minutes = run.get("args", {}), run.get("wall_time", 0) / 60
    return {
        "data_name": data.name,
        "hub_id": data.hub_id,
        "chars": data.chars,
        "size_words": character_count(data.chars),
        "license": data.license,
        "tinyshakespeare": data.tinyshakespeare,
        "parameters": model.num_parameters(),
        "weights_dtype": report.get("weights_dtype", "float32"),
        "nelbo_bf16": report.get("nelbo_bfloat16_weights"),
        "nelbo_fp32": report.get("nelbo_float32_weights"),
        "nll_bf16": report.get("nll_bfloat16_weights"),
        "nll_fp32": report.get("nll_float32_weights"),
        "bf16_tolerance": BF16_TOLERANCE,
        "tokens_seen": run.get("tokens_seen", 0),
        "steps": run.get("step", 0),
        "minutes": minutes,
        "duration": f"{minutes:.1f} minutes" if minutes >= 1 else "under a minute",
        "hardware": run.get("hardware") or "an unrecorded machine",  # checkpoints from before the field
        "recipe": ", ".join(f"{k}={args[k]}" for k in RECIPE_KEYS if k in args and not unused_by_run(k, args)),
        "init_from": args.get("init_from"),
    }


def unused_by_run(key: str, args: dict) -> bool:
    """Whether a recipe setting did nothing in this run: the diffusion loss's own in an autoregressive run."""
    return args.get("objective") == "ar" and key in DIFFUSION_ONLY


def recipe_with_images(recipe_path: Path, image_root: Path | None = None) -> tuple[str, list[Path]]:
    """The recipe's markdown with local image links pointing at the export's copies, and those images.

    A link like `![plot](results/plot.png)` works when the recipe is read in the repository; in the
    Hub repo the image sits beside the card, so the link becomes `plot.png`. Only images (IMAGE_SUFFIXES)
    linked by a relative path, beside or below `image_root` (default: the recipe's directory), are copied,
    since the export may be pushed to a public repo; any other local link is a ValueError.
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


def bf16_rounded(model: MDLM) -> MDLM:
    """A copy whose parameters are what a bf16 weights file loads back as: rounded to bf16, upcast to fp32."""
    rounded = copy.deepcopy(model)  # keeps the embedding/output tie
    for p in rounded.parameters():
        p.data = p.data.to(torch.bfloat16).float()
    return rounded


def score_name(model: MDLM) -> str:
    """The validation score an export measures and its keys name: "nelbo", or an autoregressive twin's exact "nll"."""
    return "nll" if model.causal else "nelbo"


def choose_weights(model: MDLM, val_text: str, weights_dtype: str = "auto") -> tuple[MDLM, dict, ElboResult | None]:
    """The model to ship (as is, or bf16-rounded), the measurement behind the choice, and the shipped one's ELBO.

    "auto" compares the validation NELBO of both with the same masks (a paired difference, so the only
    change is the rounding) and takes bf16, half the download, when it costs at most BF16_TOLERANCE. An
    autoregressive twin's exact NLL is compared instead (and no ELBO is returned).
    """
    if weights_dtype not in WEIGHTS_DTYPES:
        raise ValueError(f"weights dtype must be one of {WEIGHTS_DTYPES}, got {weights_dtype!r}")
    if weights_dtype == "float32":
        return model, {"weights_dtype": weights_dtype}, None
    rounded = bf16_rounded(model)
    if weights_dtype == "bfloat16":
        return rounded, {"weights_dtype": weights_dtype}, None
    tokens = torch.tensor(model.tokenizer.encode(val_text), dtype=torch.long)
    candidates = (("float32", model), ("bfloat16", rounded))
    if model.causal:
        nats = {name: autoregressive_nll(candidate.eval(), tokens) for name, candidate in candidates}
        nelbo = None
    else:
        nelbo = {
            name: elbo(candidate.eval(), tokens, ELBO_SAMPLES, torch.Generator().manual_seed(0))
            for name, candidate in candidates
        }
        nats = {name: result.nats_per_char for name, result in nelbo.items()}
    chosen = "bfloat16" if nats["bfloat16"] - nats["float32"] <= BF16_TOLERANCE else "float32"
    facts = {"weights_dtype": chosen, **{f"{score_name(model)}_{name}_weights": v for name, v in nats.items()}}
    return (rounded if chosen == "bfloat16" else model), facts, None if nelbo is None else nelbo[chosen]


def write_weights(model: MDLM, directory: Path, weights_dtype: str) -> None:
    """Rewrites model.safetensors with bf16 tensors (from_pretrained upcasts them); fp32 stays as saved."""
    if weights_dtype == "bfloat16":
        import safetensors.torch

        half = copy.deepcopy(model).to(torch.bfloat16)
        safetensors.torch.save_model(half, str(directory / "model.safetensors"), metadata={"format": "pt"})


def export_model(
    model: MDLM,
    export_dir: Path,
    train_text: str,
    val_text: str,
    run: dict,
    history: dict,
    recipe_notes: str = "",
    attachments: Iterable[Path] = (),
    weights_dtype: str = "auto",
    data: TrainingData | None = None,
    repo_id: str | None = None,
) -> dict:
    """Writes the Hub-ready directory for `model` (atomically); returns the evaluation report.

    `export_dir` must be new, empty or an earlier export (check_export_dir): the export replaces it.
    `data`: what the card says of the text (default: `describe_training_data` of it, with no name or terms);
    `repo_id`: the Hub repo it will be pushed to, for the card's usage example and model-index.
    """
    export_dir = Path(os.path.abspath(export_dir))
    check_export_dir(export_dir)
    prepare_dir(export_dir.parent, "--export-dir's parent")
    if weights_dtype == "auto":
        score = "NLL" if model.causal else "ELBO"
        print(f"export: measuring the validation {score} of fp32 and bf16 weights...", flush=True)
    data = data if data is not None else describe_training_data(model, train_text, val_text)
    model, weights_facts, nelbo = choose_weights(model, val_text, weights_dtype)
    # what the shipped weights score (a diffusion model's ELBO, with the same masks, was measured by the choice)
    print(f"export: evaluating the {weights_facts['weights_dtype']} weights for the model card...", flush=True)
    report = {**evaluate_model(model, val_text, ELBO_SAMPLES, nelbo=nelbo, progress=True), **weights_facts}
    print(f"export: writing {export_dir}...", flush=True)
    model = model.cpu()  # the files are written from host memory, wherever the evaluation ran
    staging = Path(tempfile.mkdtemp(dir=export_dir.parent, prefix=f".{export_dir.name}."))
    try:
        name = repo_id.split("/")[-1] if repo_id else export_dir.name
        card = model_card_details(model, report, run, recipe_notes, data=data, repo_id=repo_id, model_name=name)
        model.save_pretrained(staging, model_card_kwargs=card)
        write_weights(model, staging, report["weights_dtype"])
        save_word_list(train_text, staging / "words.txt")
        demo = demo_metadata(model, data, val_text)
        (staging / "demo.json").write_text(json.dumps(demo, indent=2, ensure_ascii=False), encoding="utf-8")
        if "accuracy_by_mask_ratio" in report:  # a diffusion model's
            plot_accuracy(report["accuracy_by_mask_ratio"], staging / "accuracy_vs_mask_ratio.png")
        training_curve_figure(history, score_name(model).upper()).savefig(staging / "training_curve.png", dpi=120)
        for attachment in attachments:  # the images the card's recipe section shows
            shutil.copyfile(attachment, staging / Path(attachment).name)
        facts = {k: run.get(k) for k in ("step", "tokens_seen", "wall_time")}
        (staging / "metrics.json").write_text(json.dumps({**report, "training": facts}, indent=2))
        write_manifest(staging)
        apply_umask(staging)
        replace_directory(staging, export_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return report


def push_to_hub(export_dir: Path, repo_id: str, token: str | None = None, private: bool = False) -> str:
    """Creates the model repo if needed and uploads the export directory; returns the commit URL.

    `private`: a new repo is created private, and an existing public one is refused (it would stay public).
    No network or no credentials is a RunError saying so.
    """
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
    """Exports the best checkpoint of a run (the latest if none was kept) and optionally uploads it.

    `data_path`: the training text, or its files in the order training joined them. `train_extra`: the files that
    joined the training split only (training's --train-extra). `device`: where the export's evaluation runs.
    `private`: the pushed repo is private. `recipe_root`: the directory the recipe's images may come from
    (default: the recipe's own). `dataset_name`, `license`, `language`: what the card says of the text and the
    model's terms (default: the data files' names, and none; TinyShakespeare's own for it). The text must be one
    the run trained on (its tokens.json says which), unless `other_data` asks for another.
    """
    run_dir = Path(run_dir)
    check_export_dir(Path(export_dir), run_dir)
    latest = run_dir / "ckpt.pt"
    if not latest.is_file():
        raise ValueError(f"{run_dir} has no ckpt.pt: is it a training run's --out-dir?")
    run = load_checkpoint(latest)
    best_path = run_dir / "best.pt"
    model = build_model(load_checkpoint(best_path), best_path) if best_path.is_file() else build_model(run, latest)
    model = model.to(device)
    data_paths = [data_path] if isinstance(data_path, (str, Path)) else list(data_path)
    extra_paths = list(train_extra)
    if not other_data:
        check_run_text(run_dir, data_paths, extra_paths)
    train_text, val_text = split_text(read_texts(data_paths))
    if extra_paths:
        train_text += SEPARATOR + read_texts(extra_paths)
    file_names = " + ".join(Path(p).stem for p in [*data_paths, *extra_paths])
    data = describe_training_data(model, train_text, val_text, dataset_name, license, language, file_names)
    recipe_notes, attachments = recipe_with_images(recipe_path, recipe_root) if recipe_path else ("", [])
    report = export_model(
        model,
        Path(export_dir),
        train_text,
        val_text,
        run,
        run.get("history", {}),
        recipe_notes,
        attachments,
        weights_dtype,
        data,
        push_to_hub_repo,
    )
    name = score_name(model)
    print(f"exported to {export_dir}: validation {name.upper()} {report[f'val_{name}_nats_per_char']:.4f} nats/char")
    if push_to_hub_repo:
        print(f"pushed: {push_to_hub(Path(export_dir), push_to_hub_repo, private=private)}")
    return report


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


def main(argv: list[str] | None = None) -> None:
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
    parser.add_argument("--push-to-hub", default=None, metavar="REPO_ID")
    add_card_arguments(parser)
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
    args = parser.parse_args(argv)
    if args.private and not args.push_to_hub:
        parser.error("--private needs --push-to-hub")
    if args.recipe_root and not args.recipe:
        parser.error("--recipe-root needs --recipe")
    if args.push_to_hub is not None and (problem := repo_id_problem(args.push_to_hub)):
        parser.error(f"--push-to-hub {problem}")
    if problem := device_problem(args.device):
        parser.error(problem)
    try:
        export_run(
            Path(args.run_dir),
            Path(args.export_dir),
            [Path(name) for name in args.data],
            args.push_to_hub,
            args.recipe,
            args.weights_dtype,
            private=args.private,
            recipe_root=args.recipe_root,
            dataset_name=args.dataset_name,
            license=args.license,
            language=args.language,
            train_extra=[Path(name) for name in args.train_extra],
            device=str(choose_device(args.device)),
            other_data=args.other_data,
        )
    except (ValueError, RunError) as error:  # bad input, no network or credentials: one line, no traceback
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    main()
