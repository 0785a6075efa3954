"""Train a character-level masked diffusion language model (or, with --objective ar, its autoregressive twin).

    python -m training.train --data ../shared/data/tinyshakespeare.txt --out-dir runs/shakespeare
    python -m training.train --data part1.txt part2.txt --out-dir runs/mine  # files joined by a newline
    torchrun --nproc_per_node 2 -m training.train --data input.txt     # data-parallel
    python -m training.train --out-dir runs/shakespeare --resume       # continue where it stopped

The defaults are the best recipe found for a CPU (training/RECIPE.md); an estimate is printed after the first steps.
The text is tokenized once into the run directory (training/corpus.py). Checkpoints are written atomically, every
--save-minutes and at every evaluation; Ctrl-C (or SIGTERM) saves and exits.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from mdlm_hf.objectives import objective_for_config
from training.checkpoints import RESUME_KEYS, RunError, load_checkpoint, prepare_dir, starting_point
from training.corpus import (
    Corpus,
    TextFacts,
    download_tinyshakespeare,
    load_tokens,
    scan_text,
    texts_trained_on,
    tokenize,
)
from training.export_dir import check_export_dir
from training.flags import CARD_FLAGS, SHAPE_FLAGS, RunSettings
from training.processes import Processes, StopRequest, setup_processes
from training.run_options import flag_problem, resumed_args, saved_setting_problem, settings_problem
from training.run_options import parse_args as parse_run_options
from training.tracking import open_tracker
from training.trainer import Trainer

DEFAULT_DATA_CACHE = Path.home() / ".cache" / "mdlm_hf" / "tinyshakespeare.txt"


# -- arguments: the typed flags, or on --resume the checkpoint's own with the typed changes


def parse_args(argv: list[str] | None = None) -> tuple[RunSettings, set[str]]:
    """The run's settings (training.flags) and the names of those given explicitly, with this script's help."""
    return parse_run_options(argv, __doc__)


def run_settings(argv: list[str] | None) -> tuple[RunSettings, set[str], dict | None]:
    """The run's settings, the flags typed, and the checkpoint to resume (None for a new run)."""
    args, explicit = parse_args(argv)
    ckpt_path = Path(args.out_dir) / "ckpt.pt"
    if not args.resume:
        if ckpt_path.exists():  # a new run would overwrite that run's checkpoint, best weights and history
            raise ValueError(
                f"--out-dir {args.out_dir} already holds a run ({ckpt_path.name}): pass --resume to continue it, or "
                "give another --out-dir"
            )
        check_new_run_dir(Path(args.out_dir))
        return args, explicit, None
    if not ckpt_path.is_file():
        raise ValueError(f"--resume: no checkpoint at {ckpt_path}")
    checkpoint = load_checkpoint(ckpt_path, RESUME_KEYS)
    saved = dict(checkpoint.get("args", {}))
    # a checkpoint from before --objective trained what its config says: compared as any flag of the run
    saved.setdefault("objective", objective_for_config(checkpoint["model_config"]).name)
    if problem := saved_setting_problem(saved):
        raise ValueError(f"{ckpt_path}: its args are malformed ({problem}): not as saved")
    check_copied_export(args, explicit, saved)
    args = resumed_args(args, explicit, saved)
    if problem := flag_problem(args) or settings_problem(args):  # the run's own settings with the typed changes
        raise ValueError(f"--resume: {problem}")
    return args, explicit, checkpoint


def fine_tuning_start(args: RunSettings, explicit: set[str]) -> tuple[RunSettings, dict]:
    """The settings with --init-from's model's shape and objective as the run's flags (for batches, resume and
    card), and that model."""
    start = starting_point(args.init_from)
    config = start["model_config"]
    if "dropout" in explicit:
        config["dropout"] = args.dropout
    shape = {name: config.get(name, getattr(args, name)) for name in (*SHAPE_FLAGS, "dropout")}
    args = dataclasses.replace(args, **shape)
    if problem := settings_problem(args):  # the diffusion-only flags against the saved model's objective
        raise ValueError(f"--init-from: {problem}")
    return args, start


# -- the run directory and the processes

RUN_MARKER = ".mdlm_run"  # written into --out-dir by the run that made it: a later new run may write there again


def check_new_run_dir(out_dir: Path) -> None:
    """Refuses a new run's --out-dir that holds files a run did not make: the run writes train.bin, history.json and
    its checkpoints there and clears temporary files, so a user's folder would lose them."""
    if not out_dir.is_dir() or (out_dir / RUN_MARKER).is_file():
        return
    if entries := sorted(entry.name + ("/" if entry.is_dir() else "") for entry in out_dir.iterdir()):
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise ValueError(
            f"--out-dir {out_dir} holds files a training run did not make ({shown}): a run writes its own files "
            "there, so give a new or empty directory"
        )


