"""One GPU call of at most 10 minutes: train the next model on TinyShakespeare and Shakespeare's other plays beside a
control, export them, and score them with the shipped models on the same characters.

    python -m training.build_corpus --tinyshakespeare tinyshakespeare.txt --out runs/corpus/more_plays.txt
    python -m evals.heldout_plays                      # runs/heldout/heldout_plays.txt
    python -m lab.gpu_job --data tinyshakespeare.txt --train-extra runs/corpus/more_plays.txt \\
        --heldout runs/heldout/heldout_plays.txt --out OUT

The runs train side by side on the one GPU, each the shipped recipe at batch 256 (on one H200 the four made 5.0
(d320) and 5.8 (d256) steps a second each, so 1,700 steps fit in 6 minutes):
  plays-d320       the candidate: d320 L6 on TinyShakespeare's training split and the other plays
  tiny-d320        its control: the same shape on TinyShakespeare alone (what the new text gives)
  plays-d256       the shipped shape on the new text (what the width gives)
  twin-plays-d320  the candidate's autoregressive twin (dropout 0.1), for Compare and the likelihood table
  twin-plays-d256  the shipped model's twin on its text (TinyShakespeare's training split and the plays)
Then each run is exported on the GPU (training.export), and every model, the shipped ones too, is scored on the
whole validation split (ELBO, 4 mask draws, seed 0; the exact left-to-right NLL) and on the held-out plays
(ELBO): OUT/metrics.json, with each run's curve; OUT/curves.png. The exports are packed as OUT/RUN.tar, in parts
of at most 16 MiB (the device returns 8 files of at most 16 MiB); the control's export stays behind.
--tiny: a CPU rehearsal of the whole job at a tiny size, in about a minute (tests/test_lab_gpu_job.py).

A window's runs are chosen by flags (`--runs`, `--steps`, `--minutes`, `--batch-size`, `--compile`) or by a plan file,
`--plan PLAN.json`, never by editing RUNS: {"runs": [{"name": "plays-d256", "n_embd": 256, "n_head": 4,
"extra_text": true, "objective": "diffusion", "returned": true}, ...], "steps": 8000, "minutes": 9, "batch_size":
256, "compile": false}; each key but "runs" is optional, and a flag typed on the command line wins over the plan.
A run's name is a plain name (it names its folder, its logs and its packed export); every number is checked as the
plan is read. Nothing is read, written or removed through a link: --out or --work typed as one is refused, and
so is one in --out or in the runs' folders of --work.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from lab.safe_files import link_problem, new_file, plain_name_problem, read_json, refuse_links, write_bytes
from mdlm_hf import MDLM, elbo
from mdlm_hf.likelihood import exact_nll
from mdlm_hf.objectives import OBJECTIVES as MODEL_OBJECTIVES
from mdlm_hf.objectives import objective_for_config, objective_of
from training.build_corpus import read_plays
from training.corpus import read_texts, split_text
from training.export import load_run
from training.flags import SHAPE_FLAGS

PART_BYTES = 16 * 2**20  # the largest file the device returns
RECIPE = (  # the shipped model's recipe (training/RECIPE.md), but its shape
    "--optimizer muon --muon-lr 0.02 --lr 2e-3 --zero-init-residual "
    "--loss-weighting uniform --warmup-steps 300 --ema 0.9995 --eval-chars 16384 --eval-samples 2 --block-size 256"
).split()
SHIPPED = {
    "shipped": Path("pretrained/mdlm-shakespeare-char"),
    "shipped-twin": Path("pretrained/mdlm-shakespeare-char-ar"),
}


# a student is distilled (lab.distill) from its init_from, a diffusion model
STARTS_FROM = {"student": "diffusion"}
OBJECTIVES = (*MODEL_OBJECTIVES, *STARTS_FROM)  # a run trains a model of one kind, or starts from one of another


@dataclass(frozen=True)
class Run:
    """One training run of the job: its shape, its text, its objective and the model it starts from."""

    name: str
    n_embd: int
    n_head: int
    extra_text: bool  # whether the other plays join the training split
    objective: str = "diffusion"
    returned: bool = True  # whether its export comes back from the device
    init_from: str | None = None  # a model folder whose weights it continues (its shape is that model's)

    def flags(self, args: argparse.Namespace) -> list[str]:
        """The run's `python -m training.train` (a student's `lab.distill`) flags."""
        extra = ["--train-extra", *args.train_extra] if self.extra_text else []
        if self.objective == "student":  # 32 -> 16 -> 8 passes in the job's time
            rounds = ["--rounds", "2", "--steps", str(args.steps), "--max-minutes", str(args.minutes)]
            size = ["--batch-size", str(args.batch_size)]
            return ["--teacher", str(self.init_from), *rounds, *size, *extra, "--data", args.data, "--seed", "0"]
        twin = ["--dropout", "0.1"] if self.objective == "ar" else []
        if self.init_from:  # the saved model's shape and objective; a fresh optimiser with a short warm-up
            start = ["--init-from", self.init_from, "--warmup-steps", str(args.warmup_steps)]
            return [*warm_recipe(), *start, *extra, *twin, "--data", args.data, "--seed", str(args.seed)]
        shape = ["--n-embd", str(self.n_embd), "--n-head", str(self.n_head), "--n-layer", str(args.n_layer)]
        twin += ["--objective", "ar"] if self.objective == "ar" else []
        return [*RECIPE, *shape, *extra, *twin, "--data", args.data, "--seed", str(args.seed)]

    def module(self) -> str:
        """What trains it."""
        return "lab.distill" if self.objective == "student" else "training.train"


def warm_recipe() -> list[str]:
    """RECIPE without the flags a warm start takes from its model (its shape)."""
    flags, index = [], 0
    while index < len(RECIPE):
        if RECIPE[index].lstrip("-").replace("-", "_") in SHAPE_FLAGS:
            index += 2 if index + 1 < len(RECIPE) and not RECIPE[index + 1].startswith("--") else 1
            continue
        flags.append(RECIPE[index])
        index += 1
    return flags


RUNS = (
    Run("plays-d320", 320, 5, extra_text=True),
    Run("tiny-d320", 320, 5, extra_text=False, returned=False),
    Run("plays-d256", 256, 4, extra_text=True),
    Run("twin-plays-d320", 320, 5, extra_text=True, objective="ar"),
    Run("twin-plays-d256", 256, 4, extra_text=True, objective="ar"),
)


def tiny(runs: tuple[Run, ...]) -> tuple[Run, ...]:
    """The runs at the CPU rehearsal's size."""
    return tuple(Run(r.name, 32, 2, r.extra_text, r.objective, r.returned, r.init_from) for r in runs)


