"""The options of a training run: every flag of `python -m training.train` (grouped: data, model, optimisation, the
run, the card), their checks, and what a resume may change. The card's flags are shared with training.export,
and `train` and `export` both import this module; neither imports the other for it.
"""

from __future__ import annotations

import argparse
import difflib
import math

from mdlm_hf.devices import DEVICE_HELP, device_problem, max_threads
from mdlm_hf.diffusion import LOSS_WEIGHTINGS
from mdlm_hf.model import MLP_KINDS, NORM_KINDS, check_config
from mdlm_hf.objectives import OBJECTIVES, objective_named
from training.optimizers import OPTIMIZERS
from training.tracking import TRACKERS, missing_package

# the texts sampled at each evaluation: few steps so they cost seconds, a fixed seed so runs compare
EVAL_TEXTS, EVAL_TEXT_STEPS, EVAL_TEXT_SEED = 2, 32, 0

# the diffusion loss's own flags, at the values an autoregressive run leaves them (it has no masks to weigh or draw)
DIFFUSION_ONLY = {
    "loss_weighting": "uniform",
    "t_min": 1e-3,
    "time_conditioning": False,
    "eval_samples": 2,
    "stream_masks": 0.0,
}
# the model's shape: with --init-from it is the saved model's, so typing one of these is an error
SHAPE_FLAGS = (
    "n_layer",
    "n_head",
    "n_embd",
    "block_size",
    "position_encoding",
    "time_conditioning",
    "norm",
    "mlp",
    "qk_norm",
    "objective",
)

# flags a resumed run may change; every other flag is the run's own and comes from its checkpoint
RESUMABLE_CHANGES = (
    "data",
    "new_data",
    "out_dir",
    "resume",
    "max_steps",
    "stop_at_step",
    "max_minutes",
    "save_minutes",
    "eval_interval",
    "log_interval",
    "eval_sample_chars",
    "tracker",
    "export_dir",
    "push_to_hub",
    "private",
    "dataset_name",  # what the export's card says of the data: not the run's own, so a resume may name it
    "license",
    "language",
    "threads",
    "device",
    "dtype",
    "compile",
)
MACHINE_FLAGS = ("threads", "compile")  # a resume takes these from its own command line, never from the checkpoint
_NOT_GIVEN = object()


def add_data_flags(p: argparse.ArgumentParser) -> None:
    """The text, where the run lives, and resuming it."""
    p.add_argument(
        "--data",
        type=str,
        nargs="+",
        default=None,
        metavar="FILE",
        help="UTF-8 text file(s), joined by a newline in the order given (default: download TinyShakespeare)",
    )
    p.add_argument(
        "--train-extra",
        type=str,
        nargs="+",
        default=None,
        metavar="FILE",
        help="UTF-8 text file(s) that join the training split only (the validation split stays --data's)",
    )
    p.add_argument("--out-dir", type=str, default="runs/default", help="checkpoints, history and export go here")
    p.add_argument("--resume", action="store_true", help="continue from OUT_DIR/ckpt.pt")
    p.add_argument(
        "--new-data",
        action="store_true",
        help="with --resume: go on with a text other than the run's (its validation split, and so its curve, change)",
    )


def add_model_flags(p: argparse.ArgumentParser) -> None:
    """What the model learns, and its shape: the MDLM config."""
    p.add_argument(
        "--objective",
        choices=tuple(OBJECTIVES),
        default="diffusion",
        help="diffusion: the masked diffusion model; ar: its autoregressive twin, the same network with a causal "
        "mask, trained on the next character (mdlm_hf/autoregressive.py)",
    )
    p.add_argument(
        "--init-from",
        type=str,
        default=None,
        metavar="MODEL",
        help="start from a saved model's weights and shape (a save_pretrained directory or Hub id) with a fresh "
        "optimizer and schedule: fine-tuning; the shape flags are then the model's own",
    )
    p.add_argument("--n-layer", type=int, default=6)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=256)
    p.add_argument("--block-size", type=int, default=256, help="context length in characters")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--position-encoding", choices=["rope", "learned"], default="rope")
    p.add_argument("--time-conditioning", action="store_true")
    p.add_argument("--norm", choices=NORM_KINDS, default="rmsnorm")
    p.add_argument("--mlp", choices=MLP_KINDS, default="relu2")
    p.add_argument(
        "--qk-norm", action=argparse.BooleanOptionalAction, default=True, help="RMS-normalise queries and keys per head"
    )
    p.add_argument(
        "--zero-init-residual",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="residual projections start at zero",
    )