def check_copied_export(args: RunSettings, explicit: set[str], saved: dict) -> None:
    """Refuses to resume a copy of a run (its checkpoint written under another --out-dir) that would export into the
    original's --export-dir, unless --export-dir is typed again: the copy would replace the original's export."""
    export_dir, saved_out = saved.get("export_dir"), saved.get("out_dir")
    if "export_dir" in explicit or not export_dir or not isinstance(saved_out, str):
        return
    if os.path.abspath(saved_out) != os.path.abspath(args.out_dir):
        raise ValueError(
            f"--resume: this checkpoint was written in {saved_out}, and that run exports to {export_dir}; resuming "
            f"it in {args.out_dir} would replace that export: pass --export-dir for this run's own"
        )


def prepare_out_dir(args: RunSettings, processes: Processes) -> Path:
    """Marks --out-dir (made by prepare_dir) as a run's and removes what a killed write left there (rank 0)."""
    out_dir = Path(args.out_dir)
    if processes.is_main:
        (out_dir / RUN_MARKER).write_text('{"written_by": "python -m training.train"}\n', encoding="utf-8")
        for stale in out_dir.glob(".*.tmp"):  # SIGKILL cannot be caught, so its temporary files stay behind
            stale.unlink()
    return out_dir


# -- the data


def training_files(args: RunSettings) -> list[Path]:
    """The --data files, or TinyShakespeare, downloaded."""
    if args.data:
        return [Path(name) for name in args.data]
    if not DEFAULT_DATA_CACHE.is_file():
        print(f"no --data given: downloading TinyShakespeare to {DEFAULT_DATA_CACHE}...", flush=True)
    try:
        return [download_tinyshakespeare(DEFAULT_DATA_CACHE)]
    except RuntimeError as error:  # offline, or a corrupted download: the message says to pass --data
        raise RunError(str(error)) from error


def prepare_corpus(args: RunSettings, processes: Processes, files: list[Path], vocab: str | None) -> Corpus:
    """The run's token files: rank 0 reads the text, checks that it holds a block and writes them (or finds them
    written); then every rank maps them. `vocab`: a resumed run's own (None: the text's characters)."""
    out_dir = Path(args.out_dir)
    corpus = None
    if processes.is_main:
        facts = scan_text(files)
        extra_files = [Path(name) for name in args.train_extra or []]
        extra = scan_text(extra_files) if extra_files else None
        if args.resume and not args.new_data:
            check_same_text(out_dir, facts, files)
        if facts.train_chars <= args.block_size or facts.val_chars < 1:
            raise ValueError(
                f"text of {facts.chars} characters is too short for --block-size {args.block_size}: "
                f"the training split ({facts.train_chars} chars) must be longer than one block"
            )
        # a resume on --new-data keeps the texts it trained on before: an export may describe any of them
        earlier = (texts_trained_on(out_dir) or []) if args.resume else []
        corpus = tokenize(files, out_dir, facts, vocab, extra_files, extra, earlier)
    if processes.distributed:
        dist.barrier()  # a failure on rank 0 ends the run: torchrun stops the other ranks
    return corpus if corpus is not None else load_tokens(out_dir)


def check_same_text(out_dir: Path, facts: TextFacts, files: list[Path]) -> None:
    """A ValueError naming both texts when a resumed run is given another text than it trained on: its validation
    split would change under the run, and its curve would no longer be one curve (--new-data asks for it)."""
    trained = texts_trained_on(out_dir)  # None: no record of the run's text (an older run), nothing to compare with
    if trained and trained[0]["sha256"] not in (None, facts.sha256):
        before = ", ".join(trained[0]["files"] or ["(unnamed)"])
        raise ValueError(
            f"--resume: the run trained on {before}, but --data gives {', '.join(map(str, files))}, another text; "
            "its validation split, and so its curve, would change: pass --new-data to go on with it anyway"
        )


# -- the loop and the export


