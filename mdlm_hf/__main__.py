"""Command-line sampling: python -m mdlm_hf --model DIR_OR_REPO [--prompt TEXT | --template TEXT] ..."""

from __future__ import annotations

import argparse
import sys

from mdlm_hf.model import MDLM
from mdlm_hf.sampler import DEFAULT_SAMPLING, ORDERS, REVEAL_RULE_OPTIONS, SCHEDULES

REVEAL_RULE_HELP = {  # type and help of each reveal-rule flag
    "order_temperature": (float, "0 = strict reveal order; higher = closer to random order"),
    "prior_weight": (float, "reveal rare characters that the context makes likely sooner; 0 = plain score"),
    "remask_ratio": (float, "in [0, 1): least confident earlier characters taken back per character revealed"),
    "spacing": (int, "characters revealed in one step keep this far apart; 0 = off"),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mdlm_hf", description=__doc__)
    parser.add_argument("--model", default="pretrained/mdlm-shakespeare-char", help="local directory or Hub repo id")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--prompt", default="", help="text kept fixed at the start")
    what.add_argument("--template", default=None, help="text whose '_' characters are filled in")
    parser.add_argument("--length", type=int, default=200, help="characters to generate after the prompt")
    parser.add_argument("--steps", type=int, default=DEFAULT_SAMPLING["num_steps"])
    parser.add_argument("--order", choices=ORDERS, default=DEFAULT_SAMPLING["order"])
    for name in REVEAL_RULE_OPTIONS:  # --order-temperature, --prior-weight, --remask-ratio, --spacing
        kind, help_text = REVEAL_RULE_HELP[name]
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=DEFAULT_SAMPLING[name], help=help_text)
    parser.add_argument("--schedule", choices=SCHEDULES, default="linear")
    parser.add_argument("--temperature", type=float, default=DEFAULT_SAMPLING["temperature"])
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--show-steps", action="store_true", help="print every intermediate canvas")
    args = parser.parse_args(argv)
    try:
        model = MDLM.from_pretrained(args.model)
        options = dict(
            num_steps=args.steps,
            order=args.order,
            **{name: getattr(args, name) for name in REVEAL_RULE_OPTIONS},
            schedule=args.schedule,
            temperature=args.temperature,
            seed=args.seed,
        )
        canvas = args.template if args.template is not None else args.prompt + "_" * args.length
        if args.template is None and "_" in args.prompt:
            raise ValueError("the prompt contains '_', which marks blanks; use --template for infilling")
        if args.template is None and len(canvas) > model.block_size:
            raise ValueError(f"prompt + length is {len(canvas)} characters; the model takes {model.block_size}")
        for state in model.stream(canvas, **options):
            if args.show_steps:
                print(f"--- step {state.step}/{state.num_steps} ---")
            if args.show_steps or state.done:
                print(model.tokenizer.decode(state.tokens[0]))
    except (ValueError, OSError) as error:  # bad input or an unreachable model: one clear line
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    main()
