"""Sampling study: quality vs steps vs speed for every reveal order, on the trained model.

    python -m evals.sampling_quality [--model DIR] [--steps 8 16 32 64 128 256] [--samples 32]
    python -m evals.sampling_quality --orders confidence --order-temperatures 0.25 0.5   # soft orders
    python -m evals.sampling_quality --orders confidence --order-temperatures 0.25 --steps 64 \\
        --prior-weights 0 0.6 --remask-ratios 0 0.5 --spacings 0 1                            # reveal rules
    python -m evals.sampling_quality --orders confidence --order-temperatures 0.25 --prior-weights 0.35 \\
        --remask-ratios 0.75 --spacings 1 --steps 32 64 --entropy-bounds 0 4 --seeds 0 1      # adaptive rule

Each setting is the plain sampler core (`SamplerOptions.plain()`, every option off) with the options the
grid names; the defaults the study recommends are `SamplerOptions()`.

For each setting, `--samples` texts of `--length` characters are generated in one batch with fixed
seeds and scored against the training split: valid-word rate, perplexity under an independent
character 5-gram Kneser-Ney judge, character entropy and distinct-4 (real validation text is scored
the same way for reference), plus chars/s and the forward passes a sample needed (fewer than the steps
with an adaptive rule). Each of `--seeds` is its own row; the report averages them and gives the
seed-to-seed spread. The model samples as `from_pretrained` loads it (the fast path where this machine
chose it: the rows record the weights' dtype); `--exact` samples with the fp32 model. Results accumulate in
runs/evals/sampling_quality/sampling_quality*.json (--out-dir; so the grid can be run in parts, by parallel
processes with their own --results-file); the markdown table and PNG plots are rebuilt from every stored row
measured on the same weights (a fingerprint of the model's parameters is stored with the rows, so a retrained model
never mixes with old numbers). The rows and tables of the study's rounds the docs cite are in
evals/results/sampling_quality/ROUND/; `--out-dir evals/results/sampling_quality/round4 --report-only` rebuilds
round 4's table and figures from its rows (on the weights that measured them).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import time
from pathlib import Path

import torch

from evals.sampling_plots import (
    label_colours,
    quality_vs_speed_figure,
    quality_vs_steps_figure,
    words_vs_diversity_figure,
)
from evals.text_metrics import KneserNeyJudge, char_entropy, distinct_n
from mdlm_hf import MDLM, ORDERS, SamplerOptions, sample
from mdlm_hf.data import atomic_write_bytes, read_text, split_text
from mdlm_hf.metrics import valid_word_rate, word_list
from mdlm_hf.sampling.options import REVEAL_RULE_OPTIONS, orders_using
from studio.common import RUNS, SHARED_DATA, load_model, reveal_rules

OUT_DIR = RUNS / "evals" / "sampling_quality"  # rows, table and figures unless --out-dir names another


def score(texts: list[str], judge: KneserNeyJudge, known_words: set[str]) -> dict:
    """Quality metrics of a set of texts, pooled over the set."""
    pooled = "".join(texts)
    return {
        "valid_word_rate": valid_word_rate(" ".join(texts), known_words),
        "judge_perplexity": judge.perplexity(texts),
        "char_entropy_bits": char_entropy(pooled),
        "distinct_4": sum(distinct_n(t, 4) for t in texts) / len(texts),
    }


def model_fingerprint(model: torch.nn.Module) -> str:
    """A short hash of the model's parameters: rows measured on other weights are not mixed in."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]


RULE_NAMES = dict(zip(REVEAL_RULE_OPTIONS, ("order temp", "prior", "remask", "spacing"), strict=True))  # in labels


METRICS = ("valid_word_rate", "judge_perplexity", "char_entropy_bits", "distinct_4", "chars_per_s", "forward_passes")


def adaptive_and_weights(row: dict) -> tuple[float, str]:
    """A row's entropy bound (0 = off) and the dtype it sampled in; rows from before these were stored: 0, float32."""
    return row.get("entropy_bound", 0), row.get("weights", "float32")


def setting_key(row: dict) -> tuple:
    """What identifies a setting, less its seed: the rows of one setting's seeds are averaged."""
    rule = tuple(row[name] for name in REVEAL_RULE_OPTIONS)
    adaptive, weights = adaptive_and_weights(row)
    return (row["order"], *rule, adaptive, row["num_steps"], row["temperature"], row["extra"], weights)


def row_key(row: dict) -> tuple:
    """What identifies a row: rows with the same key replace each other."""
    return (*setting_key(row), row.get("seed", 0))


def averaged(rows: list[dict]) -> dict:
    """One setting's rows (one per seed) as one: metrics averaged, with the seeds and the valid-word spread."""
    words = [r["valid_word_rate"] for r in rows]
    mean = {m: sum(passes_of(r) if m == "forward_passes" else r[m] for r in rows) / len(rows) for m in METRICS}
    return {**rows[0], **mean, "seeds": len(rows), "valid_word_spread": max(words) - min(words)}