TINY_RUNS = tiny(RUNS)
PLAN_SETTINGS = {"steps": int, "minutes": (int, float), "batch_size": int, "compile": bool, "warmup_steps": int}
COUNTS_FROM_ZERO = ("warmup_steps",)  # no warm-up is a warm-up (training.train takes 0); every other number is > 0
MAX_HISTORY_BYTES = 64 * 2**20  # a run's history.json: a row each 10 steps, ~200 KB at 12,000 steps


def number_problem(value: object, name: str, whole: bool, zero: bool = False) -> str | None:
    """Why a plan's or a flag's number is unfit (a bool, not a number, not whole where it counts, not finite, not
    above 0, or below 0 where `zero` may be), or None."""
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
        return f"{name} is {value!r}: it must be {'a whole number' if whole else 'a number'}"
    if not math.isfinite(value):
        return f"{name} is {value!r}: it must be a finite number"
    if value < 0 or (value == 0 and not zero):
        return f"{name} is {value!r}: it must be above 0" + (" (or 0)" if zero else "")
    return None


def setting_problem(name: str, value: object) -> str | None:
    """Why a plan's setting is unfit, or None."""
    if PLAN_SETTINGS[name] is bool:
        return None if isinstance(value, bool) else f"{name} is {value!r}: it must be true or false"
    return number_problem(value, name, whole=PLAN_SETTINGS[name] is int, zero=name in COUNTS_FROM_ZERO)


def run_problem(run: Run) -> str | None:
    """Why a plan's run is unfit (its name, a field's type or value), or None."""
    if problem := plain_name_problem(run.name, "the run"):
        return problem
    for field in ("n_embd", "n_head"):
        if problem := number_problem(getattr(run, field), field, whole=True):
            return f"run {run.name}: {problem}"
    for field in ("extra_text", "returned"):
        if not isinstance(getattr(run, field), bool):
            return f"run {run.name}: {field} is {getattr(run, field)!r}: it must be true or false"
    if not isinstance(run.objective, str) or run.objective not in OBJECTIVES:
        return f"run {run.name}: objective is {run.objective!r}: it must be one of {', '.join(OBJECTIVES)}"
    if run.init_from is not None and (not isinstance(run.init_from, str) or not run.init_from):
        return f"run {run.name}: init_from is {run.init_from!r}: it must be a folder's path"
    if run.n_embd % run.n_head:
        return f"run {run.name}: n_embd {run.n_embd} is not a multiple of n_head {run.n_head}"
    return None