def add_optimisation_flags(p: argparse.ArgumentParser) -> None:
    """Batch, schedule, optimizers, loss, precision and device."""
    p.add_argument("--batch-size", type=int, default=32, help="sequences per step per process")
    p.add_argument("--max-steps", type=int, default=1500)
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="muon", help="muon: Muon for the blocks' matrices")
    p.add_argument("--lr", type=float, default=2e-3, help="peak AdamW learning rate")
    p.add_argument("--min-lr", type=float, default=None, help="final AdamW learning rate (default lr / 10)")
    p.add_argument("--muon-lr", type=float, default=0.02, help="peak Muon learning rate (same schedule shape)")
    p.add_argument("--muon-momentum", type=float, default=0.95)
    p.add_argument("--muon-weight-decay", type=float, default=0.01, help="decoupled, scaled by the Muon lr")
    p.add_argument("--ema", type=float, default=0.999, help="EMA decay of the weights for eval and export; 0: off")
    p.add_argument("--warmup-steps", type=int, default=200)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.99)
    p.add_argument("--grad-clip", type=float, default=1.0, help="max gradient norm (0: off)")
    p.add_argument("--loss-weighting", choices=list(LOSS_WEIGHTINGS), default="uniform")
    p.add_argument("--t-min", type=float, default=1e-3, help="training mask ratios t are drawn from [t_min, 1)")
    p.add_argument(
        "--stream-masks",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="this share of each batch is masked as the default (streams) sampler leaves a canvas, stretches with "
        "their starts known (mdlm_hf.diffusion.stream_masks), the rest uniformly; needs --loss-weighting uniform",
    )
    p.add_argument(
        "--dtype",
        choices=["auto", "float32", "bfloat16"],
        default="auto",
        help="autocast dtype; auto = bfloat16 on GPU, and on CPU whichever a timed trial step finds faster",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model for the training steps (compiling takes a while first: for long GPU runs; "
        "time it against eager steps with the GPU job's --compile)",
    )
    p.add_argument("--device", type=str, default="auto", help=DEVICE_HELP)
    p.add_argument("--threads", type=int, default=0, help="CPU threads per process (0: torch's default)")
    p.add_argument("--seed", type=int, default=1337)


def add_run_flags(p: argparse.ArgumentParser) -> None:
    """Logging, evaluation, budgets, and the export at the end."""
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--eval-interval", type=int, default=250)
    p.add_argument("--eval-chars", type=int, default=16384, help="validation characters per periodic evaluation")
    p.add_argument("--eval-samples", type=int, default=2, help="mask draws per validation window")
    p.add_argument(
        "--eval-sample-chars",
        type=int,
        default=128,
        help=f"print {EVAL_TEXTS} texts of this many characters (at most --block-size) at each evaluation; 0: off",
    )
    p.add_argument(
        "--tracker",
        choices=TRACKERS,
        default="none",
        help="also log metrics and samples to TensorBoard (OUT_DIR/tensorboard) or trackio; needs that package",
    )
    p.add_argument(
        "--max-minutes",
        type=float,
        default=0,
        help="stop (saving) after this many minutes of this invocation (a resume gets its own); 0: no limit",
    )
    p.add_argument(
        "--save-minutes",
        type=float,
        default=10,
        help="also save a checkpoint after this many minutes without one; 0: only at evaluations and the end",
    )
    p.add_argument(
        "--stop-at-step",
        type=int,
        default=0,
        help="stop (saving) after this step without changing the schedule, to split a run; 0: never",
    )
    p.add_argument("--export-dir", type=str, default=None, help="write the Hub-ready model here at the end")
    p.add_argument("--push-to-hub", type=str, default=None, metavar="REPO_ID", help="upload the export to this repo")


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    """Every flag of a run, in its groups; `description`: the --help text's."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    for add_flags in (add_data_flags, add_model_flags, add_optimisation_flags, add_run_flags, add_card_arguments):
        add_flags(p)
    return p


def parse_args(argv: list[str] | None = None, description: str | None = None) -> tuple[argparse.Namespace, set[str]]:
    """Command-line flags (every knob of the run is one of them) and the names of those given explicitly;
    `description`: the --help text's (training.train's docstring)."""
    p = build_parser(description)
    # argparse fills in a default only where the namespace has no value yet: sentinels reveal what was typed
    given = p.parse_args(argv, namespace=argparse.Namespace(**{k: _NOT_GIVEN for k in vars(p.parse_args([]))}))
    explicit = {k for k, v in vars(given).items() if v is not _NOT_GIVEN}
    args = p.parse_args(argv)
    if args.min_lr is None:
        args.min_lr = args.lr / 10
    problem = flag_problem(args) or (None if args.resume else settings_problem(args) or init_problem(args, explicit))
    if problem:  # before any work, as one line; a resume checks the merged settings in main
        p.error(problem)
    return args, explicit


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


MAX_BATCH_CHARS = 2**24  # characters per step and process: 256x the GPU job's batch of 256 windows of 256


def flag_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with a single flag's value, or None."""
    for name in ("out_dir", "init_from", "export_dir"):  # "" would be the working directory, or silently nothing
        value = getattr(args, name)
        if value is not None and not value.strip():
            return f"{flag(name)} is empty: give a path"
    rules = [
        (
            ("n_layer", "n_head", "n_embd", "block_size", "batch_size", "max_steps")
            + ("eval_interval", "log_interval", "eval_chars", "eval_samples"),
            lambda x: x >= 1,
            "must be >= 1",
        ),
        (("warmup_steps", "stop_at_step", "eval_sample_chars"), lambda x: x >= 0, "must be >= 0"),
        (("threads",), lambda x: 0 <= x <= max_threads(), f"must be from 0 (torch's default) to {max_threads()}"),
        (("seed",), lambda x: 0 <= x < 2**63, "must be in [0, 2**63)"),
        (("lr", "muon_lr"), lambda x: math.isfinite(x) and x > 0, "must be a number > 0"),
        (
            ("min_lr", "weight_decay", "muon_weight_decay", "grad_clip", "max_minutes", "save_minutes"),
            lambda x: math.isfinite(x) and x >= 0,
            "must be a number >= 0",
        ),
        (("muon_momentum", "beta1", "beta2", "dropout"), lambda x: 0 <= x < 1, "must be in [0, 1)"),
        (("ema",), lambda x: 0 <= x < 1, "must be in [0, 1) (0 turns it off)"),
        (("t_min",), lambda x: 0 < x < 1, "must be in (0, 1)"),
        (("stream_masks",), lambda x: 0 <= x <= 1, "must be in [0, 1]"),
    ]
    for names, test, words in rules:
        for name in names:
            if not test(getattr(args, name)):
                return f"{flag(name)} {words}, got {getattr(args, name)}"
    if args.batch_size * args.block_size > MAX_BATCH_CHARS:  # hung in the fp32/bf16 timing, or no memory
        chars = args.batch_size * args.block_size
        return (
            f"--batch-size {args.batch_size} of --block-size {args.block_size} is {chars:,} characters a step, more "
            f"than {MAX_BATCH_CHARS:,}: lower --batch-size"
        )
    return device_problem(args.device) or missing_package(args.tracker)


