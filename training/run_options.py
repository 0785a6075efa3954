"""The command line of a training run: the parser of training.flags.FLAGS, the checks of single flags and of flags
taken together, and what a resume keeps and changes."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from mdlm_hf.model import check_config
from mdlm_hf.objectives import objective_named
from training.flags import (
    FLAGS,
    FLAGS_BY_NAME,
    MACHINE_FLAGS,
    OBJECTIVE_SETTINGS,
    RESUMABLE_CHANGES,
    SHAPE_FLAGS,
    RunSettings,
    add_flags,
    flag,
)
from training.tracking import missing_package

_NOT_GIVEN = object()
MAX_BATCH_CHARS = 2**24  # characters per step and process: 256x the GPU job's batch of 256 windows of 256
MODEL_SETTINGS = (*SHAPE_FLAGS, "dropout")  # the flags of the MDLM config, beside the text's characters


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    """Every flag of a run, in the table's order; `description`: the --help text's."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(parser)
    return parser


def parse_args(argv: list[str] | None = None, description: str | None = None) -> tuple[RunSettings, set[str]]:
    """The run's settings from the command line (every knob of the run is a flag) and the names of those given
    explicitly; `description`: the --help text's (training.train's docstring)."""
    p = build_parser(description)
    # argparse fills in a default only where the namespace has no value yet: sentinels reveal what was typed
    given = p.parse_args(argv, namespace=argparse.Namespace(**{f.name: _NOT_GIVEN for f in FLAGS}))
    explicit = {k for k, v in vars(given).items() if v is not _NOT_GIVEN}
    args = RunSettings(**vars(p.parse_args(argv)))
    if args.min_lr is None:
        args = dataclasses.replace(args, min_lr=args.lr / 10)
    problem = flag_problem(args) or (None if args.resume else settings_problem(args) or init_problem(args, explicit))
    if problem:  # before any work, as one line; a resume checks the merged settings in main
        p.error(problem)
    return args, explicit


def flag_problem(args: RunSettings) -> str | None:
    """What is wrong with a single flag's value (its check in the table), or None."""
    for f in FLAGS:
        if f.check is not None and (problem := f.check.problem(f.name, getattr(args, f.name))):
            return problem
    if (chars := args.batch_size * args.block_size) > MAX_BATCH_CHARS:  # hung in the fp32/bf16 timing, or no memory
        return (
            f"--batch-size {args.batch_size} of --block-size {args.block_size} is {chars:,} characters a step, more "
            f"than {MAX_BATCH_CHARS:,}: lower --batch-size"
        )
    return missing_package(args.tracker)  # this machine's, not the value's: the tracker's package