def read_plan(path: Path) -> tuple[tuple[Run, ...], dict]:
    """A plan file's runs and settings (steps, minutes, batch_size, compile), or a ValueError naming what is wrong."""
    try:
        plan = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"--plan {path} is not a readable JSON file ({error})") from None
    if not isinstance(plan, dict) or not isinstance(plan.get("runs"), list) or not plan["runs"]:
        raise ValueError(f"--plan {path} must be a JSON object with a non-empty list of runs")
    unknown = sorted(set(plan) - {"runs", *PLAN_SETTINGS})
    if unknown:
        raise ValueError(
            f"--plan {path} has unknown keys {', '.join(unknown)}; it takes runs, {', '.join(PLAN_SETTINGS)}"
        )
    for name in PLAN_SETTINGS:
        if name in plan and (problem := setting_problem(name, plan[name])):
            raise ValueError(f"--plan {path}: {problem}")
    runs = []
    for entry in plan["runs"]:
        try:
            run = Run(**entry)
        except TypeError as error:
            raise ValueError(f"--plan {path}: a run {entry!r} is malformed ({error})") from None
        if problem := run_problem(run):
            raise ValueError(f"--plan {path}: {problem}")
        if run.objective == "student" and not run.init_from:
            raise ValueError(f"--plan {path}: student {run.name!r} needs init_from, its teacher's folder")
        runs.append(run)
    if len({run.name for run in runs}) < len(runs):
        raise ValueError(f"--plan {path}: two runs share a name")
    return tuple(runs), {name: plan[name] for name in PLAN_SETTINGS if name in plan}


def warm_start_problem(run: Run) -> str | None:
    """What is wrong with a run's init_from (a missing folder, another shape or objective than the plan says), or
    None: found before the window's minutes are spent."""
    if not run.init_from:
        return None
    config_path = Path(run.init_from) / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return f"run {run.name}: init_from {run.init_from} has no readable config.json ({error})"
    saved = (config.get("n_embd"), config.get("n_head"), objective_for_config(config).name)
    if saved != (run.n_embd, run.n_head, STARTS_FROM.get(run.objective, run.objective)):
        return f"run {run.name}: init_from {run.init_from} is not a {run.objective} model of n_embd {run.n_embd}"
    return None


def launch(command: list[str], log: Path, threads: int) -> subprocess.Popen:
    """Starts `python -m COMMAND...` with its output in `log`."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": str(threads)}
    with new_file(log) as file:
        return subprocess.Popen([sys.executable, "-m", *command], stdout=file, stderr=subprocess.STDOUT, env=env)


def wait_all(processes: dict[str, subprocess.Popen], logs: dict[str, Path], what: str) -> list[str]:
    """Waits for every process; the names of those that failed, with their logs' last lines printed."""
    failed = []
    for name, process in processes.items():
        if process.wait() != 0:
            failed.append(name)
            tail = logs[name].read_text(errors="replace").splitlines()[-5:]
            print(f"{what} {name} failed (rc {process.returncode}):\n  " + "\n  ".join(tail), flush=True)
    return failed


