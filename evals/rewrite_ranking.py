"""Could a cheaper score rank rewrites as the exact chain rule does? The Rewrite panel ranks three rewrites of a
span by the span's bits per character given the rest of the text, by the exact chain rule left to right over the
span (`mdlm_hf.span_nats`): a canvas per character of the span, for each rewrite. Three cheaper estimates:

    strided   the chain in a strided order: each canvas scores `--chars-per-row` characters spread over the span,
              each given the ones earlier canvases revealed (g times fewer canvases)
    local     the left-to-right chain, each canvas cropped to `--local-window` characters around the one it scores
    twin      the autoregressive twin's negative log-likelihood of the whole text: one pass for all three (the
              text outside the span is the same for each, so its order is p(span | rest)'s under the twin)

    python -m evals.rewrite_ranking --twin pretrained/mdlm-shakespeare-char-ar --out runs/rewrite_ranking.json

For each span (a window of `--window` characters of the validation split at a random place, a span of 16 to
`--max-span` characters inside it): three rewrites written as the panel writes them (its default options, one
batch), then each scored exactly and by each estimate. Prints how often each estimate orders the three as the exact
chain does, how often it picks the same best, its regret (the exact bits per character of its pick less the best's:
mean and 95th percentile), and its seconds per span.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

import torch

from mdlm_hf import MDLM, SamplerOptions, sample
from mdlm_hf.data import read_text, split_text
from mdlm_hf.rewriting import SCORE_ROWS, span_bits_per_char, span_canvas, span_nats_steps
from mdlm_hf.sampling.state import final_state
from studio.common import SHARED_DATA, thread_count

NUM_CHOICES = 3
PANEL_OPTIONS = SamplerOptions(num_steps=16)  # the Rewrite panel's: the default sampler, 16 steps


def rewrites(model: MDLM, text: str, start: int, end: int, seed: int) -> list[str]:
    """Three rewrites of `text[start:end]`, one batch, as the panel writes them."""
    options = PANEL_OPTIONS.replace(num_steps=min(PANEL_OPTIONS.num_steps, end - start))
    canvas = span_canvas(model, text, start, end).expand(NUM_CHOICES, -1)
    state = final_state(sample(model, canvas, options, seed=seed))
    return model.tokenizer.decode_batch(state.tokens.tolist())


def ranking(bits: list[float]) -> tuple[int, ...]:
    """The choices' order, likeliest first."""
    return tuple(sorted(range(len(bits)), key=bits.__getitem__))


@torch.no_grad()
def log_probs(model: MDLM, canvases: torch.Tensor) -> torch.Tensor:
    """The model's log-probabilities on each canvas, SCORE_ROWS canvases a pass; (R, n, V)."""
    found = []
    for canvas in canvases.split(SCORE_ROWS):
        t = (canvas == model.mask_id).float().mean(dim=1)  # each canvas's mask ratio
        found.append(model.denoise(canvas, t).float().log_softmax(dim=-1))
    return torch.cat(found)


def strided_bits(model: MDLM, text: str, start: int, end: int, chars_per_row: int) -> float:
    """The span's bits per character by the chain in a strided order, `chars_per_row` characters a canvas."""
    ids = torch.tensor(model.tokenizer.encode(text))
    length = end - start
    num_rows = math.ceil(length / chars_per_row)
    residue = torch.arange(length) % num_rows  # canvas j scores the span's characters of residue j
    canvases = ids.expand(num_rows, -1).clone()
    for j in range(num_rows):
        canvases[j, start:end][residue >= j] = model.mask_id
    at = start + torch.arange(length)
    nats = -log_probs(model, canvases)[residue, at, ids[at]]
    return float(nats.mean()) / math.log(2)


def local_bits(model: MDLM, text: str, start: int, end: int, window: int) -> float:
    """The span's bits per character by the left-to-right chain, each canvas `window` characters around its one
    (`span_nats_steps`' context: the Rewrite panel's ranking)."""
    *_, nats = span_nats_steps(model, [text], start, end, fast=True, context=window)
    return float(nats.mean()) / math.log(2)


@torch.no_grad()
def twin_bits(twin: MDLM, texts: list[str], start: int, end: int) -> list[float]:
    """Each text's negative log-likelihood under the autoregressive twin, in bits per character of the span."""
    ids = torch.tensor([twin.tokenizer.encode(text) for text in texts])  # (3, n)
    log_probs = twin(ids[:, :-1], torch.zeros(len(texts))).float().log_softmax(dim=-1)
    nats = -log_probs.gather(-1, ids[:, 1:, None])[..., 0].sum(dim=1)
    return (nats / (end - start) / math.log(2)).tolist()


