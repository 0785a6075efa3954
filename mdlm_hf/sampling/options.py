"""`SamplerOptions`: every option of a sampling run, once, with the values it accepts and how front ends show it.

The app's controls, the CLI's flags and the checks all read one table, `OPTION_SPECS`, built from the fields'
metadata. Why each default is what it is: docs/decisions.md.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from mdlm_hf.checks import described, is_finite, is_int, is_number
from mdlm_hf.sampling.orders import REVEAL_ORDERS

# the package's reveal orders (mdlm_hf.sampling.orders), and those that write from a plan
ORDERS = tuple(REVEAL_ORDERS)
STREAM_ORDERS = tuple(name for name, order in REVEAL_ORDERS.items() if order.plan is not None)
# the options that, beside the order itself, decide which positions are revealed (and taken back)
REVEAL_RULE_OPTIONS = ("order_temperature", "prior_weight", "remask_ratio", "spacing")
SCHEDULES = ("linear", "cosine", "front_loaded")
REVEAL_COUNTS = ("exact", "binomial")


@dataclass(frozen=True)
class Accepts:
    """The values an option accepts: a test, the words an error uses for them, and how front ends parse them."""

    test: Callable[[Any], bool]
    words: str  # "<name> must be <words>"
    kind: type  # int, float or str: the CLI parses its flag as this; the app's slider of an int option counts in ints
    choices: tuple[str, ...] = ()


def integer(low: int) -> Accepts:
    """Integers from `low` on."""
    return Accepts(lambda x: is_int(x) and x >= low, f"an integer >= {low}", int)


def non_negative(below: float = math.inf) -> Accepts:
    """Finite numbers in [0, below)."""
    words = "a finite number >= 0" if below == math.inf else f"a number in [0, {below:g})"
    return Accepts(lambda x: is_number(x) and is_finite(x) and 0 <= x < below, words, float)


def one_of(choices: tuple[str, ...]) -> Accepts:
    """One of the named choices."""
    return Accepts(lambda x: x in choices, f"one of {choices}", str, choices)


POSITIVE_FRACTION = Accepts(lambda x: is_number(x) and 0 < x <= 1, "in (0, 1]", float)
BOOLEAN = Accepts(lambda x: isinstance(x, bool), "True or False", bool)  # not 0 or 1: a number here is a mistake
# an order in REVEAL_ORDERS, one registered after import too (the app offers those of ORDERS)
REGISTERED_ORDER = Accepts(lambda x: isinstance(x, str) and x in REVEAL_ORDERS, f"one of {ORDERS}", str, ORDERS)


def optional(accepts: Accepts) -> Accepts:
    """None (the option off) or what `accepts` accepts."""
    return Accepts(lambda x: x is None or accepts.test(x), f"None or {accepts.words}", accepts.kind, accepts.choices)


@dataclass(frozen=True)
class OptionSpec:
    """An option's accepted values, and how the app and the CLI show it."""

    accepts: Accepts
    label: str  # the app's label; with the note, the CLI's help
    slider: tuple[float, float | None, float] | None = None  # the app's (minimum, maximum, step); None max: block_size
    off: float | None = None  # the value that means None (the option off) to a slider or a flag
    note: str = ""  # advice shown with the control
    # where the app shows it: "steps", "order", "reveal" (the rest of the reveal rule), "drawing", "blocks" or
    # "words" (beside the run button); None: the API and the CLI only
    group: str | None = None

    def parse(self, value: Any) -> Any:
        """A front end's value (slider position, flag) as the option's: `off` is None, a whole number that a slider
        sends as a float is an int option's int; the rest (a fraction too) is left for the option's own check."""
        if self.accepts.kind is int and isinstance(value, float) and value.is_integer():
            value = int(value)
        return None if self.off is not None and value == self.off else value

    def shown(self, value: Any) -> Any:
        """An option's value as a front end shows it: None as `off`."""
        return self.off if value is None else value


def option(default: Any, accepts: Accepts, label: str, **front_ends: Any) -> Any:
    """A field of SamplerOptions: its default, the values it accepts and how front ends show it."""
    return field(default=default, metadata={"spec": OptionSpec(accepts, label, **front_ends)})


