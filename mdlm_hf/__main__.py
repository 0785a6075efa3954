"""Command-line sampling: python -m mdlm_hf --model DIR_OR_REPO [--prompt TEXT | --template TEXT] ...

Every sampler option is a flag (--num-steps, --order-temperature, ...); unless given, the sampling
study's recommendation (mdlm_hf.SamplerOptions) applies, or for an autoregressive twin its own: left to right,
temperature 1 (it continues a prompt and refuses a template in one line).
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Iterator
from pathlib import Path

from mdlm_hf.checks import check_seed
from mdlm_hf.model import MDLM
from mdlm_hf.pipeline import END_AT, ended, prompt_canvas, sample, text_to_canvas, unseen_prompt_note
from mdlm_hf.sampling.options import OPTION_SPECS, SamplerOptions
from mdlm_hf.sampling.state import SamplerState
from mdlm_hf.streaming import TerminalStreamer, streamed

FLAG_ALIASES = {"num_steps": ("--steps",)}  # the shorter flags the CLI has always had
# the shipped model, where a checkout of the repository has it (whatever the current directory)
DEFAULT_MODEL = Path(__file__).resolve().parent.parent / "pretrained" / "mdlm-shakespeare-char"
# the options a model's own files turn on (mdlm_hf.pipeline.default_options)
MODEL_DEFAULTS = {"real_words": "on where the model ships words.txt", "keep_cast": "on where it ships casts.json"}


def add_option_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per field of SamplerOptions, with its type, choices and help from OPTION_SPECS."""
    group = parser.add_argument_group("sampler options (default: the sampling study's recommendation)")
    defaults = SamplerOptions()
    for name, spec in OPTION_SPECS.items():
        flags = ("--" + name.replace("_", "-"), *FLAG_ALIASES.get(name, ()))
        default = MODEL_DEFAULTS.get(name, getattr(defaults, name))
        help_text = (
            f"{spec.label}; {spec.note + '; ' if spec.note else ''}default {'off' if default is None else default}"
        )
        kind, choices = spec.accepts.kind, spec.accepts.choices or None
        # --real-words / --no-real-words: bool("False") would be True
        parse = dict(action=argparse.BooleanOptionalAction) if kind is bool else dict(type=kind, choices=choices)
        group.add_argument(*flags, dest=name, default=argparse.SUPPRESS, help=help_text, **parse)


def build_parser() -> argparse.ArgumentParser:
    """The CLI's flags: what to write, where it ends, the seed, and every sampler option."""
    parser = argparse.ArgumentParser(prog="python -m mdlm_hf", description=__doc__)
    parser.add_argument(
        "--model", default=None, help=f"local directory or Hub repo id (default: the shipped model, {DEFAULT_MODEL})"
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--prompt", default="", help="text kept fixed at the start")
    what.add_argument("--template", default=None, help="text whose '_' characters are filled in")
    parser.add_argument(
        "--length",
        type=int,
        default=None,
        help="characters to generate after the prompt (default 200; past 256: window by window)",
    )
    parser.add_argument(
        "--end-at",
        choices=END_AT,
        default=None,
        help="where the text ends: exactly --length characters (the default), or within them at the last line or "
        "speech end",
    )
    parser.add_argument(
        "--lexicon",
        default=None,
        help="with --real-words: a file with one word a line to keep the words to (default: the model's words.txt)",
    )
    parser.add_argument(
        "--casts",
        default=None,
        help="with --keep-cast: a casts.json (play -> speakers) to keep the headings to (default: the model's own)",
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--show-steps", action="store_true", help="print every intermediate canvas")
    parser.add_argument(
        "--live",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="draw each draft over the last as it is written (default: where the output is a terminal)",
    )
    parser.add_argument(
        "--exact", action="store_true", help="sample with the exact fp32 model (default: the fast path, mdlm_hf.fast)"
    )
    add_option_flags(parser)
    return parser


def main(argv: list[str] | None = None) -> None:
    """Writes one text as the flags say and prints it (with --show-steps, every canvas on the way)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.template is not None and (args.length is not None or args.end_at is not None):
        named = "--length" if args.length is not None else "--end-at"
        parser.error(f"{named} applies to a prompt; a --template's blanks say what is written and where it ends")
    args.length = 200 if args.length is None else args.length
    args.end_at = "length" if args.end_at is None else args.end_at
    if args.template is None and args.length < 1:
        parser.error(f"--length must be >= 1, got {args.length}")
    if args.seed is not None:
        try:
            check_seed(args.seed)
        except ValueError as error:
            parser.error(f"--{error}")
    overrides = {name: OPTION_SPECS[name].parse(value) for name, value in vars(args).items() if name in OPTION_SPECS}
    if args.model is None and not DEFAULT_MODEL.is_dir():
        sys.exit(
            f"error: no --model given and the default model directory {DEFAULT_MODEL} does not exist; "
            "pass --model DIR_OR_REPO_ID"
        )
    try:
        model = MDLM.from_pretrained(DEFAULT_MODEL if args.model is None else args.model, fast=not args.exact)
        if args.template is not None:
            canvas = text_to_canvas(model, args.template)
        else:
            canvas = prompt_canvas(model, args.prompt, args.length)
        runs = sample(model, canvas, seed=args.seed, lexicon=args.lexicon, casts=args.casts, **overrides)
        live = sys.stdout.isatty() and not args.show_steps if args.live is None else args.live
        last = write(model, runs, args, live)
        if last.word_fallbacks is not None and int(last.word_fallbacks[0]):
            print(
                f"note: {int(last.word_fallbacks[0])} characters fell back to the model's own draw, "
                "where no character kept the rules (real_words, keep_cast)",
                file=sys.stderr,
            )
    except (ValueError, OSError) as error:  # bad input or an unreachable model: one clear line
        sys.exit(f"error: {error}")


def shown(model: MDLM, runs: Iterator[SamplerState], args: argparse.Namespace, steps: bool) -> Iterator[SamplerState]:
    """The run's states, saying first how much of a long prompt the model reads, and with `steps` printing each."""
    for state in runs:
        note = unseen_prompt_note(state, len(args.prompt)) if state.step == 0 else None  # a template's prompt is ""
        if note:
            print(f"note: {note}", file=sys.stderr)
        if steps:
            print(f"--- step {state.step}/{state.num_steps} ---")
            if not state.done:
                print(model.tokenizer.decode(state.tokens[0]))
        yield state


def write(model: MDLM, runs: Iterator[SamplerState], args: argparse.Namespace, live: bool) -> SamplerState:
    """Prints the text (live: each draft over the last, as a streamer draws them; --show-steps: every canvas);
    returns the run's last state."""
    start = len(args.prompt)  # a template's prompt is "", and its end_at "length" (main refuses another)
    last: list[SamplerState] = []
    states = (last.append(state) or state for state in shown(model, runs, args, args.show_steps and not live))
    finish = functools.partial(ended, start=start, end_at=args.end_at)
    text = streamed(model.tokenizer, states, TerminalStreamer(model.tokenizer) if live else None, start, finish)
    if not live:
        print(text)
    return last[-1]


if __name__ == "__main__":
    main()