def repo_id_problem(repo_id: str) -> str | None:
    """Why `repo_id` cannot name a Hub repo, or None: asked before the work, not after the training and export."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        return f"{repo_id!r} is not a Hub repo id: {str(error).splitlines()[0]}"
    return None


def settings_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the flags taken together (on a resume: the run's own merged with the typed ones), or None."""
    if args.min_lr > args.lr:
        return f"--min-lr {args.min_lr} is above --lr {args.lr}: the schedule decays from lr to min_lr"
    if args.max_steps < args.warmup_steps:
        return f"--max-steps {args.max_steps} is below --warmup-steps {args.warmup_steps}"
    if args.push_to_hub is not None and not args.export_dir:
        return "--push-to-hub needs --export-dir"
    if args.push_to_hub is not None and (problem := repo_id_problem(args.push_to_hub)):
        return f"--push-to-hub {problem}"
    if args.private and not args.push_to_hub:
        return "--private needs --push-to-hub"
    if getattr(args, "new_data", False) and not args.resume:
        return "--new-data needs --resume: a new run trains on its --data anyway"
    if args.stream_masks > 0 and args.loss_weighting != "uniform":
        return "--stream-masks needs --loss-weighting uniform: stream masks have no mask ratio t to weigh"
    if getattr(args, "objective", "diffusion") == "ar":
        for name, value in DIFFUSION_ONLY.items():
            if getattr(args, name) != value:
                return f"{flag(name)} is an option of the diffusion loss; --objective ar trains on the next character"
    try:  # the model's own checks (heads that divide the width, sane sizes), before any data is read
        check_config(**model_config_from_args(args, "ab"))
    except ValueError as error:
        return str(error)
    return None