def order_label(row: dict) -> str:
    """The order, with every reveal-rule option that is switched on (and the weights, when not the fast path)."""
    parts = [f"{RULE_NAMES[name]} {row[name]:g}" for name in REVEAL_RULE_OPTIONS if row[name]]
    adaptive, weights = adaptive_and_weights(row)
    if adaptive:
        parts.append(f"entropy bound {adaptive:g}")
    label = f"{row['order']} ({', '.join(parts)})" if parts else row["order"]
    return label + (" [exact fp32]" if weights == "float32" else "")


def ordered_labels(rows: list[dict]) -> list[str]:
    """The distinct order labels of `rows`, in ORDERS order, plain before the added options."""
    keys = {
        order_label(r): (ORDERS.index(r["order"]), *(r[name] for name in REVEAL_RULE_OPTIONS), *adaptive_and_weights(r))
        for r in rows
    }
    return sorted(keys, key=keys.get)


def run_setting(model: MDLM, setting: dict, num_samples: int, length: int, seed: int) -> tuple[list[str], float, float]:
    """Generates num_samples texts in one batch; returns them, the wall time and the forward passes a text needed
    on average (the batch runs until its slowest row is done; alone, a row stops when it has no mask left)."""
    canvas = torch.full((num_samples, length), model.mask_id)
    passes = torch.zeros(num_samples)
    start = time.perf_counter()
    states = sample(model, canvas, SamplerOptions.plain(), seed=seed, **setting)
    tokens = next(states).tokens
    for state in states:  # each step is one forward pass, for the rows that still had a mask
        passes += (tokens == model.mask_id).any(dim=1)
        tokens = state.tokens
    seconds = time.perf_counter() - start
    return [model.tokenizer.decode(row) for row in tokens], seconds, float(passes.mean())


def averaged_settings(results: list[dict]) -> list[dict]:
    """One row per setting, its seeds' rows averaged."""
    by_setting: dict[tuple, list[dict]] = {}
    for r in results:
        by_setting.setdefault(setting_key(r), []).append(r)
    return [averaged(rows) for rows in by_setting.values()]


