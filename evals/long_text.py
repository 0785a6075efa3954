"""Writing past the context: the structure suite over 2,000-character texts, for each window context.

    python -m evals.long_text quality --contexts 32 64 128 --seeds 0 1 2 --samples 16 [--rule default]
    python -m evals.long_text quality --rule twin                   # the autoregressive twin's texts
    python -m evals.long_text report                                  # the table, from the stored texts
    python -m evals.long_text report --store evals/results/long_text/texts.json.gz   # the docs' table, texts.md

Quality samples free text and the suite's heading prompt, LENGTH characters each, for each `window_context` under a
structure suite rule (`--rule`, default "default": `SamplerOptions()`), and stores the texts in
runs/evals/long_text/texts.json (--store; the texts behind the docs' table are committed gzipped in
evals/results/long_text/); the report adds held-out windows of the same length and loops (a 64-character span
repeated verbatim in a text, evals/structure_metrics.py), and writes the table beside the store. The speed of long
generation is benchmarks/long_text_speed.py.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from evals.structure_metrics import Sample, repeated_span
from evals.structure_suite import (
    RULES,
    context_metrics,
    fmt,
    heldout_samples,
    load_store,
    model_fingerprint,
    report_context,
    rule_options,
    save_store,
    table_path,
)
from mdlm_hf import MDLM, sample
from mdlm_hf.pipeline import prompt_canvas
from mdlm_hf.sampling.state import final_state
from studio.common import RUNS, load_model, load_twin, thread_count, whole_number

STORE = RUNS / "evals" / "long_text" / "texts.json"  # where sampled texts go unless --store names another
LENGTH = 2000
PROMPTS = {"free": "", "heading": "KING HENRY:\nWhat news"}
OWN_CONTEXT = "own"  # the twin's rows: it slides its context itself (mdlm_hf.autoregressive.KEPT_CONTEXT)
TARGETS = "names >= 0.90, empty <= 0.03, repeated lines <= held-out + 0.02, no loop"


def quality(
    model: MDLM,
    rule: str,
    contexts: list[int],
    seeds: list[int],
    samples: int,
    store_path: Path,
    twin: MDLM | None = None,
) -> None:
    """Samples and stores LENGTH-character texts of `rule` for each window_context, prompt and seed not yet stored
    (rule "twin": of the autoregressive `twin`, which slides its own context, OWN_CONTEXT; stored with its model's
    texts and its own fingerprint)."""
    fingerprint = model_fingerprint(model)
    options = rule_options(rule)
    writer, made_by = (twin, {"twin": model_fingerprint(twin)}) if rule == "twin" else (model, {})
    for context in [OWN_CONTEXT] if rule == "twin" else contexts:
        window = {} if rule == "twin" else {"window_context": context}
        for name, prompt in PROMPTS.items():
            for seed in seeds:
                key = f"{fingerprint}|{rule}|{context}|{name}|{seed}"
                if key in load_store(store_path) and load_store(store_path)[key].get("twin") == made_by.get("twin"):
                    continue
                canvas = prompt_canvas(model, prompt, LENGTH - len(prompt)).expand(samples, -1).clone()
                start = time.perf_counter()
                state = final_state(sample(writer, canvas, options, seed=seed, **window))
                seconds = time.perf_counter() - start
                store = load_store(store_path)
                store[key] = dict(
                    texts=[model.tokenizer.decode(row) for row in state.tokens],
                    written=(canvas[0] == model.mask_id).tolist(),
                    passes=state.num_forward_passes,
                    seconds=seconds,
                    seed=seed,
                    **made_by,
                )
                save_store(store_path, store)
                print(
                    f"{rule} / context {context} / {name} / seed {seed}: "
                    f"{state.num_forward_passes} passes, {seconds:.0f} s"
                )


def row(label: str, samples: list[Sample], context: dict, passes: str = "-") -> str:
    """One table row: the structure metrics of `samples` pooled, and their share with a loop."""
    m = context_metrics(samples, context)
    loops = sum(repeated_span(s.text) is not None for s in samples)
    return (
        f"| {label} | {len(samples)} | {passes} | {fmt(m['headings_per_1k'], 1)} | {fmt(m['real_names'])} | "
        f"{fmt(m['empty_speeches'])} | {fmt(m['same_speaker_twice'])} | {fmt(m['same_play'])} | "
        f"{fmt(m['repeated_lines'])} | "
        f"{fmt(m['long_lines'], 3)} | {fmt(m['run_on_headings'])} | {fmt(m['valid_words'], 3)} | "
        f"{fmt(m['judge_nll'])} | {loops} |"
    )


def report(model: MDLM, store_path: Path) -> str:
    """The markdown table of the stored texts of these weights, beside held-out windows of LENGTH characters."""
    context = report_context()
    fingerprint = model_fingerprint(model)
    store = {k: v for k, v in load_store(store_path).items() if k.startswith(fingerprint + "|")}
    lines = [
        f"{LENGTH}-character texts. Held-out text: {context['heldout_name']}. Targets: {TARGETS}.\n",
        "| text | samples | passes | headings/1k | names | empty | twice | same play | repeated lines | long lines "
        "| run-on headings | valid words | judge NLL | loops |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        row("held-out Shakespeare", heldout_samples(context["reference"], 48, 0, LENGTH), context),
    ]

    def order(key: str) -> tuple:
        _, rule, window_context, prompt, seed = key.split("|")
        return prompt, rule, -1 if window_context == OWN_CONTEXT else int(window_context), int(seed)

    keys = sorted(store, key=order)
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for key in keys:
        _, rule, window_context, prompt, _ = key.split("|")
        groups.setdefault((prompt, rule, window_context), []).append(store[key])
    for (prompt, rule, window_context), rows in groups.items():
        samples = [Sample(t, r["written"]) for r in rows for t in r["texts"]]
        seeds = ", ".join(str(r["seed"]) for r in rows)
        how = "its own sliding context" if window_context == OWN_CONTEXT else f"window context {window_context}"
        label = f"{prompt}, {rule}, {how} (seeds {seeds})"
        lines.append(row(label, samples, context, fmt(statistics.mean(r["passes"] for r in rows), 0)))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Parses the flags, then samples texts (quality) or writes the table of the stored ones (report)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("quality", "report"))
    parser.add_argument("--model", default=None)
    parser.add_argument("--twin", default=None, help="the autoregressive twin's directory (default: the shipped one)")
    parser.add_argument("--rule", default="default", choices=list(RULES), help="quality: the structure suite's rule")
    parser.add_argument("--contexts", type=int, nargs="*", default=[64])
    parser.add_argument("--seeds", type=whole_number(0), nargs="*", default=[0, 1, 2])
    parser.add_argument("--samples", type=whole_number(1), default=16)
    parser.add_argument("--threads", type=thread_count, default=2)
    parser.add_argument("--store", default=str(STORE), help="where texts are stored and read")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, source = load_model(args.model)
    print(f"model: {source} ({model.denoise_dtype}), {args.threads} threads")
    store_path = Path(args.store)
    if args.what == "quality":
        twin = load_twin(args.twin, model)[0] if args.rule == "twin" else None
        quality(model, args.rule, args.contexts, args.seeds, args.samples, store_path, twin)
    else:
        table = report(model, store_path)
        store_path.parent.mkdir(parents=True, exist_ok=True)
        table_path(store_path).write_text(table)
        print(table)


if __name__ == "__main__":
    main()