def train_all(runs: tuple[Run, ...], args: argparse.Namespace, work: Path) -> list[str]:
    """Trains the runs side by side; the names of those that failed."""
    device = ["--device", "cuda", "--dtype", "bfloat16"]
    if args.tiny:
        device = ["--device", "cpu", "--threads", "1", "--warmup-steps", "2"]
    schedule = ["--max-steps", str(args.steps), "--eval-interval", str(max(args.steps // 10, 1))]
    schedule += ["--max-minutes", str(args.minutes), "--batch-size", str(args.batch_size)]
    schedule += ["--compile"] if args.compile else []
    processes, logs = {}, {}
    for run in runs:
        logs[run.name] = work / f"{run.name}.train.log"
        where = ["--device", args.device] if run.objective == "student" else [*device, *schedule]
        command = [run.module(), *run.flags(args), *where, "--out-dir", str(work / run.name)]
        processes[run.name] = launch(command, logs[run.name], threads=1 if args.tiny else 2)
    return wait_all(processes, logs, "training")


def model_dir(run: Run, work: Path) -> Path:
    """Where a trained run's model is: a student's last round's export, else the run's folder (its best weights)."""
    return work / run.name / "student-8" if run.objective == "student" else work / run.name


def export_dir(run: Run, work: Path) -> Path:
    """Where a trained run's Hub-ready folder is: a student's own export, else training.export's."""
    return model_dir(run, work) if run.objective == "student" else work / "export" / run.name


def tiny_parents(runs: tuple[Run, ...], args: argparse.Namespace, work: Path) -> tuple[Run, ...]:
    """The rehearsal's warm starts: each init_from becomes a tiny model trained and exported here first (the
    shipped models are another shape), so the rehearsal takes the whole path a window takes."""
    parents = {}
    for run in runs:
        if run.init_from and run.init_from not in parents:
            objective = "ar" if run.objective == "ar" else "diffusion"
            parents[run.init_from] = Run(f"parent-{len(parents)}", 32, 2, False, objective, returned=False)
    if not parents:
        return runs
    failed = train_all(tuple(parents.values()), args, work)
    failed += export_all(tuple(parents.values()), args, work)
    if failed:
        sys.exit(f"error: the rehearsal's parents {', '.join(failed)} failed (their logs' ends are above)")
    moved = {path: str(export_dir(parent, work)) for path, parent in parents.items()}
    return tuple(replace(run, init_from=moved[run.init_from]) if run.init_from else run for run in runs)


def extra_text_name(paths: list[str]) -> str:
    """What the card calls TinyShakespeare with the --train-extra text: its plays counted where the corpus builder's
    manifest says (16 for the shipped model's corpus, 25 for today's)."""
    plays = sum(len(read_plays(Path(path))) for path in paths)
    return f"TinyShakespeare and {plays} more plays" if plays else "TinyShakespeare and more text"


def export_all(runs: tuple[Run, ...], args: argparse.Namespace, work: Path) -> list[str]:
    """Exports the trained runs side by side (bf16 weights: the device's files are at most 16 MiB); failures."""
    processes, logs = {}, {}
    for run in runs:
        if run.objective == "student":  # lab.distill exported each round already
            continue
        logs[run.name] = work / f"{run.name}.export.log"
        extra = ["--train-extra", *args.train_extra] if run.extra_text else []
        command = [
            "training.export",
            "--run-dir",
            str(work / run.name),
            "--export-dir",
            str(work / "export" / run.name),
        ]
        command += ["--data", args.data, *extra, "--weights-dtype", "bfloat16", "--device", args.device]
        command += ["--dataset-name", extra_text_name(args.train_extra) if run.extra_text else "TinyShakespeare"]
        processes[run.name] = launch(command, logs[run.name], threads=1 if args.tiny else 4)
    return wait_all(processes, logs, "export")


def score(model: MDLM, val: torch.Tensor, heldout: torch.Tensor, nll_chars: int) -> dict:
    """The whole validation split's ELBO (4 mask draws, seed 0) and exact left-to-right NLL, and the held-out
    plays' ELBO; an autoregressive model's NLL on both."""
    if not objective_of(model).fills_blanks:  # a twin: exact in one pass a window, and no ELBO to bound
        return {"val_nll": exact_nll(model, val), "heldout_nll": exact_nll(model, heldout)}
    seeded = torch.Generator().manual_seed
    return {
        "val_elbo": elbo(model, val, 4, seeded(0)).nats_per_char,
        "val_exact_nll": exact_nll(model, val[:nll_chars], batch_size=512),
        "heldout_elbo": elbo(model, heldout, 4, seeded(0)).nats_per_char,
    }


def load(path: Path) -> MDLM:
    """A saved model (a folder), or a run's best weights (a run folder: its best.pt, else ckpt.pt), in fp32."""
    if (path / "config.json").is_file():
        return MDLM.from_pretrained(str(path), fast=False).float()
    return load_run(path)[1].float()


def score_all(models: dict[str, Path], args: argparse.Namespace) -> dict[str, dict]:
    """Every model's scores on the same characters, in fp32 on the job's device (a run's scores do not wait on its
    export: they read its best weights)."""
    _, val_text = split_text(read_texts([args.data]))
    heldout_text = Path(args.heldout).read_text(encoding="utf-8")
    scores = {}
    for name, path in models.items():
        started = time.perf_counter()
        model = load(path).to(args.device)
        if unknown := model.tokenizer.unknown_chars(val_text + heldout_text):  # a control on a text of fewer
            scores[name] = {"skipped": f"its vocabulary lacks {''.join(unknown)[:20]!r}"}
            continue
        val, heldout = (torch.tensor(model.tokenizer.encode(text)) for text in (val_text, heldout_text))
        nll_chars = val.numel() if not args.tiny else 512
        scores[name] = {**score(model, val, heldout, nll_chars), "val_chars": val.numel()}
        scores[name]["heldout_chars"] = heldout.numel()  # what the ship check measures again, on the same texts
        if "val_exact_nll" in scores[name]:
            scores[name]["val_exact_nll_chars"] = min(nll_chars, val.numel())
        scores[name]["parameters"] = model.num_parameters()
        print(f"scored {name} in {time.perf_counter() - started:.0f} s: {scores[name]}", flush=True)
    return scores


def curves(runs: tuple[Run, ...], work: Path) -> dict[str, dict]:
    """Each run's periodic validation, as its history.json holds it."""
    found = {}
    for run in runs:
        path = work / run.name / "history.json"
        if path.is_file() and not path.is_symlink():
            try:
                found[run.name] = read_json(path, MAX_HISTORY_BYTES)
            except ValueError as error:  # the runs are trained: a curve left out costs less than the window
                print(f"note: {run.name}'s curve is left out ({' '.join(str(error).split())})", flush=True)
    return found


def pack(export: Path, out: Path) -> list[str]:
    """Packs an export folder as OUT/NAME.tar, split into parts of at most PART_BYTES; the files written (each a new
    file taking its name: never written through a link)."""
    descriptor, packing = tempfile.mkstemp(dir=out, prefix=f".{export.name}.tar.")
    try:
        with os.fdopen(descriptor, "w+b") as file:
            with tarfile.open(fileobj=file, mode="w") as tar:
                tar.add(export, arcname=export.name)
            size = file.tell()
            file.seek(0)
            names = [f"{export.name}.tar"] if size <= PART_BYTES else []
            names = names or [f"{export.name}.tar.{index:02d}" for index in range(math.ceil(size / PART_BYTES))]
            for name in names:  # cat NAME.tar.* > NAME.tar
                write_bytes(out / name, file.read(PART_BYTES))
        return names
    finally:
        Path(packing).unlink(missing_ok=True)


def plot_curves(found: dict[str, dict], path: Path) -> None:
    """The runs' validation curves on one figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    for name, history in found.items():
        rows = history.get("val", [])
        points = [(row["step"], row.get("nelbo_ema", row["nelbo"])) for row in rows]
        if points:
            axis.plot(*zip(*points, strict=True), label=name)
    axis.set(xlabel="step", ylabel="validation NELBO or NLL (EMA weights, nats/char)")
    axis.legend()
    figure.tight_layout()
    image = io.BytesIO()
    figure.savefig(image, format="png", dpi=100)
    plt.close(figure)
    write_bytes(path, image.getvalue())


def job_parser() -> argparse.ArgumentParser:
    """The job's flags (a plan's settings become their defaults in `parse_args`)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="TinyShakespeare (its split: the validation characters)")
    parser.add_argument("--train-extra", nargs="+", required=True, help="the other plays (training.build_corpus)")
    parser.add_argument("--heldout", required=True, help="the held-out plays (evals.heldout_plays)")
    parser.add_argument("--out", required=True, help="the folder the device returns")
    parser.add_argument("--work", default="runs/gpu_job", help="the runs' folders (not returned)")
    parser.add_argument("--steps", type=int, default=1700, help="steps of each run")
    parser.add_argument("--minutes", type=float, default=6.5, help="each run stops here, finished or not")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--n-layer", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument(
        "--runs", nargs="+", default=None, help=f"only these runs (of {', '.join(r.name for r in RUNS)})"
    )
    parser.add_argument("--tiny", action="store_true", help="a CPU rehearsal at a tiny size")
    parser.add_argument("--compile", action="store_true", help="torch.compile each run's training steps")
    parser.add_argument("--warmup-steps", type=int, default=100, help="a warm start's warm-up (a fresh optimiser)")
    parser.add_argument("--plan", default=None, help="a JSON plan of the runs and settings (see the module's doc)")
    return parser


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, tuple[Run, ...]]:
    """The flags (with `device` set) and the runs they choose; the parser's one-line error for a missing file, a
    character the training text lacks, no GPU, an unknown run or a warm start that does not fit."""
    parser = job_parser()
    planned = RUNS
    plan_path = parser.parse_known_args(argv)[0].plan
    if plan_path is not None:  # the plan's settings are the defaults; typed flags still win
        try:
            planned, settings = read_plan(Path(plan_path))
        except ValueError as error:
            parser.error(str(error))
        parser.set_defaults(**settings)
    args = parser.parse_args(argv)
    for flag, whole, zero in (("steps", True, False), ("minutes", False, False), ("batch_size", True, False)):
        if problem := number_problem(getattr(args, flag), f"--{flag.replace('_', '-')}", whole, zero):
            parser.error(problem)
    for flag in ("n_layer", "warmup_steps"):
        if problem := number_problem(getattr(args, flag), f"--{flag.replace('_', '-')}", True, flag == "warmup_steps"):
            parser.error(problem)
    for path in [args.data, *args.train_extra, args.heldout]:
        if not Path(path).is_file():
            parser.error(f"{path} does not exist or is not a file")
    known = set(read_texts([args.data, *args.train_extra]))
    if unknown := sorted(set(Path(args.heldout).read_text(encoding="utf-8")) - known):
        parser.error(f"--heldout has characters the training text lacks: {''.join(unknown)[:20]!r}")
    if not args.tiny and not torch.cuda.is_available():
        parser.error("no GPU here: pass --tiny for the CPU rehearsal")
    args.device = "cpu" if args.tiny else "cuda"
    runs = tiny(planned) if args.tiny else planned
    if args.runs:
        if unknown := set(args.runs) - {run.name for run in runs}:
            parser.error(f"--runs: no run named {', '.join(sorted(unknown))}")
        runs = tuple(run for run in runs if run.name in args.runs)
    if not args.tiny and (problem := next(filter(None, map(warm_start_problem, runs)), None)):
        parser.error(problem)
    if problem := link_in_the_way(runs, Path(args.out), Path(args.work)):
        parser.error(problem)
    return args, runs