@dataclass(frozen=True)
class SamplerOptions:
    """The options of one sampling run, validated when built; `SamplerOptions.plain()` is the bare core with every
    option off. What each option does: docs/sampler.md; why the defaults: docs/readings.md."""

    num_steps: int = option(32, integer(1), "Denoising steps", slider=(1, None, 1), group="steps")
    order: str = option("word_streams", REGISTERED_ORDER, "Reveal order", group="order")
    temperature: float = option(0.8, non_negative(), "Temperature (0 = greedy)", slider=(0, 2, 0.05), group="drawing")
    capital_temperature_factor: float = option(
        0.3,
        POSITIVE_FRACTION,
        "Temperature factor after a capital (names' letters drawn cooler; 1 = off)",
        slider=(0.05, 1, 0.05),
        group="drawing",
    )
    top_k: int | None = option(None, optional(integer(1)), "Top-k (draw among the k most probable characters)")
    top_p: float | None = option(
        None, optional(POSITIVE_FRACTION), "Top-p", slider=(0.05, 1, 0.05), off=1.0, group="drawing"
    )
    min_p: float | None = option(
        0.1, optional(POSITIVE_FRACTION), "Min-p", slider=(0, 0.5, 0.01), off=0.0, group="drawing"
    )
    real_words: bool = option(
        False,
        BOOLEAN,
        "Only words it has read",
        note="each letter drawn among those that keep its word one of the training text's words",
        group="words",
    )
    keep_cast: bool = option(
        False,
        BOOLEAN,
        "One play's cast",
        note="every speaker one of a single play's cast, each heading on its own line, no empty speech",
        group="words",
    )
    keep_lines: bool = option(
        True,
        BOOLEAN,
        "Keep a blank within its line",
        note="a blank with text before and after it on its line is filled without a line break",
    )
    cut_where_sure: float | None = option(
        None,
        optional(POSITIVE_FRACTION),
        "Cut only where sure (top-k/p and min-p cut where the top character has this probability; 0 = everywhere)",
        slider=(0, 1, 0.05),
        off=0.0,
        group="drawing",
    )
    order_temperature: float = option(
        0.0,
        non_negative(),
        "Order temperature (0 = strict order; higher = closer to random order)",
        slider=(0, 2, 0.05),
        group="order",
    )
    prior_weight: float = option(
        0.0,
        non_negative(),
        "Prior weight (rare characters the context makes likely go sooner; 0 = plain score)",
        slider=(0, 2, 0.05),
        group="reveal",
    )
    remask_ratio: float = option(
        0.0,
        non_negative(below=1),
        "Remask ratio (earlier characters taken back per character revealed; 0 = never)",
        slider=(0, 0.95, 0.05),
        note="pays off from about 32 steps; with fewer steps set it to 0 (see the sampling study)",
        group="reveal",
    )
    spacing: int = option(
        8,
        integer(0),
        "Spacing (characters revealed in one step keep this far apart; 0 = off)",
        slider=(0, 16, 1),
        group="reveal",
    )
    schedule: str = option("linear", one_of(SCHEDULES), "Schedule (characters revealed per step)")
    block_length: int | None = option(
        None,
        optional(integer(1)),
        "Block length (0 = off; >0 = semi-autoregressive blocks)",
        slider=(0, None, 1),
        off=0,
        group="blocks",
    )
    threshold: float | None = option(
        None, optional(POSITIVE_FRACTION), "Threshold (also reveal every likely candidate)"
    )
    entropy_bound: float | None = option(
        None,
        optional(non_negative()),
        "Entropy bound (adaptive: reveal more per pass while the step's summed entropy stays within it)",
        slider=(0, 32, 0.5),
        off=0,
        note="fewer passes where the text is easy, from about 8 and with remask ratio 0 (remasking keeps the "
        "schedule's pace); 0 = off",
        group="reveal",
    )
    reveal_counts: str = option("exact", one_of(REVEAL_COUNTS), "Reveal counts (exact or binomial)")
    window_context: int | None = option(
        None,
        optional(integer(0)),
        "Window context (text longer than the context: characters each window keeps as given context)",
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            value, accepts = getattr(self, f.name), f.metadata["spec"].accepts
            if not accepts.test(value):
                raise ValueError(f"{f.name} must be {accepts.words}, got {described(value)}")
            if accepts.kind is float and is_int(value):  # 10**20 as a float: torch takes no int past int64
                object.__setattr__(self, f.name, float(value))
        if REVEAL_ORDERS[self.order].plan is not None:  # it reveals by position from a plan: these would be ignored
            ignored = {name: value for name, value in STREAMS_IGNORE.items() if getattr(self, name) != value}
            if ignored:
                name = next(iter(ignored))
                raise ValueError(
                    f"{name} does not apply to {self.order} order, which reveals by position, not by score or "
                    f"schedule: leave it at {ignored[name]!r}, or choose an order that uses it "
                    f"({', '.join(orders_using(name))})"
                )

    @classmethod
    def plain(cls, **changes: Any) -> SamplerOptions:
        """The bare core, with `changes` applied: the default order, strict, no prior, no remasking, no spacing,
        characters drawn from the model's own distribution (temperature 1 everywhere, no filter); keep_lines on."""
        return cls(
            order_temperature=0.0,
            prior_weight=0.0,
            remask_ratio=0.0,
            spacing=0,
            temperature=1.0,
            min_p=None,
            capital_temperature_factor=1.0,
        ).replace(**changes)

    def replace(self, **changes: Any) -> SamplerOptions:
        """A validated copy with `changes` (options by name) applied; an unknown name is a ValueError naming it."""
        unknown = sorted(changes.keys() - OPTION_SPECS.keys())
        if unknown:
            raise ValueError(f"unknown sampler option {', '.join(unknown)}; the options are {', '.join(OPTION_SPECS)}")
        return dataclasses.replace(self, **changes)


# the options streams order has no use for, at the values that leave them off (spacing, which long canvases' window
# plan uses, is not among them)
STREAMS_IGNORE = dict(
    order_temperature=0.0, prior_weight=0.0, entropy_bound=None, schedule="linear", reveal_counts="exact"
)


def orders_using(name: str) -> tuple[str, ...]:
    """The orders for which the option `name` changes what is revealed: prior_weight only those that rank by the
    model's beliefs; STREAMS_IGNORE's options only the scored orders (a planned order refuses them)."""
    if name == "prior_weight":
        return tuple(order.name for order in REVEAL_ORDERS.values() if order.by_belief)
    return tuple(order.name for order in REVEAL_ORDERS.values() if order.plan is None or name not in STREAMS_IGNORE)


# the one table of the options: name -> accepted values, label, slider bounds (the fields' metadata)
OPTION_SPECS: dict[str, OptionSpec] = {f.name: f.metadata["spec"] for f in fields(SamplerOptions)}
# the options the sampling study chose and their recommended values, as training/evaluate.py's model card lists them
STUDIED_OPTIONS = ("num_steps", "order", "temperature", "min_p", "capital_temperature_factor", *REVEAL_RULE_OPTIONS)
# write slower, read better: the sampler blind readings ranked first, at 8x the default's time (docs/readings.md);
# num_steps is capped at the characters to write, so it writes one a pass
READ_BETTER = MappingProxyType(dict(order="left_to_right", spacing=0, temperature=0.8, num_steps=2**31 - 1))
