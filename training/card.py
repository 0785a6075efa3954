"""What the model card (README.md, from mdlm_hf/model_card.md) and the app's demo.json say of an export: the
training text's facts and terms, the usage example drawn from its validation split, and the sections built from
the measured metrics (metrics.json) and the run's checkpoint. training.export writes the files.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from huggingface_hub import EvalResult

from mdlm_hf import MDLM
from mdlm_hf.objectives import objective_of
from training.corpus import TINYSHAKESPEARE_MD5, TRAIN_FRACTION
from training.flags import FLAGS, OBJECTIVE_SETTINGS, check_license
from training.weights import BF16_TOLERANCE

TINYSHAKESPEARE_HUB_ID = "karpathy/tiny_shakespeare"

SHAKESPEARE_USAGE = ("ROMEO:\n", "To be, or not to be, ________ is the question:")  # the card's prompt and infill

SPEAKER_LINE = re.compile(r"[^\W\d_][^:]{0,30}:")  # "ROMEO:", "First Citizen:": a prompt a play would continue

PROMPT_CHARS = 40  # the longest prompt the usage example takes from the text

INFILL_CHARS = 80  # the longest line it blanks a word of

DEMO_SAMPLE_CHARS = 1000  # the app's sample text: its first line is the forward process's, all of it the plot's

# the autoregressive reference the card names beside a TinyShakespeare model's exact NLL: nanoGPT's character
# model (github.com/karpathy/nanoGPT, shakespeare_char), its validation loss on the same split
NANOGPT_REFERENCE = {"name": "nanoGPT's autoregressive character model", "nats": 1.47}

# the run's settings the card's recipe line names (the table's recipe flags), in this order: the shape and the
# optimisation, then the objective and the flags only some objectives read (a card names those its own reads)
RECIPE_KEYS = tuple(
    f.name for f in sorted((f for f in FLAGS if f.recipe), key=lambda f: f.name == "objective" or f.objective_setting)
)


@dataclass(frozen=True)
class TrainingData:
    """What the model card says of the training text, and the terms the run gives its model (None: not stated)."""

    name: str
    chars: int  # the text that is split: its first 90 % trains, the rest validates
    val_chars: int
    tinyshakespeare: bool = False  # the split text is TinyShakespeare
    extra_chars: int = 0  # text that joined the training split only (training's --train-extra)
    extra_name: str = ""  # what that text is
    split_name: str = ""  # what the split text is, where text joined the training split beside it
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
    extra_chars: int = 0,
    extra_name: str = "",
    split_name: str = "",
) -> TrainingData:
    """The card's facts of the text: TinyShakespeare (by md5) gets its name, Hub id, license mit and language en
    unless given; any other text its `name` (else `default_name`) and usage examples from its validation split.
    `extra_chars` of `extra_name` joined the training split beside `train_text` (of `split_name`)."""
    if license is not None:
        check_license(license)
    facts = {"chars": len(train_text) + len(val_text), "val_chars": len(val_text), "extra_chars": extra_chars}
    facts |= {"extra_name": extra_name, "split_name": split_name if extra_chars else ""}
    facts |= {"license": license, "language": language}
    if hashlib.md5((train_text + val_text).encode("utf-8")).hexdigest() == TINYSHAKESPEARE_MD5:
        facts |= {"license": license or "mit", "language": language or "en", "hub_id": TINYSHAKESPEARE_HUB_ID}
        return TrainingData(name or "TinyShakespeare", tinyshakespeare=True, **facts)
    prompt, infill = usage_examples(model, val_text)
    return TrainingData(name or default_name, prompt=prompt, infill=infill, **facts)


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
        metadata |= {
            "sample": sample,
            "sample_name": f"the validation text of {validation_name(data)} (unseen in training)",
        }
    return metadata


def validation_name(data: TrainingData) -> str:
    """What the validation split is a part of: the split text, never the text that joined the training split only."""
    if data.tinyshakespeare:
        return "TinyShakespeare"
    return data.split_name or data.name


def python_string(text: str) -> str:
    """`text` as a double-quoted Python string literal (JSON's escapes are Python's)."""
    return json.dumps(text, ensure_ascii=False)


def character_count(chars: int) -> str:
    """The text's size in words: "about 1.1 million characters", or the exact count below a million."""
    return f"about {chars / 1e6:.1f} million characters" if chars >= 10**6 else f"{chars:,} characters"


def samples_section(report: dict) -> str:
    """The card's Samples section: its heading (length and sampling options) and each sample in a code block."""
    options = ", ".join(f"{name} {value}" for name, value in report["sampling"].items() if name != "length")
    samples = "\n\n".join(f"```\n{t}\n```" for t in report["samples"])
    return f"## Samples ({report['sampling']['length']} characters; sampling options: {options})\n\n{samples}\n"


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
    """Values for the model card template (mdlm_hf/model_card.md): the front matter, the usage example, and the
    figures of `report` (metrics.json) and `run` (the checkpoint); `repo_id`: where it is pushed (None: not yet)."""
    block, objective = model.block_size, objective_of(model)
    prompt = data.prompt[: block - 1]
    subject = "Shakespeare" if data.tinyshakespeare else data.name
    return {
        "title": f"mdlm_hf: {objective.title} of {subject}, character by character",
        "card_data": card_front_matter(report, data, model_name, objective.score),
        "repo_id": repo_id,
        "prompt": python_string(prompt) if prompt else "",
        "infill": python_string(data.infill) if data.infill and len(data.infill) <= block else "",
        "generate_length": min(256, block),
        "complete_length": min(200, block - len(prompt)),
        "block_size": block,
        "validation_percent": round(100 * (1 - TRAIN_FRACTION)),
        "evaluation": evaluation_facts(report, objective.score),
        "training": training_facts(model, report, run, data),
        "reference": NANOGPT_REFERENCE if data.tinyshakespeare else None,
        "recipe_notes": recipe_notes,
        "samples": samples_section(report),
    }