def train(trainer: Trainer, deadline: float) -> None:
    """Runs the loop until the run ends or is stopped, then saves; Ctrl-C and SIGTERM (a scheduler stopping the run)
    stop it at a step boundary."""
    args, processes = trainer.args, trainer.processes
    use_bf16 = trainer.choose_precision()
    stop = StopRequest(processes.is_main)
    try:
        if processes.is_main:  # one writer per run: the other ranks' metrics are rank 0's
            trainer.tracker = open_tracker(
                args.tracker, Path(args.out_dir), trainer.progress.step, dataclasses.asdict(args)
            )
            train_chars, val_chars = len(trainer.train_data), len(trainer.val_data)
            print(
                f"{trainer.model.num_parameters() / 1e6:.2f}M parameters, vocab {trainer.model.vocab_size}, "
                f"{train_chars:,} train / {val_chars:,} val chars, device {processes.device}, "
                f"{'bf16' if use_bf16 else 'fp32'}, {processes.world_size} process(es), "
                f"starting at step {trainer.progress.step}",
                flush=True,
            )
        trainer.loop(stop, deadline)
        trainer.save()  # every rank reached the same step boundary, so the collective save is safe
    finally:
        stop.close()
        trainer.tracker.finish()


def export_finished_run(args: RunSettings, files: list[Path], step: int) -> None:
    """Exports (and pushes) the run to --export-dir once it has reached --max-steps, else says why not."""
    if step < args.max_steps:
        print(f"export skipped: the run stopped at step {step} of {args.max_steps}; resume to finish and export")
        return
    from training.export import export_run

    card = {f.name: getattr(args, f.name) for f in CARD_FLAGS}  # --private and what the card says
    extra = [Path(name) for name in args.train_extra or []]
    export_run(Path(args.out_dir), Path(args.export_dir), files, args.push_to_hub, train_extra=extra, **card)


def main(argv: list[str] | None = None) -> dict:
    """Trains, evaluates and (optionally) exports; returns a summary of the run."""
    started = time.perf_counter()
    args, explicit, checkpoint = run_settings(argv)
    if args.export_dir:  # refused now rather than after the training
        check_export_dir(Path(args.export_dir), Path(args.out_dir))
        prepare_dir(Path(os.path.abspath(args.export_dir)).parent, "--export-dir's parent")
    prepare_dir(Path(args.out_dir), "--out-dir")
    processes = setup_processes(args)
    out_dir = prepare_out_dir(args, processes)
    files = training_files(args)
    # fine-tuning: a fresh run whose weights and shape are a saved model's
    args, start = fine_tuning_start(args, explicit) if checkpoint is None and args.init_from else (args, None)
    saved = checkpoint or start
    run_vocab = saved["model_config"].get("vocab") if saved is not None else None
    corpus = prepare_corpus(args, processes, files, run_vocab if isinstance(run_vocab, str) and run_vocab else None)
    trainer = Trainer(args, processes, corpus, checkpoint, start)
    train(trainer, started + args.max_minutes * 60 if args.max_minutes else math.inf)
    p = trainer.progress
    if processes.is_main and args.export_dir:
        export_finished_run(args, files, p.step)
    if processes.distributed:
        dist.barrier()
        dist.destroy_process_group()
    return {
        "step": p.step,
        "tokens_seen": p.tokens_seen,
        "wall_time": p.wall_time,
        "best_val_nelbo": p.best_val,
        "finished": p.step >= args.max_steps,  # a stop on the last step still finished the run
        "out_dir": str(out_dir),
        "model": trainer.model,
    }


def peer_failed(error: BaseException) -> bool:
    """Whether `error` is a collective operation failing because another process of a distributed run went away."""
    if int(os.environ.get("WORLD_SIZE", "1")) < 2:
        return False
    return isinstance(error, dist.DistError) or "closed by peer" in str(error) or "Connection reset" in str(error)


def cli(argv: list[str] | None = None) -> None:
    """`python -m training.train`: main, with the failures a user can act on as one line instead of a traceback."""
    try:
        main(argv)
    except (ValueError, FloatingPointError, RunError) as error:  # bad input, a diverged run, no network, full disk
        sys.exit(f"error: {error}")
    except (MemoryError, torch.OutOfMemoryError) as error:  # more than this machine holds: the batch, the model
        reason = " ".join(str(error).split())[:200] or type(error).__name__
        sys.exit(f"error: out of memory ({reason}); lower --batch-size or the model's size")
    except Exception as error:
        if not peer_failed(error):
            raise
        # under torchrun, another process's failure reaches this one as a broken connection: its error, printed
        # by that process, is the one to read, not this process's traceback
        sys.exit(f"rank {os.environ.get('RANK', '?')}: stopped because another process of the run failed (above)")
    except KeyboardInterrupt:  # a second Ctrl-C, or one before the training loop
        sys.exit("interrupted: quit without saving; the last checkpoint in --out-dir, if any, is kept")


if __name__ == "__main__":
    cli()
