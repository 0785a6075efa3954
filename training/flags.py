"""Every flag of `python -m training.train`, once: `FLAGS`, grouped as --help lists them. A flag's row gives its
default, help and check, and what a resume, a warm start, a run of another objective and the model card do with it:
the parser, the tuples below and `RunSettings` are read from it. Checks of several flags together are run_options'.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from mdlm_hf.devices import DEVICE_HELP, device_problem, max_threads
from mdlm_hf.diffusion import LOSS_WEIGHTINGS
from mdlm_hf.objectives import OBJECTIVES
from training.tracking import TRACKERS

# the texts sampled at each evaluation: few steps so they cost seconds, a fixed seed so runs compare
EVAL_TEXTS, EVAL_TEXT_STEPS, EVAL_TEXT_SEED = 2, 32, 0
OPTIMIZERS = ("adamw", "muon")  # training.optimizers builds them: muon for the blocks' matrices, AdamW the rest


def flag(name: str) -> str:
    """A setting's flag on the command line: n_layer is --n-layer."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class Check:
    """A flag's own rule: whether a value passes, the words of the one line that refuses one ("--lr must be a number
    > 0, got 0.0"), and a value it refuses as typed on the command line (the tests type it, flag by flag)."""

    test: Callable[[Any], bool]
    words: str  # "<flag> must be <words>, got <value>"
    bad: str
    refusal: Callable[[str, Any], str] | None = None  # a line of its own instead (an empty path, a device)

    def problem(self, name: str, value: Any) -> str | None:
        """The line refusing `value` for the flag of setting `name`, or None."""
        if self.test(value):
            return None
        return self.refusal(name, value) if self.refusal else f"{flag(name)} must be {self.words}, got {value}"


def at_least(low: int) -> Check:
    """Whole numbers from `low` on."""
    return Check(lambda x: x >= low, f">= {low}", str(low - 1))


POSITIVE = Check(lambda x: math.isfinite(x) and x > 0, "a number > 0", "0")
NON_NEGATIVE = Check(lambda x: math.isfinite(x) and x >= 0, "a number >= 0", "-1")
BELOW_ONE = Check(lambda x: 0 <= x < 1, "in [0, 1)", "1")
# "" would be the working directory, or silently nothing
PATH = Check(
    lambda x: x is None or bool(x.strip()), "a path", "", lambda name, _: f"{flag(name)} is empty: give a path"
)
DEVICE = Check(lambda x: device_problem(x) is None, "a device", "bogus", lambda _, x: device_problem(x) or "")
THREADS = Check(lambda x: 0 <= x <= max_threads(), f"from 0 (torch's default) to {max_threads()}", "-1")


@dataclass(frozen=True)
class Flag:
    """A flag of a run: its setting's name (--name with dashes on the command line), default and help; what argparse
    needs beyond them; its check; and what a resume, a warm start, an autoregressive run and the card do with it."""

    name: str
    default: Any
    help: str | None = None
    kind: type | None = None  # int, float, str or bool (a switch); None: the default's type (str for None)
    choices: Collection | None = None  # read at each parse: --objective's, OBJECTIVES' keys, takes one registered later
    nargs: str | None = None  # "+": a list of file names
    metavar: str | None = None
    parse: Callable[[str], Any] | None = None  # argparse's type, where it checks more than the kind (--license)
    check: Check | None = None
    resumable: bool = False  # a resume may change it; every other flag is the run's own, from its checkpoint
    machine: bool = False  # a resume takes it from its own command line, never from the checkpoint
    shape: bool = False  # the model's shape (and objective): with --init-from the saved model's, so typing it errs
    # read by the objectives whose entry names it (mdlm_hf.objectives.Objective.settings, the diffusion loss's mask
    # options): a run of another objective leaves it at its default
    objective_setting: bool = False
    recipe: bool = False  # the model card's recipe line names it (training.card.RECIPE_KEYS)

    def __post_init__(self) -> None:
        if self.kind is None:
            object.__setattr__(self, "kind", str if self.default is None else type(self.default))

    @property
    def option(self) -> str:
        return flag(self.name)

    @property
    def annotation(self) -> Any:
        """The setting's type: a list of file names, or the kind (None too where that is the default)."""
        kind = list[str] if self.nargs else self.kind
        return kind | None if self.default is None else kind