def evaluation_facts(report: dict, score: str) -> dict:
    """The card's Evaluation section from metrics.json: the validation `score` (a diffusion model's "nelbo", a twin's
    "nll") in nats and bits, the exact NLL on the split's first characters, and what else the report holds (a
    diffusion model's mask draws and accuracy by mask ratio)."""
    exact_nll = [
        {"order": order.replace("_", "-"), "chars": report["exact_nll_chars"], "nats": nats}
        for order, nats in report.get("exact_nll_nats_per_char", {}).items()
    ]
    facts = {
        "val_chars": report["val_chars"],
        score: report[f"val_{score}_nats_per_char"],
        f"{score}_bits": report[f"val_{score}_bits_per_char"],
        "exact_nll": exact_nll,
    }
    others = (("mask_draws", "elbo_mask_samples_per_window"), ("accuracy", "accuracy_by_mask_ratio"))
    return facts | {name: report[key] for name, key in others if key in report}


def card_front_matter(report: dict, data: TrainingData, model_name: str, score: str) -> dict:
    """The card's front matter: the text's terms and the model-index entry of the validation `score`."""
    result = EvalResult(
        task_type="text-generation",
        task_name="Character-level language modelling",
        dataset_type=data.hub_id or data.name,
        dataset_name=data.name,
        metric_type=score,
        metric_name=f"validation {score.upper()}, last 10 % of {validation_name(data)} (nats/char)",
        metric_value=round(report[f"val_{score}_nats_per_char"], 4),
    )
    datasets = [data.hub_id] if data.hub_id else None
    return {
        "license": data.license,
        "language": data.language,
        "datasets": datasets,
        "model_name": model_name,
        "eval_results": [result],
    }


def training_facts(model: MDLM, report: dict, run: dict, data: TrainingData) -> dict:
    """The card's Training section and Limitations: the text, the weights, and the run's steps, time and recipe."""
    args, minutes = run.get("args", {}), run.get("wall_time", 0) / 60
    objective, stages = objective_of(model), training_stages(run, data)
    unread = OBJECTIVE_SETTINGS.keys() - objective.settings  # only other objectives read them: the run did not
    return {
        "data_name": data.name,
        "validation_name": validation_name(data),
        "hub_id": data.hub_id,
        "chars": data.chars,
        "extra_chars": data.extra_chars,
        "extra_name": data.extra_name,
        "size_words": character_count(data.chars + data.extra_chars),
        "license": data.license,
        "tinyshakespeare": data.tinyshakespeare,
        "parameters": model.num_parameters(),
        "weights_dtype": report.get("weights_dtype", "float32"),
        f"{objective.score}_bf16": report.get(f"{objective.score}_bfloat16_weights"),
        f"{objective.score}_fp32": report.get(f"{objective.score}_float32_weights"),
        "bf16_tolerance": BF16_TOLERANCE,
        "tokens_seen": run.get("tokens_seen", 0),
        "steps": run.get("step", 0),
        "minutes": minutes,
        "duration": f"{minutes:.1f} minutes" if minutes >= 1 else "under a minute",
        "hardware": run.get("hardware") or "an unrecorded machine",  # checkpoints from before the field
        "recipe": ", ".join(f"{k}={args[k]}" for k in RECIPE_KEYS if k in args and k not in unread),
        "init_from": args.get("init_from"),
        "stages": [stage_line(stage) for stage in stages],
        "total": lineage_total(stages),
    }


def training_stages(run: dict, data: TrainingData) -> list[dict]:
    """Every stage of the model's training, oldest first: those its --init-from model records, then this run's."""
    args = run.get("args", {})
    this = {"steps": run.get("step", 0), "characters": run.get("tokens_seen", 0), "text": data.name}
    return [*run.get("parent_stages", []), {**this, "init_from": args.get("init_from")}]


def stage_line(stage: dict) -> str:
    """A stage as the card lists it: its steps, characters and text, and the model it started from."""
    pairs = ((stage.get("steps"), "steps"), (stage.get("characters"), "characters"))
    counted = [f"{value:,} {unit}" for value, unit in pairs if isinstance(value, int)]
    line = ", ".join(counted) or "steps and characters not recorded"
    line += f" of {stage['text']}" if stage.get("text") not in (None, "", "not recorded") else ", text not recorded"
    return line + (f", from {stage['init_from']}" if stage.get("init_from") else "")


def lineage_total(stages: list[dict]) -> str | None:
    """The steps and characters of every stage together, or None where one is not recorded or there is one stage."""
    counts = [(stage.get("steps"), stage.get("characters")) for stage in stages]
    if len(stages) < 2 or not all(isinstance(s, int) and isinstance(c, int) for s, c in counts):
        return None
    return f"{sum(s for s, _ in counts):,} steps, {sum(c for _, c in counts):,} characters"