def repo_id_problem(repo_id: str) -> str | None:
    """Why `repo_id` cannot name a Hub repo, or None: asked before the work, not after the training and export."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        return f"{repo_id!r} is not a Hub repo id: {str(error).splitlines()[0]}"
    return None


def push_problem(repo_id: str | None, private: bool) -> str | None:
    """What is wrong with --push-to-hub and --private (train's and export's), or None."""
    if repo_id is not None and (problem := repo_id_problem(repo_id)):
        return f"--push-to-hub {problem}"
    if private and not repo_id:
        return "--private needs --push-to-hub"
    return None


def settings_problem(args: RunSettings) -> str | None:
    """What is wrong with the flags taken together (on a resume: the run's own merged with the typed ones), or None."""
    if args.min_lr > args.lr:
        return f"--min-lr {args.min_lr} is above --lr {args.lr}: the schedule decays from lr to min_lr"
    if args.max_steps < args.warmup_steps:
        return f"--max-steps {args.max_steps} is below --warmup-steps {args.warmup_steps}"
    if args.push_to_hub is not None and not args.export_dir:
        return "--push-to-hub needs --export-dir"
    if problem := push_problem(args.push_to_hub, args.private):
        return problem
    if args.new_data and not args.resume:
        return "--new-data needs --resume: a new run trains on its --data anyway"
    objective = objective_named(args.objective)
    for name, value in OBJECTIVE_SETTINGS.items():
        if name not in objective.settings and getattr(args, name) != value:
            return f"{flag(name)} is not an option of --objective {objective.name}: {objective.title} does not read it"
    try:  # the model's own checks (heads that divide the width, sane sizes), before any data is read
        check_config(**model_config_from_args(args, "ab"))
    except ValueError as error:
        return str(error)
    return None


def init_problem(args: RunSettings, explicit: set[str]) -> str | None:
    """What is wrong with --init-from beside the typed flags of a new run, or None."""
    # the shape first, then the objective, as the line says them
    typed = [flag(name) for name in sorted(SHAPE_FLAGS, key=lambda name: name == "objective") if name in explicit]
    if args.init_from and typed:
        return f"--init-from takes the model's shape and objective from {args.init_from}: drop {', '.join(typed)}"
    if args.init_from and args.export_dir and same_folder(args.init_from, args.export_dir):
        return (
            f"--export-dir {args.export_dir} is the --init-from model: the export would replace the model the run "
            "starts from; export somewhere else"
        )
    return None


def same_folder(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one folder (through links and `..`), a Hub id never being a local folder."""
    return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def resumed_args(args: RunSettings, explicit: set[str], saved: dict) -> RunSettings:
    """The checkpoint's own settings, with the flags a resume may change taken from the command line; a typed flag
    that would change the run itself (shape, optimizer, loss...) is a ValueError, neither ignored nor applied."""
    now = dataclasses.asdict(args)  # the command line's settings, typed or default
    conflicts = [
        f"{flag(k)} {now[k]} (the run has {saved[k]})"
        for k in sorted(explicit - set(RESUMABLE_CHANGES))
        if k in saved and now[k] != saved[k]
    ]
    if conflicts:
        raise ValueError(f"--resume keeps the run's own settings; these flags differ: {'; '.join(conflicts)}")
    # flags newer than the checkpoint keep today's defaults, flags it has that this version has not are dropped;
    # flags typed now win over the saved ones. The threads are the machine's, not the run's: a run from a larger
    # machine resumes with this one's default
    kept = {k: v for k, v in saved.items() if k in now and k not in MACHINE_FLAGS}
    merged = {**now, **kept, **{k: now[k] for k in explicit}, "resume": True, "out_dir": args.out_dir}
    changed = [
        f"{k}={now[k]} (was {saved.get(k, 'not set')})"
        for k in explicit - {"resume", "out_dir"}
        if now[k] != saved.get(k)
    ]
    if changed:
        print(f"resuming with changed settings: {', '.join(sorted(changed))}")
    return RunSettings(**merged)


def saved_setting_problem(saved: dict) -> str | None:
    """What is wrong with a checkpoint's saved flag whose value is not of its flag's type (a number for --lr, a whole
    number for --max-steps, a list of file names...), or None; flags unknown to this version are not checked."""
    for name, value in sorted(saved.items()):
        f = FLAGS_BY_NAME.get(name)
        if f is None or (value is None and f.kind is not bool):  # None: a flag that was not given
            continue
        if f.nargs is not None:
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                return f"{flag(name)} is {repr(value)[:40]}, not a list of file names"
            continue
        if f.choices is not None and value not in f.choices:
            return f"{flag(name)} is {repr(value)[:40]}, not one of {', '.join(map(str, f.choices))}"
        # a float flag takes a whole number too; a bool is an int to isinstance, but never a count or a number
        kind = f.kind
        fits = isinstance(value, (int, float) if kind is float else kind) and (kind is bool or type(value) is not bool)
        if not fits:
            words = {bool: "true or false", int: "a whole number", float: "a number", str: "text"}[kind]
            return f"{flag(name)} is {repr(value)[:40]}, not {words}"
    return None


def model_config_from_args(args: RunSettings, vocab: str) -> dict:
    """The MDLM constructor's arguments for a new run: the text's characters and the model flags."""
    return {"vocab": vocab, **{name: getattr(args, name) for name in MODEL_SETTINGS}}