DATA_FLAGS = (  # the text, where the run lives, and resuming it
    Flag(
        "data",
        None,
        "UTF-8 text file(s), joined by a newline in the order given (default: download TinyShakespeare)",
        nargs="+",
        metavar="FILE",
        resumable=True,
    ),
    Flag(
        "train_extra",
        None,
        "UTF-8 text file(s) that join the training split only (the validation split stays --data's)",
        nargs="+",
        metavar="FILE",
    ),
    Flag("out_dir", "runs/default", "checkpoints, history and export go here", check=PATH, resumable=True),
    Flag("resume", False, "continue from OUT_DIR/ckpt.pt", resumable=True),
    Flag(
        "new_data",
        False,
        "with --resume: go on with a text other than the run's (its validation split, and so its curve, change)",
        resumable=True,
    ),
)
MODEL_FLAGS = (  # what the model learns, and its shape: the MDLM config
    Flag(
        "objective",
        "diffusion",
        "diffusion: the masked diffusion model; ar: its autoregressive twin, the same network with a causal "
        "mask, trained on the next character (mdlm_hf/autoregressive.py); or one registered in "
        "mdlm_hf.objectives.OBJECTIVES",
        choices=OBJECTIVES.keys(),
        shape=True,
        recipe=True,
    ),
    Flag(
        "init_from",
        None,
        "start from a saved model's weights and shape (a save_pretrained directory or Hub id) with a fresh "
        "optimizer and schedule: fine-tuning; the shape flags are then the model's own",
        metavar="MODEL",
        check=PATH,
    ),
    Flag("n_layer", 6, check=at_least(1), shape=True, recipe=True),
    Flag("n_head", 4, check=at_least(1), shape=True, recipe=True),
    Flag("n_embd", 256, check=at_least(1), shape=True, recipe=True),
    Flag("block_size", 256, "context length in characters", check=at_least(1), shape=True, recipe=True),
    Flag("dropout", 0.0, check=BELOW_ONE, recipe=True),
    Flag("zero_init_residual", True, "residual projections start at zero", recipe=True),
)
OPTIMISATION_FLAGS = (  # batch, schedule, optimizers, loss, precision and device
    Flag("batch_size", 32, "sequences per step per process", check=at_least(1), recipe=True),
    Flag("max_steps", 1500, check=at_least(1), resumable=True, recipe=True),
    Flag("optimizer", "muon", "muon: Muon for the blocks' matrices", choices=OPTIMIZERS, recipe=True),
    Flag("lr", 2e-3, "peak AdamW learning rate", check=POSITIVE, recipe=True),
    Flag("min_lr", None, "final AdamW learning rate (default lr / 10)", kind=float, check=NON_NEGATIVE, recipe=True),
    Flag("muon_lr", 0.02, "peak Muon learning rate (same schedule shape)", check=POSITIVE, recipe=True),
    Flag("muon_momentum", 0.95, check=BELOW_ONE),
    Flag("muon_weight_decay", 0.01, "decoupled, scaled by the Muon lr", check=NON_NEGATIVE, recipe=True),
    Flag(
        "ema",
        0.999,
        "EMA decay of the weights for eval and export; 0: off",
        check=Check(BELOW_ONE.test, "in [0, 1) (0 turns it off)", "1"),
        recipe=True,
    ),
    Flag("warmup_steps", 200, check=at_least(0), recipe=True),
    Flag("weight_decay", 0.1, check=NON_NEGATIVE, recipe=True),
    Flag("beta1", 0.9, check=BELOW_ONE),
    Flag("beta2", 0.99, check=BELOW_ONE, recipe=True),
    Flag("grad_clip", 1.0, "max gradient norm (0: off)", check=NON_NEGATIVE, recipe=True),
    Flag("loss_weighting", "uniform", choices=tuple(LOSS_WEIGHTINGS), objective_setting=True, recipe=True),
    Flag(
        "t_min",
        1e-3,
        "training mask ratios t are drawn from [t_min, 1)",
        check=Check(lambda x: 0 < x < 1, "in (0, 1)", "0"),
        objective_setting=True,
        recipe=True,
    ),
    Flag(
        "dtype",
        "auto",
        "autocast dtype; auto = bfloat16 on GPU, and on CPU whichever a timed trial step finds faster",
        choices=("auto", "float32", "bfloat16"),
        resumable=True,
    ),
    Flag(
        "compile",
        False,
        "torch.compile the model for the training steps (compiling takes a while first: for long GPU runs; "
        "time it against eager steps with the GPU job's --compile)",
        resumable=True,
        machine=True,
    ),
    Flag("device", "auto", DEVICE_HELP, check=DEVICE, resumable=True),
    Flag("threads", 0, "CPU threads per process (0: torch's default)", check=THREADS, resumable=True, machine=True),
    Flag("seed", 1337, check=Check(lambda x: 0 <= x < 2**63, "in [0, 2**63)", "-1")),
)
RUN_FLAGS = (  # logging, evaluation, budgets, and the export at the end
    Flag("log_interval", 10, check=at_least(1), resumable=True),
    Flag("eval_interval", 250, check=at_least(1), resumable=True),
    Flag("eval_chars", 16384, "validation characters per periodic evaluation", check=at_least(1)),
    Flag("eval_samples", 2, "mask draws per validation window", check=at_least(1), objective_setting=True),
    Flag(
        "eval_sample_chars",
        128,
        f"print {EVAL_TEXTS} texts of this many characters (at most --block-size) at each evaluation; 0: off",
        check=at_least(0),
        resumable=True,
    ),
    Flag(
        "tracker",
        "none",
        "also log metrics and samples to TensorBoard (OUT_DIR/tensorboard) or trackio; needs that package",
        choices=TRACKERS,
        resumable=True,
    ),
    Flag(
        "max_minutes",
        0,
        "stop (saving) after this many minutes of this invocation (a resume gets its own); 0: no limit",
        kind=float,
        check=NON_NEGATIVE,
        resumable=True,
    ),
    Flag(
        "save_minutes",
        10,
        "also save a checkpoint after this many minutes without one; 0: only at evaluations and the end",
        kind=float,
        check=NON_NEGATIVE,
        resumable=True,
    ),
    Flag(
        "stop_at_step",
        0,
        "stop (saving) after this step without changing the schedule, to split a run; 0: never",
        check=at_least(0),
        resumable=True,
    ),
    Flag("export_dir", None, "write the Hub-ready model here at the end", check=PATH, resumable=True),
    Flag("push_to_hub", None, "upload the export to this repo", metavar="REPO_ID", resumable=True),
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


CARD_FLAGS = (  # what the export says and where it goes: training.export has these flags too
    Flag(
        "private",
        False,
        "--push-to-hub creates a private repo (the export's words.txt lists every word of the training text)",
        resumable=True,
    ),
    Flag("dataset_name", None, "what the card calls the text (default: the data files' names)", resumable=True),
    Flag(
        "license",
        None,
        "the model's license in the card, a Hub license id such as mit or cc-by-4.0 (default: none stated; "
        "mit for TinyShakespeare)",
        parse=license_flag,
        resumable=True,
    ),
    Flag(
        "language",
        None,
        "the text's language code in the card, e.g. en (default: none; en for TinyShakespeare)",
        resumable=True,
    ),
)

# the one table of the flags, in --help's order
FLAGS: tuple[Flag, ...] = DATA_FLAGS + MODEL_FLAGS + OPTIMISATION_FLAGS + RUN_FLAGS + CARD_FLAGS
FLAGS_BY_NAME = {f.name: f for f in FLAGS}
RESUMABLE_CHANGES = tuple(f.name for f in FLAGS if f.resumable)
MACHINE_FLAGS = tuple(f.name for f in FLAGS if f.machine)
SHAPE_FLAGS = tuple(f.name for f in FLAGS if f.shape)
# the flags only some objectives read (the diffusion loss's masks), at the values a run of another leaves them
OBJECTIVE_SETTINGS = {f.name: f.default for f in FLAGS if f.objective_setting}

# The settings of a run: a field a flag, built from the table so that a flag is named once (a hand-written class
# would name each flag a second time, and only a test would keep the two in step). Frozen: a change (a resume's
# merge, a warm start's shape) is a new value, made by dataclasses.replace.
RunSettings = dataclasses.make_dataclass(
    "RunSettings",
    [(f.name, f.annotation, dataclasses.field(default=f.default)) for f in FLAGS],
    frozen=True,
    namespace={"__module__": __name__, "__doc__": "The settings of a training run: a field a flag of FLAGS."},
)


def add_flags(parser: argparse.ArgumentParser, flags: tuple[Flag, ...] = FLAGS) -> None:
    """Adds `flags` to `parser`: a bool is a switch, --name when off by default, --name / --no-name when on."""
    for f in flags:
        options = {"default": f.default, "help": f.help}
        if f.kind is bool:
            options["action"] = argparse.BooleanOptionalAction if f.default else "store_true"
        else:
            options |= {"type": f.parse or f.kind, "choices": f.choices, "nargs": f.nargs, "metavar": f.metavar}
        parser.add_argument(f.option, **{key: value for key, value in options.items() if value is not None})