def init_problem(args: argparse.Namespace, explicit: set[str]) -> str | None:
    """What is wrong with --init-from beside the typed flags of a new run, or None."""
    typed = [flag(name) for name in SHAPE_FLAGS if name in explicit]
    if args.init_from and typed:
        return f"--init-from takes the model's shape and objective from {args.init_from}: drop {', '.join(typed)}"
    return None


def resumed_args(args: argparse.Namespace, explicit: set[str], saved: dict) -> argparse.Namespace:
    """The checkpoint's own settings, with the flags a resume may change taken from the command line.

    A flag that would change the run itself (model shape, optimizer, loss, batch...) and differs from
    the checkpoint's is an error rather than being silently ignored or silently applied.
    """
    conflicts = [
        f"--{k.replace('_', '-')} {getattr(args, k)} (the run has {saved[k]})"
        for k in sorted(explicit - set(RESUMABLE_CHANGES))
        if k in saved and getattr(args, k) != saved[k]
    ]
    if conflicts:
        raise ValueError(f"--resume keeps the run's own settings; these flags differ: {'; '.join(conflicts)}")
    # flags newer than the checkpoint keep today's defaults; flags typed now win over the saved ones
    explicit_values = {k: getattr(args, k) for k in explicit}
    # the threads are the machine's, not the run's: a run from a larger machine resumes with this one's default
    kept = {k: v for k, v in saved.items() if k not in MACHINE_FLAGS}
    merged = {**vars(args), **kept, **explicit_values, "resume": True, "out_dir": args.out_dir}
    changed = [
        f"{k}={getattr(args, k)} (was {saved.get(k, 'not set')})"
        for k in explicit - {"resume", "out_dir"}
        if getattr(args, k) != saved.get(k)
    ]
    if changed:
        print(f"resuming with changed settings: {', '.join(sorted(changed))}")
    return argparse.Namespace(**merged)


def saved_setting_problem(saved: dict) -> str | None:
    """What is wrong with a checkpoint's saved flag whose value is not of its flag's type (a number for --lr, a whole
    number for --max-steps...), or None; flags unknown to this version, and lists, are not checked."""
    kinds, choices, lists = flag_kinds(), flag_choices(), list_flags()
    for name, value in sorted(saved.items()):
        if name in lists and value is not None:
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                return f"{flag(name)} is {repr(value)[:40]}, not a list of file names"
            continue
        kind = kinds.get(name)
        if kind is None or (value is None and kind is not bool):  # None: a flag that was not given
            continue
        if name in choices and value not in choices[name]:
            return f"{flag(name)} is {repr(value)[:40]}, not one of {', '.join(map(str, choices[name]))}"
        # a float flag takes a whole number too; a bool is an int to isinstance, but never a count or a number
        fits = isinstance(value, (int, float) if kind is float else kind) and (kind is bool or type(value) is not bool)
        if not fits:
            words = {bool: "true or false", int: "a whole number", float: "a number", str: "text"}[kind]
            return f"{flag(name)} is {repr(value)[:40]}, not {words}"
    return None


