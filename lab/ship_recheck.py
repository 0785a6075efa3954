"""The job's likelihoods measured again on the CPU before the ship check decides by them (lab/ship_check.py).

metrics.json comes back from another machine, and its figures decide what ships; so each figure a bar reads (a
diffusion model's validation ELBO, exact NLL and held-out ELBO; a twin's NLLs), the candidate's and its
incumbent's, is measured here on a sample of the same text with the job's functions: whole block_size windows drawn
at random (seeded), each window's figure apart, so that the sample says how far its mean may stray from the whole
text's. The job's figure stands where it is within NOISE_SES standard errors of the sample's mean (and FLOOR), and
so does the candidate's lead over its incumbent, measured on the same windows with the same masks (far less noisy:
both models find the same passages hard); else the check stops, with both numbers. A text no longer than the sample
is measured whole, as the job measured it (its seed, its masks): only FLOOR is left between the two then.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from pathlib import Path

import torch

from lab import gpu_job
from mdlm_hf import MDLM, elbo
from mdlm_hf.diffusion import reveal_nll
from mdlm_hf.inference import evaluating
from mdlm_hf.likelihood import exact_nll
from mdlm_hf.objectives import objective_of

# What it costs on 2 threads, the shipped shape (d256, 6 layers): an ELBO window is 4 passes (about 0.1 s), a
# diffusion model's exact NLL window a pass per character (256 passes, side by side: about 4 s a window).
ELBO_WINDOWS = 64  # 16,384 characters of each text: about 7 s a model; a twin's NLL, one pass a window, the same
EXACT_WINDOWS = 8  # 2,048 validation characters of a diffusion model's exact NLL: about 35 s a model
# Standard errors of the sample's mean the job's figure may stray: a true figure strays this far about 1 time in
# 600 at 8 windows (Student's t, 7 degrees of freedom), far less often at 64
NOISE_SES = 5.0
FLOOR = 0.02  # nats/char besides: the job scores a run's fp32 weights on a GPU, the export holds bf16 (0.0001 apart)
FIGURES = {  # figure -> (the text: 0 validation, 1 held out; how it is measured)
    "val_elbo": (0, "elbo"),
    "heldout_elbo": (1, "elbo"),
    "val_exact_nll": (0, "exact"),
    "val_nll": (0, "exact"),
    "heldout_nll": (1, "exact"),
}
TEXTS = ("validation characters (--data's split)", "held-out characters (--heldout)")


@dataclass(frozen=True)
class Sample:
    """A model's figure measured here: each sampled window's (none where the text was measured whole), their
    mean (or the whole text's figure) and its standard error, on `chars` characters."""

    windows: tuple[float, ...]
    value: float
    error: float
    chars: int


def measure(model: MDLM, tokens: torch.Tensor, how: str, count: int, seed: int) -> Sample:
    """The model's ELBO or exact NLL on `count` whole windows of `tokens` drawn at random (seeded), or on the
    whole text, as the job measured it, where it has no more windows than that."""
    L, count = model.block_size, max(count, 2)  # two windows at least: the noise is measured between them
    whole = tokens.numel() // L
    if whole <= count:
        if how == "elbo":
            value = elbo(model, tokens, 4, torch.Generator().manual_seed(0)).nats_per_char
        else:
            value = exact_nll(model, tokens, batch_size=512)
        return Sample((), value, 0.0, tokens.numel())
    picked = sorted(random.Random(seed).sample(range(whole), count))
    windows = torch.stack([tokens[index * L : (index + 1) * L] for index in picked])
    if how == "elbo":  # each window its own masks, the same for every model (they depend on the seed alone)
        found = [
            elbo(model, window, 4, torch.Generator().manual_seed(seed + k)).nats_per_char
            for k, window in enumerate(windows)
        ]
    elif not objective_of(model).fills_blanks:  # a twin: one pass a window
        found = [exact_nll(model, window) for window in windows]
    else:  # the job's exact_nll, its windows side by side: a pass per character
        with evaluating(model):
            nats = reveal_nll(model, windows.to(next(model.parameters()).device), "left_to_right")
        found = nats.double().mean(dim=1).tolist()
    return Sample(tuple(found), statistics.fmean(found), standard_error(found), count * L)


def standard_error(values: list[float]) -> float:
    """The standard error of the values' mean."""
    return statistics.stdev(values) / math.sqrt(len(values))


def lead_error(candidate: Sample, incumbent: Sample) -> float:
    """The standard error of the candidate's lead over the incumbent: from each window's difference where both
    measured the same windows, else from the two errors."""
    if candidate.windows and len(candidate.windows) == len(incumbent.windows) and candidate.chars == incumbent.chars:
        return standard_error([c - i for c, i in zip(candidate.windows, incumbent.windows, strict=True)])
    return math.hypot(candidate.error, incumbent.error)


def tolerance(error: float) -> float:
    """How far the job's figure may stray from the one measured here."""
    return NOISE_SES * error + FLOOR


def span(scores: dict, figure: str, length: int) -> int:
    """The characters of the text the job scored `figure` on: the first val_exact_nll_chars of the validation split
    (where the job recorded them), else all of it."""
    if figure != "val_exact_nll":
        return length
    chars = scores.get("val_exact_nll_chars")
    return chars if type(chars) is int and 0 < chars <= length else length


def check_text(scores: dict, who: str, lengths: tuple[int, int]) -> None:
    """A ValueError where the job scored other texts than --data's validation split and --heldout here (by their
    lengths, val_chars and heldout_chars, where it recorded them)."""
    for index, (key, flag) in enumerate((("val_chars", "--data"), ("heldout_chars", "--heldout"))):
        chars = scores.get(key)
        if type(chars) is int and chars != lengths[index]:
            raise ValueError(
                f"the job scored {who} on {chars:,} {TEXTS[index]}, here there are {lengths[index]:,}: give the check "
                f"the {flag} the job read"
            )


def loaded(path: Path, scores: dict, who: str, texts: tuple[str, str], models: dict) -> tuple[MDLM, list]:
    """The model of `path` (loaded once) and the texts as its tokens, once it is known to read them and the job is
    known to have scored it on this validation split."""
    if path not in models:
        model = gpu_job.load(path)
        if unknown := model.tokenizer.unknown_chars(texts[0] + texts[1]):
            raise ValueError(f"{path}'s vocabulary lacks {''.join(unknown)[:20]!r}: it cannot score these texts")
        tokens = [torch.tensor(model.tokenizer.encode(text)) for text in texts]
        check_text(scores, who, (tokens[0].numel(), tokens[1].numel()))
        models[path] = model, tokens
    return models[path]


def recheck(
    run: str,
    paths: tuple[Path, Path],
    job: tuple[dict, dict],
    figures: dict,
    texts: tuple[str, str],
    seed: int,
    cache: dict,
    windows: tuple[int, int] = (ELBO_WINDOWS, EXACT_WINDOWS),
) -> str:
    """Checks the job's `figures` ({figure: {"candidate", "incumbent"}}) of the run (its export and its incumbent's
    folder, `paths`; the job's score entries of each, `job`) against samples measured here: a ValueError in one
    line, with both numbers, where one is not these models' figure on these texts; else what was measured. `cache`
    keeps the incumbent's samples for every candidate held to it."""
    models: dict[Path, tuple] = {}
    measured = []
    for figure, pair in figures.items():
        text_index, how = FIGURES[figure]
        count = windows[1] if figure == "val_exact_nll" else windows[0]
        chars = span(job[0], figure, len(texts[text_index]))  # the candidate's entry says what the job scored
        samples = []
        for side, path, scores in zip(("candidate", "incumbent"), paths, job, strict=True):
            who = f"run {run}" if side == "candidate" else f"the incumbent {path}"
            key = (str(path), figure, chars, count, seed)
            found = cache.get(key) if side == "incumbent" else None
            if found is None:
                model, tokens = loaded(path, scores, who, texts, models)
                found = measure(model, tokens[text_index][:chars], how, count, seed)
                if side == "incumbent":
                    cache[key] = found
            samples.append(found)
            if abs(pair[side] - found.value) > tolerance(found.error):
                raise ValueError(
                    f"{who}'s {figure} in metrics.json is {pair[side]:.4f}, but measured here it is {found.value:.4f} "
                    f"(+/- {tolerance(found.error):.4f}, on {found.chars:,} {TEXTS[text_index]}): metrics.json's "
                    "figures are not these models' on these texts; not deciding by them"
                )
        claimed = pair["candidate"] - pair["incumbent"]
        lead = samples[0].value - samples[1].value
        allowed = tolerance(lead_error(*samples))
        if abs(claimed - lead) > allowed:
            raise ValueError(
                f"run {run}'s {figure} is {claimed:+.4f} beside its incumbent's in metrics.json, but {lead:+.4f} "
                f"(+/- {allowed:.4f}) measured here on the same {samples[0].chars:,} {TEXTS[text_index]}: "
                "metrics.json's figures are not these models'; not deciding by them"
            )
        first = f" of the first {chars:,}" if chars < len(texts[text_index]) else ""  # the job chose that span: shown
        measured.append(f"{figure} on {samples[0].chars:,} characters{first}")
    return "checked here: " + ", ".join(measured)