def settings_table(results: list[dict], reference: dict) -> list[str]:
    """The markdown table of every setting (its seeds averaged) against real validation text."""
    lines = [
        f"Real validation text ({reference['num_samples']} windows of {reference['length']} chars): "
        f"valid-word rate {reference['valid_word_rate']:.3f}, judge perplexity {reference['judge_perplexity']:.2f}, "
        f"char entropy {reference['char_entropy_bits']:.3f} bits, distinct-4 {reference['distinct_4']:.3f}\n",
        "| order | steps | temp | extra | passes | seeds | valid words (spread) | judge ppl | ppl / real "
        "| entropy / real | distinct-4 | chars/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(results, key=lambda r: (r["extra"], order_label(r), r["temperature"], r["num_steps"])):
        lines.append(
            f"| {order_label(r)} | {r['num_steps']} | {r['temperature']} | {r['extra'] or '-'} "
            f"| {r['forward_passes']:.1f} | {r['seeds']} | {r['valid_word_rate']:.3f} ({r['valid_word_spread']:.3f}) | "
            f"{r['judge_perplexity']:.2f} | {r['judge_perplexity'] / reference['judge_perplexity']:.2f} | "
            f"{r['char_entropy_bits'] / reference['char_entropy_bits']:.3f} | {r['distinct_4']:.3f} | "
            f"{r['chars_per_s']:.0f} |"
        )
    return lines


def step_curves(plain: list[dict], labels: list[str]) -> list[tuple[str, float, list[dict]]]:
    """(label, temperature, rows by steps) for the settings measured at three step counts or more (the rest are in
    the diversity figure), hottest first."""
    curves = []
    temperatures = sorted({r["temperature"] for r in plain}, reverse=True)
    for label in labels:
        rows = [r for r in plain if order_label(r) == label]
        if len({r["num_steps"] for r in rows}) < 3:
            continue
        for temperature in temperatures:
            at_temperature = sorted((r for r in rows if r["temperature"] == temperature), key=lambda r: r["num_steps"])
            if at_temperature:
                curves.append((label, temperature, at_temperature))
    return curves


def pass_curves(plain: list[dict], labels: list[str]) -> list[tuple[str, float, list[dict]]]:
    """(label, 1.0, rows by forward passes): every setting at temperature 1.0 that an adaptive rule or a step
    count varies."""
    curves = []
    for label in labels:
        rows = sorted((r for r in plain if order_label(r) == label and r["temperature"] == 1.0), key=passes_of)
        if rows:
            curves.append((label, 1.0, rows))
    return curves


def save_figures(results: list[dict], reference: dict, out_dir: Path) -> None:
    """The study's four figures of the averaged settings, as PNGs in `out_dir`."""
    plain = [r for r in results if not r["extra"]]
    labels = ordered_labels(plain)
    colours = label_colours(labels)
    at_64 = [r for r in plain if r["num_steps"] == 64 and r["temperature"] == 1.0]
    points = sorted(((order_label(r), r) for r in at_64), key=lambda point: labels.index(point[0]))
    words_vs_diversity_figure(points, reference, colours, 64).savefig(out_dir / "quality_vs_diversity.png", dpi=110)
    steps = quality_vs_steps_figure(step_curves(plain, labels), reference, colours)
    steps.savefig(out_dir / "quality_vs_steps.png", dpi=110)
    passes = quality_vs_steps_figure(pass_curves(plain, labels), reference, colours, x="forward_passes")
    passes.savefig(out_dir / "quality_vs_passes.png", dpi=110)
    groups = {label: [r for r in plain if order_label(r) == label] for label in labels}
    extras = [r for r in results if r["extra"]]
    quality_vs_speed_figure(groups, extras, colours).savefig(out_dir / "quality_vs_speed.png", dpi=110)


def make_report(results: list[dict], reference: dict, out_dir: Path) -> str:
    """Markdown tables and the figures from all results so far (one row per setting, its seeds averaged)."""
    settings = averaged_settings(results)
    save_figures(settings, reference, out_dir)
    return "\n".join(headline_table(settings, reference) + [""] + settings_table(settings, reference))


def passes_of(row: dict) -> float:
    """The forward passes a text needed (rows from before they were counted: the steps)."""
    return row.get("forward_passes", row["num_steps"])


def headline_table(results: list[dict], reference: dict, temperature: float = 1.0) -> list[str]:
    """Valid-word rate / judge perplexity / entropy ÷ real for every order (rows) and step count (columns)."""
    plain = [r for r in results if not r["extra"] and r["temperature"] == temperature]
    steps = sorted({r["num_steps"] for r in plain})
    labels = ordered_labels(plain)
    cells = {
        (order_label(r), r["num_steps"]): f"{r['valid_word_rate']:.3f} / {r['judge_perplexity']:.2f} / "
        f"{r['char_entropy_bits'] / reference['char_entropy_bits']:.3f}"
        for r in plain
    }
    lines = [
        f"Valid-word rate / judge perplexity / character entropy ÷ real text's, at temperature {temperature} "
        f"(real text: {reference['valid_word_rate']:.3f} / {reference['judge_perplexity']:.2f} / 1):\n",
        "| order | " + " | ".join(f"{n} steps" for n in steps) + " |",
        "|---|" + "---|" * len(steps),
    ]
    for label in labels:
        lines.append(f"| {label} | " + " | ".join(cells.get((label, n), "-") for n in steps) + " |")
    return lines


def study_parser() -> argparse.ArgumentParser:
    """The study's flags: the model, the grid of settings, the samples and where rows are stored."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None)
    parser.add_argument(
        "--data", default=str(SHARED_DATA), help="training text: the judge and word list use its train split"
    )
    parser.add_argument("--steps", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256])
    parser.add_argument("--orders", nargs="+", default=list(ORDERS))
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.7, 1.0])
    parser.add_argument(
        "--order-temperatures",
        type=float,
        nargs="+",
        default=[0.0],
        help="0 = strict order; > 0 = soft order (see mdlm_hf.sample)",
    )
    parser.add_argument("--prior-weights", type=float, nargs="+", default=[0.0], help="see mdlm_hf.sample")
    parser.add_argument("--remask-ratios", type=float, nargs="+", default=[0.0], help="see mdlm_hf.sample")
    parser.add_argument("--spacings", type=int, nargs="+", default=[0], help="see mdlm_hf.sample")
    parser.add_argument(
        "--entropy-bounds", type=float, nargs="+", default=[0.0], help="adaptive rule, 0 = off; see mdlm_hf.sample"
    )
    parser.add_argument("--exact", action="store_true", help="sample with the exact fp32 model, not the fast path")
    parser.add_argument("--extras", action="store_true", help="also threshold mode and semi-autoregressive blocks")
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one row per seed; the report averages")
    parser.add_argument("--out-dir", default=str(OUT_DIR), help="where rows, the table and the figures go")
    parser.add_argument(
        "--results-file",
        default="sampling_quality.json",
        help="where this process stores its rows; give parallel processes different files",
    )
    parser.add_argument("--report-only", action="store_true", help="rebuild the table and plots from stored rows")
    return parser


def grid_settings(args: argparse.Namespace) -> list[dict]:
    """The settings the flags name, cheapest first (few steps, then the 64-step extras), so a stopped run has still
    measured the most."""
    if args.report_only:
        return []
    rules = reveal_rules(args.orders, args.order_temperatures, args.prior_weights, args.remask_ratios, args.spacings)
    settings = sorted(
        [
            dict(num_steps=s, temperature=t, **rule, **({"entropy_bound": b} if b else {}))
            for t in args.temperatures
            for s in args.steps
            for b in args.entropy_bounds
            for rule in rules
            if not (b and rule["order"] not in orders_using("entropy_bound"))  # streams order refuses one
        ],
        key=lambda setting: setting["num_steps"],
    )
    if not args.extras:
        return settings
    cut = sum(setting["num_steps"] <= 64 for setting in settings)
    return settings[:cut] + extra_settings(args.temperatures) + settings[cut:]


def extra_settings(temperatures: list[float]) -> list[dict]:
    """The settings beside the grid, at 64 steps: threshold mode (0.9, 0.6) and semi-autoregressive blocks of 32."""
    thresholds = [
        dict(order="confidence", num_steps=64, temperature=t, threshold=h) for t in temperatures for h in (0.9, 0.6)
    ]
    return thresholds + [dict(order="confidence", num_steps=64, temperature=t, block_length=32) for t in temperatures]


def extra_label(setting: dict) -> str:
    """How an extra setting samples (threshold mode, semi-autoregressive blocks); empty for the grid's."""
    if "threshold" in setting:
        return f"threshold {setting['threshold']}"
    return "blocks of 32" if "block_length" in setting else ""


def measured_row(model: MDLM, setting: dict, seed: int, args: argparse.Namespace, scoring: tuple) -> dict:
    """Samples one setting with one seed and returns its row: the setting, its scores, its speed and an example.
    `scoring` is (judge, known words, the weights' dtype name)."""
    judge, known_words, weights = scoring
    texts, seconds, passes = run_setting(model, setting, args.samples, args.length, seed)
    return {
        "order": setting["order"],
        **{name: setting.get(name, 0) for name in REVEAL_RULE_OPTIONS},  # the extras leave them off
        "entropy_bound": setting.get("entropy_bound", 0),
        "weights": weights,
        "seed": seed,
        "forward_passes": passes,
        "num_steps": setting["num_steps"],
        "temperature": setting["temperature"],
        "extra": extra_label(setting),
        **score(texts, judge, known_words),
        "chars_per_s": args.samples * args.length / seconds,
        "example": texts[0],
    }


def stored_rows(out_dir: Path, fingerprint: str) -> list[dict]:
    """Every process's rows in `out_dir` measured on these weights, one per row key."""
    rows = {}
    for path in sorted(out_dir.glob("sampling_quality*.json")):
        part = json.loads(path.read_text())
        if part.get("model_fingerprint") != fingerprint:
            print(f"skipping {path.name}: measured on other weights", flush=True)
            continue
        for r in part["results"]:
            rows[row_key(r)] = r
    return list(rows.values())


def main(argv: list[str] | None = None) -> None:
    """Measures the settings the flags name (rows stored as they come), then rebuilds the table and figures."""
    args = study_parser().parse_args(argv)
    model, source = load_model(args.model, exact=args.exact)
    weights = str(model.denoise_dtype).removeprefix("torch.")
    train_text, val_text = split_text(read_text(args.data))
    judge, known_words = KneserNeyJudge(train_text, order=5), set(word_list(train_text))
    windows = [val_text[i : i + args.length] for i in range(0, args.samples * args.length * 4, args.length * 4)]
    reference = {**score(windows, judge, known_words), "num_samples": len(windows), "length": args.length}
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    store = out_dir / args.results_file
    fingerprint = model_fingerprint(model)
    stored = json.loads(store.read_text()) if store.is_file() else {}
    results = stored.get("results", []) if stored.get("model_fingerprint") == fingerprint else []
    for setting, seed in itertools.product(grid_settings(args), args.seeds):
        row = measured_row(model, setting, seed, args, (judge, known_words, weights))
        results = [r for r in results if row_key(r) != row_key(row)] + [row]
        payload = {"model": source, "model_fingerprint": fingerprint, "reference": reference, "results": results}
        atomic_write_bytes(store, json.dumps(payload, indent=1).encode())
        print(
            f"{setting} seed {seed} -> valid words {row['valid_word_rate']:.3f}, judge ppl "
            f"{row['judge_perplexity']:.2f}, entropy {row['char_entropy_bits']:.3f} bits, "
            f"{row['forward_passes']:.1f} passes, {row['chars_per_s']:.0f} chars/s",
            flush=True,
        )
    table = make_report(stored_rows(out_dir, fingerprint), reference, out_dir)
    (out_dir / "sampling_quality.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