def flag_choices() -> dict[str, tuple]:
    """The choices of each flag that has them, by its name in the namespace."""
    return {a.dest: tuple(a.choices) for a in build_parser()._actions if a.choices is not None}


def list_flags() -> set[str]:
    """The flags that take several values (file names), by their names in the namespace."""
    return {a.dest for a in build_parser()._actions if isinstance(a, argparse._StoreAction) and a.nargs is not None}


def flag_kinds() -> dict[str, type]:
    """Each single-valued flag's Python type (bool, int, float or str), by its name in the namespace."""
    kinds = {}
    for action in build_parser()._actions:
        if isinstance(action, (argparse._StoreTrueAction, argparse.BooleanOptionalAction)):
            kinds[action.dest] = bool
        elif isinstance(action, argparse._StoreAction) and action.nargs is None:
            kinds[action.dest] = action.type if action.type in (int, float) else str
    return kinds


def model_config_from_args(args: argparse.Namespace, vocab: str) -> dict:
    """The MDLM constructor's arguments for a new run: the text's characters and the model flags."""
    return dict(
        vocab=vocab,
        n_layer=args.n_layer,
        n_head=args.n_head,
        n_embd=args.n_embd,
        block_size=args.block_size,
        dropout=args.dropout,
        position_encoding=args.position_encoding,
        time_conditioning=args.time_conditioning,
        norm=args.norm,
        mlp=args.mlp,
        qk_norm=args.qk_norm,
        causal=objective_named(getattr(args, "objective", "diffusion")).causal,  # older than the flag: diffusion
    )


# the Hub's license identifiers (huggingface/hub-docs, docs/hub/repositories-licenses.md), and those added since
HUB_LICENSES = frozenset(
    """apache-2.0 mit openrail bigscience-openrail-m creativeml-openrail-m bigscience-bloom-rail-1.0 bigcode-openrail-m
    afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause bsd-3-clause-clear c-uda cc cc0-1.0 cc-by-2.0
    cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0 cc-by-nc-4.0 cc-by-nd-4.0
    cc-by-nc-nd-3.0 cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0 cc-by-nc-sa-4.0 cdla-sharing-1.0
    cdla-permissive-1.0 cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0 epl-2.0 etalab-2.0 eupl-1.1 eupl-1.2 agpl-3.0 gfdl
    gpl gpl-2.0 gpl-3.0 lgpl lgpl-2.1 lgpl-3.0 isc lppl-1.3c ms-pl mpl-2.0 odc-by odbl openrail++ osl-3.0 postgresql
    ofl-1.1 ncsa unlicense zlib pddl lgpl-lr deepfloyd-if-license llama2 llama3 llama3.1 llama3.2 llama3.3 llama4
    gemma unknown other""".split()
)


def check_license(license: str) -> None:
    """A ValueError unless `license` is a Hub license identifier, with the nearest ones as a hint."""
    if license not in HUB_LICENSES:
        near = difflib.get_close_matches(str(license).lower(), sorted(HUB_LICENSES), n=3)
        hint = f"did you mean {' or '.join(near)}? " if near else ""
        raise ValueError(
            f"--license {license!r} is not a Hub license identifier; {hint}see "
            "https://huggingface.co/docs/hub/repositories-licenses (other: a license of your own, in a LICENSE file)"
        )


def license_flag(value: str) -> str:
    """argparse's type for --license: the identifier, or its one-line error."""
    try:
        check_license(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("--license ")) from None
    return value


def add_card_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of what the export says and where it goes, shared by train.py (--export-dir) and export.py."""
    parser.add_argument(
        "--private",
        action="store_true",
        help="--push-to-hub creates a private repo (the export's words.txt lists every word of the training text)",
    )
    parser.add_argument(
        "--dataset-name", default=None, help="what the card calls the text (default: the data files' names)"
    )
    parser.add_argument(
        "--license",
        default=None,
        type=license_flag,
        help="the model's license in the card, a Hub license id such as mit or cc-by-4.0 (default: none stated; "
        "mit for TinyShakespeare)",
    )
    parser.add_argument(
        "--language",
        default=None,
        help="the text's language code in the card, e.g. en (default: none; en for TinyShakespeare)",
    )