def estimates(model: MDLM, twin: MDLM | None, choices: list[str], span: tuple[int, int], args: argparse.Namespace):
    """Each estimate's bits per character of the span, for each choice."""
    start, end = span
    found = {
        "exact": lambda: [span_bits_per_char(model, c, start, end, fast=True) for c in choices],
        "strided": lambda: [strided_bits(model, c, start, end, args.chars_per_row) for c in choices],
        "local": lambda: [local_bits(model, c, start, end, args.local_window) for c in choices],
    }
    if twin is not None:
        found["twin"] = lambda: twin_bits(twin, choices, start, end)
    return found


def regret(estimated: list[float], exact: list[float]) -> float:
    """How many bits per character worse, by the exact chain, the estimate's pick is than the exact best: what a
    visitor loses when near-ties are ordered otherwise."""
    return exact[ranking(estimated)[0]] - min(exact)


def measure(model: MDLM, twin: MDLM | None, text: str, args: argparse.Namespace) -> dict:
    """The spans' exact and estimated scores, the estimates' agreement and their seconds."""
    rng = random.Random(args.seed)
    agree, seconds, rows, regrets = {}, {}, [], {}
    for i in range(args.spans):
        low = rng.randrange(len(text) - args.window)
        window = text[low : low + args.window]
        length = rng.randint(16, args.max_span)
        start = rng.randrange(args.window - length)
        choices = rewrites(model, window, start, start + length, seed=args.seed + i)
        bits = {}
        for name, score in estimates(model, twin, choices, (start, start + length), args).items():
            began = time.perf_counter()
            bits[name] = score()
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - began
        for name, found in bits.items():
            counts = agree.setdefault(name, [0, 0])
            counts[0] += ranking(found) == ranking(bits["exact"])
            counts[1] += ranking(found)[0] == ranking(bits["exact"])[0]
            regrets.setdefault(name, []).append(regret(found, bits["exact"]))
        rows.append(dict(low=low, start=start, length=length, bits=bits))
        if (i + 1) % 20 == 0:
            print(f"{i + 1} spans: " + ", ".join(f"{n} {c[0] / (i + 1):.3f}" for n, c in agree.items()), flush=True)
    summary = {name: dict(same_order=c[0] / args.spans, same_best=c[1] / args.spans) for name, c in agree.items()}
    for name, found in regrets.items():
        ordered = sorted(found)
        summary[name] |= dict(mean_regret=sum(found) / len(found), regret_95=ordered[math.ceil(0.95 * len(found)) - 1])
    return dict(summary=summary, seconds={name: s / args.spans for name, s in seconds.items()}, spans=rows)


def main(argv: list[str] | None = None) -> None:
    """Measures, prints and writes the agreement (`--out`, JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="pretrained/mdlm-shakespeare-char")
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--spans", type=int, default=200)
    parser.add_argument("--window", type=int, default=256, help="characters of text around each span")
    parser.add_argument("--max-span", type=int, default=80)
    parser.add_argument("--twin", default=None, help="the autoregressive twin (the estimate is left out without one)")
    parser.add_argument("--chars-per-row", type=int, default=4, help="the strided estimate's")
    parser.add_argument("--local-window", type=int, default=64, help="the local estimate's")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if not 16 < args.max_span < args.window:
        parser.error(f"--max-span must be above 16 and below --window ({args.window}), got {args.max_span}")
    torch.set_num_threads(thread_count(args.threads))
    model = MDLM.from_pretrained(args.model).eval()
    validation = split_text(read_text(args.data))[1]
    twin = MDLM.from_pretrained(args.twin).eval() if args.twin else None
    result = measure(model, twin, validation, args)
    for name, figures in result["summary"].items():
        print(
            f"{name}: same order {figures['same_order']:.3f}, same best {figures['same_best']:.3f}, regret mean "
            f"{figures['mean_regret']:.4f} and 95th percentile {figures['regret_95']:.4f} bits/char, "
            f"{result['seconds'][name]:.2f} s a span (three rewrites)"
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(dict(vars(args), data=str(args.data), out=str(args.out)) | result, indent=1))


if __name__ == "__main__":
    main()