def link_in_the_way(runs: tuple[Run, ...], out: Path, work: Path) -> str | None:
    """A link anywhere in --out, or where the job writes in --work (a run's folder, its logs, its export, a
    rehearsal's parents'), said in one line before any work; else None. Nothing may send the job's writes outside
    its folders."""
    if problem := link_problem(out) or link_problem(work):  # the folders as typed: OUT -> elsewhere is refused too
        return problem
    if out.is_dir():
        try:
            refuse_links(out)
        except ValueError as error:
            return str(error)
    names = [run.name for run in runs] + [f"parent-{index}" for index in range(len(runs))]
    paths = [work / "export"]
    for name in names:
        paths += [work / name, work / f"{name}.train.log", work / f"{name}.export.log", work / "export" / name]
    return next(filter(None, map(link_problem, paths)), None)


def main(argv: list[str] | None = None) -> dict:
    """`python -m lab.gpu_job`: train, export, score, pack; returns metrics.json's content."""
    args, runs = parse_args(argv)
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    runs = tiny_parents(runs, args, work) if args.tiny else runs
    failed = train_all(runs, args, work)
    trained = tuple(run for run in runs if run.name not in failed)
    print(f"trained in {time.perf_counter() - started:.0f} s", flush=True)
    failed += export_all(trained, args, work)
    exported = {run.name: export_dir(run, work) for run in trained if run.name not in failed}
    print(f"exported in {time.perf_counter() - started:.0f} s", flush=True)
    metrics = {"runs": {run.name: vars(run) | {"flags": run.flags(args)} for run in runs}, "failed": failed}
    metrics["curves"] = curves(runs, work)
    trained_dirs = {run.name: model_dir(run, work) for run in trained}
    metrics["scores"] = score_all({**(SHIPPED if not args.tiny else {}), **trained_dirs}, args)
    metrics["files"] = [
        name for run in trained if run.returned and run.name in exported for name in pack(exported[run.name], out)
    ]
    metrics["seconds"] = round(time.perf_counter() - started)
    plot_curves(metrics["curves"], out / "curves.png")
    write_bytes(out / "metrics.json", json.dumps(metrics, indent=2, default=str).encode("utf-8"))
    print(f"done in {metrics['seconds']} s: {out / 'metrics.json'}", flush=True)
    if failed:
        sys.exit(f"error: {', '.join(failed)} failed (their logs' ends are above)")
    return metrics


if __name__ == "__main__":
    main()
