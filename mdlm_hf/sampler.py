"""The one sampler core: reveal masked positions of a canvas over a number of denoising steps.

Free generation (all masked), prompted generation (prefix given) and infilling (blanks anywhere)
are the same call on a canvas of fixed length. `sample` validates its options and returns a
generator that yields a `SamplerState` before the first step and after every step, so a UI can
stream it, a test can inspect it and a benchmark can time it. Each step is one call of
`denoise_step`; every random draw goes through one `torch.Generator`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from mdlm_hf.inference import evaluating
from mdlm_hf.windows import Window, check_canvas_length, plan_windows

ORDERS = ("confidence", "margin", "entropy", "random", "left_to_right", "streams", "word_streams")
# orders that write from a plan, stretches left to right in parallel (`stream_passes`): word_streams is streams whose
# stretches begin at word starts (`word_stream_passes`)
STREAM_ORDERS = ("streams", "word_streams")
SCORED_ORDERS = ("confidence", "margin", "entropy")  # orders that rank positions by the model's beliefs
# the options that, beside the order itself, decide which positions are revealed (and taken back)
REVEAL_RULE_OPTIONS = ("order_temperature", "prior_weight", "remask_ratio", "spacing")
SCHEDULES = ("linear", "cosine", "front_loaded")
REVEAL_COUNTS = ("exact", "binomial")
# temperature and order_temperature below this act as 0 (greedy, strict order): dividing scores by a tinier one
# overflows float64 and turns the draw into garbage
GREEDY_BELOW = 1e-3


@dataclass
class SamplerState:
    """The canvas after `step` of `num_steps` denoising steps (step 0: before any)."""

    tokens: torch.Tensor  # (B, T) ids, mask_id where still masked
    revealed: torch.Tensor  # (B, T) bool, positions revealed by this step
    remasked: torch.Tensor  # (B, T) bool, generated positions masked again by this step (remask_ratio > 0)
    confidence: torch.Tensor  # (B, T) model probability of each revealed character when revealed; NaN elsewhere
    is_given: torch.Tensor  # (B, T) bool, positions fixed by the caller, never changed
    step: int
    num_steps: int
    num_forward_passes: int  # passes over the canvas by the denoising steps so far
    mask_id: int
    # (start, end) of the positions the model reads at this step: the whole canvas when it fits the model's
    # context, else the window being written (mdlm_hf/windows.py); at step 0 the first window
    window: tuple[int, int] | None = None

    @property
    def is_masked(self) -> torch.Tensor:
        return self.tokens == self.mask_id

    @property
    def done(self) -> bool:
        return not bool(self.is_masked.any())


# --- what an option accepts, and how front ends show it: one entry per field of SamplerOptions ---


@dataclass(frozen=True)
class Accepts:
    """The values an option accepts: a test, the words an error uses for them, and how front ends parse them."""

    test: Callable[[Any], bool]
    words: str  # "<name> must be <words>"
    kind: type  # int, float or str: the CLI parses its flag as this; the app's slider of an int option counts in ints
    choices: tuple[str, ...] = ()


def is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x: object) -> bool:
    """An int or float, not a bool (True is an int to Python, but no one means 1.0 by it)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def integer(low: int) -> Accepts:
    """Integers from `low` on."""
    return Accepts(lambda x: is_int(x) and x >= low, f"an integer >= {low}", int)


def non_negative(below: float = math.inf) -> Accepts:
    """Finite numbers in [0, below)."""
    words = "a finite number >= 0" if below == math.inf else f"a number in [0, {below:g})"
    return Accepts(lambda x: is_number(x) and math.isfinite(x) and 0 <= x < below, words, float)


def positive_fraction() -> Accepts:
    """Numbers in (0, 1]."""
    return Accepts(lambda x: is_number(x) and 0 < x <= 1, "in (0, 1]", float)


def one_of(choices: tuple[str, ...]) -> Accepts:
    """One of the named choices."""
    return Accepts(lambda x: x in choices, f"one of {choices}", str, choices)


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

    def parse(self, value: Any) -> Any:
        """A front end's value (slider position, flag) as the option's: `off` is None; the rest is validated as is."""
        return None if self.off is not None and value == self.off else value

    def shown(self, value: Any) -> Any:
        """An option's value as a front end shows it: None as `off`."""
        return self.off if value is None else value


def option(default: Any, accepts: Accepts, label: str, **front_ends: Any) -> Any:
    """A field of SamplerOptions: its default, the values it accepts and how front ends show it."""
    return field(default=default, metadata={"spec": OptionSpec(accepts, label, **front_ends)})


@dataclass(frozen=True)
class SamplerOptions:
    """The options of one sampling run, validated when built. The defaults are the structure suite's rule
    (benchmarks/structure_suite.py, docs/benchmarks.md): word streams order, min-p 0.1 at temperature 1.25, 0.625
    after a capital letter; `SamplerOptions.plain()` is the bare core with every option off.

    Why this rule keeps a play's shape: the model writes real names and full speeches when it writes left to right,
    each character drawn knowing the one before. Streams order does that in parallel: 32 passes write 8 stretches
    of a 256-character canvas side by side, a character of each per pass, so only the 8 first characters are drawn
    without a neighbour. Word streams order begins each stretch at a word (a space or a line break before it is
    drawn first), so those first characters are not the cut's lowercase middles of words, which told every pass
    that one speech fills the canvas and left real text's speaker changes at the seams unwritten. Orders that reveal
    the surest positions first (confidence, entropy) fix line breaks and colons early and leave a name's uncertain
    letters for the last, crowded passes, where neighbours are drawn together and garble. Min-p cuts the tail where
    a name's typos come from, and temperature 1.25 gives back the surprise that the cut takes (text as surprising to
    the judge as the model's own joint's, within 10 %). A name's letters after its first capital are drawn cooler: a
    name is spelt, not improvised.
    """

    # denoising steps; never more than the masks (more would only repeat forward passes or draw nothing)
    # 32: 256 characters in under a second on two CPU cores (benchmarks/app_latency.py); the structure suite's
    # targets are set at 32 passes (docs/benchmarks.md)
    num_steps: int = option(32, integer(1), "Denoising steps", slider=(1, None, 1))
    # which masked positions are revealed first: confidence (the candidate's probability), margin (top1 - top2), entropy
    # (lowest first), random, left_to_right, or streams: left to right in parallel (`stream_passes`). The first pass
    # begins as few stretches as num_steps allows, of equal length (256 masks in 32 passes: 8 of 32; 133 masks: 5 of
    # 26-27), and every later pass writes the next character beside each known one, so every character but a stretch's
    # first is drawn knowing its neighbour, as the model's own left-to-right joint draws it; a blank between known
    # characters is written from both ends, its fronts meeting in its middle, so a speech is not crammed into the text
    # after it. Streams order uses no score, schedule or spacing (a long canvas's short blanks still get their passes by
    # spacing) and ends early where every blank is shorter than the passes. word_streams (the default): the same, but
    # each stretch after another begins a word: its plan is streams' for one pass fewer, and the character before
    # each such stretch is a space or a line break drawn in the first pass at the model's odds between the two
    # (`word_stream_passes`); headings per 1,000 characters of free text 5.1 -> 6.4 (real text 8.5; structure suite,
    # 3 seeds). Entropy order, the default before streams, leaves a name's uncertain letters for the crowded last
    # passes, where neighbours are drawn together and names garble
    order: str = option("word_streams", one_of(ORDERS), "Reveal order")
    # of the character drawn at each position: 0 = greedy argmax (so is anything below GREEDY_BELOW, 1e-3);
    # otherwise Gumbel-max sampling in float64 (1.0 beat 0.7 in the sampling study; 1.2 with min-p 0.1 and streams
    # order in the structure suite, where min-p's cut would otherwise make text more predictable than the model's
    # joint: 1.1 was 11-13 % below its judge NLL; 1.25 with word streams order, whose seams join whole words, where
    # 1.2 was 10 % below on free text and after a heading)
    temperature: float = option(1.25, non_negative(), "Temperature (0 = greedy)", slider=(0, 2, 0.05))
    # draw each character among the k most probable only; None = all
    top_k: int | None = option(None, optional(integer(1)), "Top-k (draw among the k most probable characters)")
    # draw each character among the most probable ones that together hold this probability; None = all
    top_p: float | None = option(None, optional(positive_fraction()), "Top-p", slider=(0.05, 1, 0.05), off=1.0)
    # draw each character among those at least this fraction as probable as the most probable one (min-p sampling,
    # Nguyen et al. 2024); None = all. It cuts the tail where the model is sure, so a name's letters lose their
    # typos (the model's own left-to-right joint, uncut, writes 0.81-0.88 real names) while an open choice keeps
    # its options; 0.1 (with temperature 1.1) beat top-p 0.95 on names and empty speeches, its judge NLL still
    # within 10 % of the joint's (top-p 0.95's stayed closer; structure suite)
    min_p: float | None = option(0.1, optional(positive_fraction()), "Min-p", slider=(0, 0.5, 0.01), off=0.0)
    # top-k, top-p and min-p cut the tail only at positions whose most probable character has at least this
    # probability (the model's own, before temperature); None = everywhere. A cut guards against typos where the
    # model knows what it wants; where it does not (the first draws on a blank canvas, a line's first letter) the
    # tail is the choice itself, and cutting it erases the characters that carry a play's shape, each rare, together
    # common (capitals, punctuation): with min-p 0.1 cut everywhere (entropy order), the line breaks a run heads for
    # fall from 35.4 to 31.1 per 1,000 characters in the first pass (benchmarks/line_breaks.py), and headings to 5
    # per 1,000 (real text: 9; structure suite)
    cut_where_sure: float | None = option(
        None,
        optional(positive_fraction()),
        "Cut only where sure (top-k/p and min-p cut where the top character has this probability; 0 = everywhere)",
        slider=(0, 1, 0.05),
        off=0.0,
    )
    # a character whose left neighbour is a capital letter is drawn at the temperature times this factor; 1 = off.
    # The speakers' names are capitals: once a name is begun its letters are spelt, not improvised, while every other
    # character keeps the temperature that keeps the text as surprising as the model's joint. 0.5 (temperature 0.6
    # after a capital) raised real names on the structure suite's five prompts from 0.86-0.93 to 0.92-0.96 (3 seeds
    # each), the judge NLL within 0.01 of before; 0.67 wrote 0.90-0.97 (docs/benchmarks.md). A factor, so
    # temperature 0 stays greedy everywhere. A character drawn with its left neighbour still masked (a stretch's
    # first) keeps the temperature
    capital_temperature_factor: float = option(
        0.5,
        positive_fraction(),
        "Temperature factor after a capital (names' letters drawn cooler; 1 = off)",
        slider=(0.05, 1, 0.05),
    )
    # 0 = follow the order strictly (so does anything below GREEDY_BELOW, 1e-3); above = draw the positions to
    # reveal with probability proportional to exp(score / order_temperature) (confidence^(1 / order_temperature) for
    # confidence order), trading the order's greed for the diversity of random order; with confidence order 0.25
    # beat the strict order from 32 steps on (sampling study); entropy order keeps it strict
    order_temperature: float = option(
        0.0,
        non_negative(),
        "Order temperature (0 = strict order; higher = closer to random order)",
        slider=(0, 2, 0.05),
    )
    # confidence, margin and entropy orders: subtract prior_weight * log p(character) from each candidate's score,
    # p being the model's prediction with nothing known, so rare characters that the context makes likely
    # (capitals, punctuation) are not left for last (1 = pointwise mutual information); free when a row starts all
    # masked (the first step's prediction is the prior), else one extra forward pass of one row, not counted in
    # num_forward_passes; random and left_to_right orders do not score positions and ignore it. Off by default: it
    # scores the drawn character, so like confidence it keeps the draws that came out a certain way (0.45 with
    # confidence order was the sampling study's choice before the structure suite)
    prior_weight: float = option(
        0.0,
        non_negative(),
        "Prior weight (rare characters the context makes likely go sooner; 0 = plain score)",
        slider=(0, 2, 0.05),
    )
    # in [0, 1): after every step but a block's last, mask again this many generated characters per character the
    # schedule revealed at the step (an adaptive rule's extras are not counted), those least confident when
    # revealed (ReMDM-conf), so early guesses made with little context are redrawn with more; the schedule reveals
    # them again, so the number of forward passes does not change, but re-reveals count as reveals: a step reveals
    # up to 1 / (1 - remask_ratio) times the schedule's new characters (0.65: about 3x), which needs enough steps.
    # Off by default: taking back the least confident draws makes text more predictable than the model's joint
    remask_ratio: float = option(
        0.0,
        non_negative(below=1),
        "Remask ratio (earlier characters taken back per character revealed; 0 = never)",
        slider=(0, 0.95, 0.05),
        note="pays off from about 32 steps; with fewer steps set it to 0 (see the sampling study)",
    )
    # positions revealed in the same step keep apart: they are picked best score first, each ruling out the
    # positions within `spacing` of it, and only then does the rest of the ranking fill the step (a step's
    # characters are drawn independently, so adjacent ones need not agree); 0 = plain ranking. With entropy order,
    # 8 (a step's 8 picks spread over the canvas, a word apart at least) writes 0.85 valid words where 2 writes 0.69
    spacing: int = option(
        8, integer(0), "Spacing (characters revealed in one step keep this far apart; 0 = off)", slider=(0, 16, 1)
    )
    # how many positions each step reveals: linear, cosine (few early, many late) or front_loaded (many early, few
    # late: reveals per step fall linearly from twice the average to one)
    schedule: str = option("linear", one_of(SCHEDULES), "Schedule (characters revealed per step)")
    # semi-autoregressive: blocks of this length decoded left to right, the steps split evenly among them
    block_length: int | None = option(
        None,
        optional(integer(1)),
        "Block length (0 = off; >0 = semi-autoregressive blocks)",
        slider=(0, None, 1),
        off=0,
    )
    # also reveal every eligible position whose candidate has at least this probability, so easy text finishes
    # in fewer steps; None = off
    threshold: float | None = option(
        None, optional(positive_fraction()), "Threshold (also reveal every likely candidate)"
    )
    # adaptive: also reveal, down the order's ranking, every further position while the summed entropy (nats) of
    # the step's reveals stays within this bound (EB-sampler, Ben-Hamu et al. 2025), so easy stretches (the rest of
    # a word, the space after it) go in one pass and a run ends before num_steps; the extras are net progress:
    # remasking takes back characters only for the schedule's reveals, none while a row is ahead; None = off
    entropy_bound: float | None = option(
        None,
        optional(non_negative()),
        "Entropy bound (adaptive: reveal more per pass while the step's summed entropy stays within it)",
        slider=(0, 32, 0.5),
        off=0,
        note="fewer passes where the text is easy, from about 8 and with remask ratio 0 (remasking keeps the "
        "schedule's pace); 0 = off",
    )
    # "exact": the schedule's count each step; "binomial": each masked position is revealed with the schedule's
    # probability (MDLM's ancestral sampler), so some steps reveal nothing and then reuse the previous logits
    reveal_counts: str = option("exact", one_of(REVEAL_COUNTS), "Reveal counts (exact or binomial)")
    # a canvas longer than the model's block_size is written window by window (mdlm_hf/windows.py), each window
    # keeping this many characters before its first mask as given context (below block_size); None = a quarter of
    # block_size (64 of 256: 128 left too little to write per window, valid words 0.86 against 0.90; 32 and 64 were
    # alike; docs/benchmarks.md). In a long canvas num_steps counts per block_size characters written
    window_context: int | None = option(
        None,
        optional(integer(0)),
        "Window context (text longer than the context: characters each window keeps as given context)",
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            value, accepts = getattr(self, f.name), f.metadata["spec"].accepts
            if not accepts.test(value):
                raise ValueError(f"{f.name} must be {accepts.words}, got {value!r}")
        if self.order in STREAM_ORDERS:  # it reveals by position from a plan: these would be silently ignored
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
        """The bare core: the default order (streams: pass `order=` for a scored one, which the order temperature,
        prior weight and entropy bound need), strict, no prior, no remasking, no spacing, characters drawn from the
        model's own distribution (temperature 1 everywhere, no filter) (with `changes` applied)."""
        bare = cls(
            order_temperature=0.0,
            prior_weight=0.0,
            remask_ratio=0.0,
            spacing=0,
            temperature=1.0,
            min_p=None,
            capital_temperature_factor=1.0,
        )
        return bare.replace(**changes)

    @classmethod
    def default_for_causal(cls) -> SamplerOptions:
        """An autoregressive twin's defaults (mdlm_hf.autoregressive): left to right, one character a pass, each drawn
        from the model's own distribution (temperature 1, no cut), as its likelihood is measured."""
        return cls.plain(order="left_to_right")

    @classmethod
    def default_for(cls, model: nn.Module) -> SamplerOptions:
        """The options a run of `model` starts from: `default_for_causal()` for an autoregressive twin, else the
        diffusion model's defaults, `SamplerOptions()`."""
        return cls.default_for_causal() if getattr(model, "causal", False) else cls()

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
    """The orders for which the option `name` changes what is revealed: the prior weight weighs scores, so only the
    scored orders; streams order, a plan, has no use for STREAMS_IGNORE's options (and refuses them)."""
    if name == "prior_weight":
        return SCORED_ORDERS
    return tuple(order for order in ORDERS if order not in STREAM_ORDERS or name not in STREAMS_IGNORE)


# the one table of the options: name -> accepted values, label, slider bounds (the fields' metadata)
OPTION_SPECS: dict[str, OptionSpec] = {f.name: f.metadata["spec"] for f in fields(SamplerOptions)}
# the options the sampling study chose and their recommended values, as training/evaluate.py's model card lists them
STUDIED_OPTIONS = ("num_steps", "order", "temperature", "min_p", "capital_temperature_factor", *REVEAL_RULE_OPTIONS)
DEFAULT_SAMPLING = {name: getattr(SamplerOptions(), name) for name in STUDIED_OPTIONS}


def check_seed(seed: object) -> None:
    """The one check of a sampling seed: an integer in [0, 2**63) (torch's generators take no other)."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63:
        raise ValueError(f"seed must be an integer in [0, 2**63), got {seed!r}")


def revealed_fraction(schedule: str, x: float) -> float:
    """Fraction of the masked positions revealed after a fraction x of the steps."""
    if schedule == "linear":
        return x
    return 1.0 - math.cos(math.pi * x / 2) if schedule == "cosine" else 1.0 - (1.0 - x) ** 2


def planned_reveals(num_masked: torch.Tensor, num_steps: int, step: int, schedule: str) -> torch.Tensor:
    """Cumulative number of positions to have revealed after `step` of `num_steps`, per row (B,).

    Each step gets one position first, then the rest follow the schedule, so no step is wasted when
    there are at least as many masks as steps.
    """
    f = revealed_fraction(schedule, step / num_steps)
    at_least_one = step + torch.floor((num_masked - num_steps).clamp(min=0) * f + 0.5)
    fewer_masks = torch.floor(num_masked * f + 0.5)
    return torch.where(num_masked >= num_steps, at_least_one, fewer_masks).long()


def gumbel_noise(like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Standard Gumbel noise in float64, shaped and placed like `like`."""
    uniform = torch.rand(like.shape, generator=generator, dtype=torch.float64).to(like.device)
    return -torch.log(-torch.log(uniform.clamp(min=1e-300)))


def capital_letters(model: nn.Module, device: torch.device) -> torch.Tensor | None:
    """(V,) bool: which ids of `model`'s vocabulary are capital letters (None: a model with no tokenizer, a stub)."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        return None
    flags = [c.isupper() for c in tokenizer.vocab]
    return torch.tensor(flags + [False] * (model.vocab_size - len(flags)), device=device)  # [MASK]: not a capital


def word_separators(model: nn.Module, device: torch.device) -> torch.Tensor | None:
    """(S,) the ids of the characters that end a word in `model`'s vocabulary, a space and a line break, those it
    has (None: neither, or a model with no tokenizer; word_streams order then plans as streams order)."""
    vocab = getattr(getattr(model, "tokenizer", None), "vocab", "")
    ids = [vocab.index(c) for c in " \n" if c in vocab]
    return torch.tensor(ids, device=device) if ids else None


def separator_tokens(
    logits: torch.Tensor, separator_ids: torch.Tensor, options: SamplerOptions, generator: torch.Generator
) -> torch.Tensor:
    """(B, T): a word separator per position, drawn between the separators (a space or a line break) at the model's
    own odds (temperature 1), or the likelier of them where the options are greedy."""
    among = logits.index_select(-1, separator_ids).double()  # (B, T, S)
    if options.temperature >= GREEDY_BELOW:
        among = among + gumbel_noise(among, generator)
    return separator_ids[among.argmax(dim=-1)]


def after_capital(tokens: torch.Tensor, capitals: torch.Tensor | None) -> torch.Tensor | None:
    """(B, T) bool: the positions of `tokens` (B, T) whose left neighbour is a capital letter (`capital_letters`)."""
    if capitals is None:
        return None
    is_capital = capitals[tokens]  # (B, T); [MASK] is not one
    return torch.cat([torch.zeros_like(is_capital[:, :1]), is_capital[:, :-1]], dim=1)


def candidate_tokens(
    logits: torch.Tensor,
    options: SamplerOptions,
    generator: torch.Generator,
    cooler: torch.Tensor | None = None,
) -> torch.Tensor:
    """Draws one candidate character per position (B, T) from temperature / top-k / top-p / min-p filtered logits;
    positions `cooler` (B, T) marks (those after a capital, `after_capital`) at the temperature times
    `capital_temperature_factor`."""
    if options.temperature < GREEDY_BELOW:  # 0, or so close that the division would overflow
        return logits.argmax(dim=-1)
    temperature: float | torch.Tensor = options.temperature
    if cooler is not None and options.capital_temperature_factor < 1:  # (B, T, 1): each position its own
        cooled = options.temperature * options.capital_temperature_factor
        temperature = torch.where(cooler, cooled, options.temperature).to(torch.float64)[..., None]
    scaled = logits.double() / temperature  # float64: Gumbel noise on tiny probabilities stays exact
    uncut = scaled
    if options.top_k is not None and options.top_k < scaled.size(-1):
        kth = scaled.topk(options.top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if options.top_p is not None and options.top_p < 1:
        sorted_logits, order = scaled.sort(dim=-1, descending=True)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        drop_sorted = cumulative - sorted_logits.softmax(dim=-1) >= options.top_p  # keeps the top-1 always
        scaled = scaled.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))
    if options.min_p is not None:
        log_probs = scaled.log_softmax(dim=-1)
        keep = log_probs >= log_probs.max(dim=-1, keepdim=True).values + math.log(options.min_p)  # the top-1 always
        scaled = scaled.masked_fill(~keep, float("-inf"))
    if options.cut_where_sure is not None:  # the tail stays where the model is unsure
        sure = logits.softmax(dim=-1).amax(dim=-1, keepdim=True) >= options.cut_where_sure
        scaled = torch.where(sure, scaled, uncut)
    return (scaled + gumbel_noise(scaled, generator)).argmax(dim=-1)


def reveal_scores(
    probs: torch.Tensor, candidates: torch.Tensor, order: str, generator: torch.Generator
) -> torch.Tensor:
    """How much each position wants to be revealed next, on a log scale (B, T); higher goes first.

    Log scale so that `order_temperature` means the same for every order: position i is then drawn
    with probability proportional to exp(score_i / order_temperature), e.g. confidence^(1 / order_temperature).
    """
    if order == "confidence":
        return probs.gather(-1, candidates[..., None]).squeeze(-1).log()
    if order == "margin":
        top2 = probs.topk(2, dim=-1).values
        return (top2[..., 0] - top2[..., 1]).log()
    if order == "entropy":
        return (probs * probs.clamp(min=1e-12).log()).sum(dim=-1)  # negative entropy = log(1 / perplexity)
    if order == "random":
        return torch.rand(candidates.shape, generator=generator).to(probs.device)
    positions = torch.arange(candidates.size(-1), device=probs.device, dtype=probs.dtype)
    return -positions.expand(candidates.shape)  # left_to_right


def spaced_picks(order: torch.Tensor, eligible: torch.Tensor, count: torch.Tensor, spacing: int) -> torch.Tensor:
    """Greedy non-maximum suppression: walking each row's positions in `order` (B, T), best first, picks up
    to `count` (B,) eligible ones, each ruling out the positions within `spacing` of it; a (B, T) mask."""
    T = order.size(-1)
    rows, columns = [], []
    per_row = zip(order.tolist(), eligible.tolist(), count.tolist(), strict=True)
    for row, (positions, is_eligible, wanted) in enumerate(per_row):
        ruled_out = [False] * T  # plain lists: a few hundred scalar checks are cheaper than tensor ops
        for i in positions:
            if wanted == 0:
                break
            if is_eligible[i] and not ruled_out[i]:
                rows.append(row)
                columns.append(i)
                wanted -= 1
                low, high = max(0, i - spacing), min(T, i + spacing + 1)
                ruled_out[low:high] = [True] * (high - low)
    picked = torch.zeros_like(eligible)
    picked[rows, columns] = True
    return picked


def place_in_stretch(offset: torch.Tensor, length: torch.Tensor, stretches: torch.Tensor) -> torch.Tensor:
    """1-based place of each `offset` (B, T) in its stretch, a run of `length` (B, T) cut into `stretches` (B, T)
    stretches of equal length within one: stretch i starts at floor(i * length / stretches)."""
    length = length.clamp(min=1)
    stretch = ((offset + 1) * stretches - 1).div(length, rounding_mode="floor")  # the largest i with start_i <= offset
    return offset - (stretch * length).div(stretches, rounding_mode="floor") + 1


def stream_passes(eligible: torch.Tensor, given: torch.Tensor, num_steps: int) -> torch.Tensor:
    """Streams order's plan (B, T): the pass, 1 to `num_steps`, that writes each `eligible` (B, T) position (0 for
    the others), `given` (B, T) marking the characters already there (a prompt, a template, earlier windows).

    Each run of eligible positions is cut into as few stretches as the passes allow, of equal length (within one),
    written left to right, one character of each a pass, so every character but a stretch's first is drawn knowing
    the one before. Equal, because a short last stretch would write a canvas's end in the first passes, with next to
    nothing known around it (a run of 133 in 32 passes: 5 stretches of 26-27, not 4 of 32 and one of 5 written by
    pass 5). A run with given text on its right only is the mirror image, written right to left. A run
    between given text that fits in twice the passes is written from both ends (one end a pass, or both where the
    run is longer than the passes), so its fronts meet in its middle: a blank before given text (an infill
    template's next speech) is written towards that text, not crammed into it at its end.
    """
    T = eligible.size(-1)
    positions = torch.arange(T, device=eligible.device).expand_as(eligible)  # (B, T)
    before = position_before_run(eligible)  # the last position before the run
    after = T - 1 - torch.where(eligible, -1, T - 1 - positions).flip(-1).cummax(dim=-1).values.flip(-1)  # after it
    padded = F.pad(given, (1, 1))  # (B, T + 2): the canvas's edges are not given
    left_given, right_given = padded.gather(-1, before + 1), padded.gather(-1, after + 1)  # (B, T)
    offset, length = positions - before - 1, after - before - 1  # within the run; the run's length
    from_end = length - 1 - offset
    inward = offset.minimum(from_end)  # how far from the nearer end
    alternate = 2 * inward + 1 + (offset > from_end).long()  # left end, right end, next left, ... (middle last)
    both_ends = torch.where(length <= num_steps, alternate, inward + 1)
    stretches = length.clamp(min=1).add(num_steps - 1).div(num_steps, rounding_mode="floor")  # ceil(length / passes)
    passes = torch.where(
        right_given & ~left_given,
        place_in_stretch(from_end, length, stretches),
        place_in_stretch(offset, length, stretches),
    )
    passes = torch.where(left_given & right_given & (length <= 2 * num_steps), both_ends, passes)
    return passes.masked_fill(~eligible, 0)


def word_stream_passes(
    eligible: torch.Tensor, given: torch.Tensor, num_steps: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Word streams order's plan (B, T) and its separators (B, T): streams order's plan (`stream_passes`) for one pass
    fewer, in which the character before each left-to-right stretch's first, the last of the stretch before it, is
    a separator, a space or a line break, written in the first pass (`separator_tokens`); every other character is
    written a pass later than that plan says. So every stretch begins a word, drawn knowing whether it begins a line.

    Why: streams order draws a stretch's first character with nothing known around it, and its cut almost never
    lets that be a capital or a line break. Eight stretches of lowercase middles of words then tell every pass that
    one long speech fills the canvas, and the stretch before each must join a word it cannot see the start of: free
    text wrote 5.1 headings per 1,000 characters where the same options written left to right in one stretch write
    10.0 and the model's own joint 7.0 (docs/benchmarks.md, session 9). A run that gets no separator (a blank written
    from both ends, one stretch) keeps streams order's plan.
    """
    plain = stream_passes(eligible, given, num_steps)
    if num_steps < 2:
        return plain, torch.zeros_like(eligible)
    shorter = stream_passes(eligible, given, num_steps - 1)
    run = position_before_run(eligible) + 1  # (B, T) 0..T: the run's id
    cut = run_any(stretch_starts_after_stretches(plain, eligible), run)  # runs the plan cuts into stretches
    separators = cut & F.pad(stretch_starts_after_stretches(shorter, eligible), (0, 1))[:, 1:]  # before each start
    shifted = torch.where(separators, 1, shorter + 1)
    # a run whose shorter plan has no stretch to begin (all of length one) keeps the plan: no pass left empty
    return torch.where(run_any(separators, run), shifted, plain).masked_fill(~eligible, 0), separators


def position_before_run(eligible: torch.Tensor) -> torch.Tensor:
    """(B, T): for each position, the last position at or before it that is not `eligible` (-1: none), so every
    position of a run of eligible ones names the position just before that run."""
    positions = torch.arange(eligible.size(-1), device=eligible.device).expand_as(eligible)
    return torch.where(eligible, -1, positions).cummax(dim=-1).values


def stretch_starts_after_stretches(passes: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
    """(B, T) bool: the first characters of a streams plan's left-to-right stretches that follow another stretch."""
    left = F.pad(passes, (1, 0))[:, :-1]  # (B, T) the pass of each position's left neighbour
    right = F.pad(passes, (0, 1))[:, 1:]
    return eligible & (passes == 1) & (left > 1) & (right == 2)


def run_any(flags: torch.Tensor, run: torch.Tensor) -> torch.Tensor:
    """(B, T) bool: whether any position of each position's run (`run` (B, T) ids in 0..T) is flagged."""
    found = torch.zeros(flags.size(0), flags.size(1) + 1, dtype=torch.long, device=flags.device)
    return found.scatter_reduce(1, run, flags.long(), reduce="amax").gather(1, run).bool()


def denoise_step(
    logits: torch.Tensor,
    tokens: torch.Tensor,
    eligible: torch.Tensor,
    num_to_reveal: torch.Tensor,
    options: SamplerOptions,
    generator: torch.Generator,
    log_prior: torch.Tensor | None = None,
    streams_due: torch.Tensor | None = None,
    capitals: torch.Tensor | None = None,
    separators: torch.Tensor | None = None,
    separator_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reveals `num_to_reveal` (B,) of the `eligible` (B, T) positions; returns (tokens, revealed, confidence).

    `log_prior` (V,) is each character's log probability with no context (`character_log_prior`); the
    scores use it when given and prior_weight > 0. Streams order reveals instead the `streams_due` (B, T) positions,
    those whose pass in its plan has come (`stream_passes`). `capitals` (V,) marks the capital letters
    (`capital_letters`), after which characters are drawn cooler. Word streams order draws a space or a line break
    (`separator_ids`, `separator_tokens`) at its plan's `separators` (B, T) (`word_stream_passes`).
    """
    probs = logits.softmax(dim=-1)  # (B, T, V) the model's own distribution
    candidates = candidate_tokens(logits, options, generator, after_capital(tokens, capitals))  # (B, T)
    confidence = probs.gather(-1, candidates[..., None]).squeeze(-1)  # (B, T)
    if options.order in STREAM_ORDERS:
        if streams_due is None:
            raise ValueError("streams order needs streams_due, the positions whose pass it is (stream_passes)")
        revealed = eligible & streams_due
        if separators is not None and separator_ids is not None and (separators & revealed).any():
            at = separators & revealed
            candidates = torch.where(at, separator_tokens(logits, separator_ids, options, generator), candidates)
            confidence = probs.gather(-1, candidates[..., None]).squeeze(-1)
        if options.threshold is not None:
            revealed |= eligible & (confidence >= options.threshold)
        return torch.where(revealed, candidates, tokens), revealed, confidence
    scores = reveal_scores(probs, candidates, options.order, generator)
    if log_prior is not None and options.prior_weight > 0:
        # plain confidence reveals common characters (spaces, e, t) first and rarely commits to the rare
        # ones that carry structure (capitals of speaker names, punctuation, line breaks); judging each
        # candidate by how far the context lifted it above its prior restores them (1 = pointwise mutual
        # information)
        scores = scores - options.prior_weight * log_prior.to(scores.dtype)[candidates]
    if options.order_temperature >= GREEDY_BELOW:
        # Gumbel-top-k: the k highest perturbed scores are k draws without replacement, each position
        # chosen with probability proportional to exp(score / order_temperature); 0 keeps the strict order
        scores = scores.double() / options.order_temperature + gumbel_noise(scores, generator)
    scores = scores.masked_fill(~eligible, float("-inf"))
    order = scores.argsort(dim=-1, descending=True, stable=True)  # (B, T) positions, first to reveal first
    if options.spacing > 0:
        # characters revealed in one step are drawn independently, so neighbours revealed together
        # need not agree ("thot"): the kept-apart picks go first, the rest only fill what the step
        # still has to reveal
        picked = spaced_picks(order, eligible, num_to_reveal, options.spacing)
        order = order.gather(-1, picked.gather(-1, order).long().argsort(dim=-1, descending=True, stable=True))
    rank = order.argsort(dim=-1)  # 0 = first to reveal
    count = num_to_reveal
    if options.entropy_bound is not None:
        count = count.maximum(entropy_bounded_count(probs, order, eligible, options.entropy_bound))
    revealed = (rank < count[:, None]) & eligible
    if options.threshold is not None:
        revealed |= eligible & (confidence >= options.threshold)
    return torch.where(revealed, candidates, tokens), revealed, confidence


def entropy_bounded_count(
    probs: torch.Tensor, order: torch.Tensor, eligible: torch.Tensor, bound: float
) -> torch.Tensor:
    """How many of each row's eligible positions, taken in `order` (B, T) best first, fit before the summed entropy
    of their predictions `probs` (B, T, V) exceeds `bound` nats (B,): the EB-sampler's adaptive step size.

    Revealing positions together draws them independently; the error that makes against drawing them one at a
    time is at most their summed entropy, so a low-entropy stretch may go at once. (The EB-sampler paper bounds the
    sum less its largest term, which always admits the first position; here the schedule's own count does that.)
    """
    entropy = -(probs * probs.clamp(min=1e-12).log()).sum(dim=-1)  # (B, T) nats
    in_order = eligible.gather(-1, order)  # (B, T) eligible positions first: the order ranks the rest last
    walked = entropy.gather(-1, order).masked_fill(~in_order, 0.0).cumsum(dim=-1)
    return ((walked <= bound) & in_order).sum(dim=-1)


def log_mean_probability(logits: torch.Tensor) -> torch.Tensor:
    """log of the softmax of `logits` (T, V) averaged over the T positions (V,)."""
    return logits.float().log_softmax(dim=-1).logsumexp(dim=0) - math.log(logits.size(0))


def predictor(model: nn.Module) -> Callable[..., torch.Tensor]:
    """The pass the sampler runs: the model's `denoise` (an MDLM's fast path when it is on), else the model."""
    return getattr(model, "denoise", model)


def character_log_prior(model: nn.Module, length: int, device: torch.device) -> torch.Tensor:
    """Each character's log probability with nothing known (V,): the model's prediction on an all-mask
    canvas of `length`, averaged over positions (the same everywhere with rotary positions)."""
    canvas = torch.full((1, length), model.mask_id, device=device)
    return log_mean_probability(predictor(model)(canvas, torch.ones(1, device=device))[0])


def lowest_confidence(confidence: torch.Tensor, candidates: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """The `count` (B,) positions of `candidates` (B, T) with the lowest `confidence` (B, T), as a (B, T) mask."""
    scores = confidence.masked_fill(~candidates, float("inf"))
    rank = scores.argsort(dim=-1, stable=True).argsort(dim=-1)  # 0 = least confident
    return (rank < count[:, None]) & candidates


def _block_plan(is_masked: torch.Tensor, num_steps: int, block_length: int | None) -> list[tuple[slice, int]]:
    """Splits the canvas into blocks decoded one after another, with the steps each block gets."""
    T = is_masked.size(1)
    length = block_length or T
    blocks = [slice(s, min(s + length, T)) for s in range(0, T, length)]
    blocks = [b for b in blocks if is_masked[:, b].any()]
    if num_steps < len(blocks):
        raise ValueError(
            f"num_steps ({num_steps}) must be at least the number of blocks with masks ({len(blocks)}); "
            "raise num_steps or block_length"
        )
    plan = []
    for i, block in enumerate(blocks):
        steps = num_steps // len(blocks) + (1 if i < num_steps % len(blocks) else 0)
        # more steps than masks would only repeat forward passes (exact) or draw nothing most steps (binomial)
        steps = min(steps, int(is_masked[:, block].sum(dim=1).max()))
        plan.append((block, steps))
    return plan


def sample(
    model: nn.Module,
    canvas: torch.Tensor,
    options: SamplerOptions | None = None,
    *,
    generator: torch.Generator | None = None,
    seed: int | None = None,
    **overrides: Any,
) -> Iterator[SamplerState]:
    """Fills the [MASK] positions of `canvas` (T,) or (B, T); returns a generator of every state.

    `options` defaults to the study's recommendation, `SamplerOptions()` (an autoregressive twin's:
    `SamplerOptions.default_for_causal()`, and it writes left to right, mdlm_hf.autoregressive); `overrides` change
    single options by name (`sample(model, canvas, num_steps=8)`). `seed` (an integer in [0, 2**63)) or `generator`
    is the single source of randomness.
    """
    if options is not None and not isinstance(options, SamplerOptions):
        raise TypeError(f"options must be a SamplerOptions, got {options!r}; change single options by name")
    options = (SamplerOptions.default_for(model) if options is None else options).replace(**overrides)
    if not isinstance(canvas, torch.Tensor):
        raise ValueError(f"canvas must be a torch.Tensor of token ids, got {type(canvas).__name__}")
    if canvas.dim() == 1:
        canvas = canvas[None, :]
    if canvas.dim() != 2 or canvas.numel() == 0 or canvas.dtype != torch.long:
        raise ValueError("canvas must be a non-empty (T,) or (B, T) tensor of token ids (torch.long)")
    check_canvas_length(canvas.size(1))
    if int(canvas.min()) < 0 or int(canvas.max()) > model.mask_id:
        raise ValueError(f"canvas ids must lie in [0, {model.mask_id}] (mask_id = {model.mask_id})")
    is_masked = canvas == model.mask_id
    if not is_masked.any():
        raise ValueError("canvas has no masked position: nothing to fill")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {generator!r}")
    if generator is not None and seed is not None:
        raise ValueError("give seed or generator, not both: a generator already carries its own seed")
    if seed is not None:
        check_seed(seed)
    if generator is None:
        generator = torch.Generator()
        generator.manual_seed(seed) if seed is not None else generator.seed()
    if getattr(model, "causal", False):  # an autoregressive twin writes its own way (mdlm_hf/autoregressive.py)
        return model.write_left_to_right(canvas.clone(), options, generator)
    window_context = model.block_size // 4 if options.window_context is None else options.window_context
    if canvas.size(1) > model.block_size and window_context >= model.block_size:
        raise ValueError(
            f"window_context must be below the model's block_size ({model.block_size}) to write a canvas longer "
            f"than it, got {window_context}"
        )
    windows = plan_windows(is_masked, model.block_size, window_context, options.num_steps, options.spacing)
    plans, pending = [], is_masked.clone()
    for w in windows:  # each window's blocks, over the masks still pending when it starts (known up front)
        steps = w.num_steps
        if len(windows) > 1 and options.block_length:  # a window's share of the steps still gives each block one
            steps = max(steps, math.ceil((w.fill_end - w.start) / options.block_length))
        plans.append(_block_plan(pending[:, w.start : w.fill_end], steps, options.block_length))
        pending[:, w.start : w.fill_end] = False
    return _slide(model, canvas.clone(), list(zip(windows, plans, strict=True)), options, generator)


@torch.no_grad()
def _slide(
    model: nn.Module,
    tokens: torch.Tensor,
    plan: list[tuple[Window, list[tuple[slice, int]]]],
    options: SamplerOptions,
    generator: torch.Generator,
) -> Iterator[SamplerState]:
    """Runs the core over each window of `plan` in turn; yields the whole canvas's states (one window: as is)."""
    device = next(model.parameters()).device
    tokens = tokens.to(device)
    B, N = tokens.shape
    is_given = tokens != model.mask_id
    confidence = torch.full((B, N), float("nan"), device=device)
    nothing = torch.zeros_like(is_given)
    total_steps = sum(steps for _, blocks in plan for _, steps in blocks)
    step, num_forward_passes = 0, 0
    first = (plan[0][0].start, plan[0][0].end)
    yield SamplerState(
        tokens.clone(), nothing, nothing, confidence.clone(), is_given, 0, total_steps, 0, model.mask_id, first
    )
    for w, blocks in plan:
        first_mask = int((tokens[:, w.start : w.fill_end] == model.mask_id).any(dim=0).int().argmax())
        fills = slice(w.start + first_mask, w.fill_end)  # only this window writes here
        for state in _run(model, tokens[:, w.start : w.end].clone(), blocks, options, generator):
            tokens[:, w.start : w.end] = state.tokens
            revealed, remasked = nothing.clone(), nothing.clone()
            revealed[:, w.start : w.end], remasked[:, w.start : w.end] = state.revealed, state.remasked
            confidence[:, fills] = state.confidence[:, fills.start - w.start : fills.stop - w.start]
            yield SamplerState(
                tokens.clone(),
                revealed,
                remasked,
                confidence.clone(),
                is_given,
                step + state.step,
                total_steps,
                num_forward_passes + state.num_forward_passes,
                model.mask_id,
                (w.start, w.end),
            )
        step, num_forward_passes = step + state.step, num_forward_passes + state.num_forward_passes


@torch.no_grad()  # not inference_mode: states stay ordinary tensors that users can feed back to the model
def _run(
    model: nn.Module,
    tokens: torch.Tensor,
    plan: list[tuple[slice, int]],
    options: SamplerOptions,
    generator: torch.Generator,
) -> Iterator[SamplerState]:
    """The steps of one window: `tokens` (B, T), on the model's device, filled block by block as `plan` says; yields
    the window's state after each step (`_slide` yields the canvas before the first)."""
    device = tokens.device
    B, T = tokens.shape
    mask_id = model.mask_id
    is_given = tokens != mask_id
    confidence = torch.full((B, T), float("nan"), device=device)
    total_steps = sum(steps for _, steps in plan)
    nothing = torch.zeros_like(is_given)
    step, num_forward_passes, logits, logits_canvas = 0, 0, None, None
    with evaluating(model):  # back in the caller's mode when the run ends, fails or is closed
        needs_prior = options.prior_weight > 0 and options.order in SCORED_ORDERS
        # an adaptive rule with exact counts reveals at least one per pass; binomial counts may still draw none
        adaptive = options.reveal_counts == "exact" and (
            options.threshold is not None or options.entropy_bound is not None
        )
        capitals = capital_letters(model, device)
        separator_ids = word_separators(model, device) if options.order == "word_streams" else None
        log_prior, fully_masked = None, (tokens == mask_id).all(dim=1)  # (B,)
        if needs_prior and not fully_masked.any():
            log_prior = character_log_prior(model, T, device)  # one row; not a denoising step, not counted
        for block, block_steps in plan:
            in_block = torch.zeros_like(is_given)
            in_block[:, block] = True
            num_masked = ((tokens == mask_id) & in_block).sum(dim=1)  # (B,) masks in this block at its start
            # streams orders: the pass that writes each position, planned at the block's start; word streams order's
            # separators, written in its first pass
            stream_plan, separators = None, None
            if options.order == "word_streams" and separator_ids is not None:
                stream_plan, separators = word_stream_passes(
                    (tokens == mask_id) & in_block, tokens != mask_id, block_steps
                )
            elif options.order in STREAM_ORDERS:
                stream_plan = stream_passes((tokens == mask_id) & in_block, tokens != mask_id, block_steps)
            for local_step in range(1, block_steps + 1):
                eligible = (tokens == mask_id) & in_block
                if not eligible.any():
                    break  # an adaptive rule (threshold, entropy_bound) finished this block early
                # a model that ignores t gives the same logits for the same canvas
                if logits is None or model.time_conditioning or not torch.equal(tokens, logits_canvas):
                    t = (tokens == mask_id).float().mean(dim=1)  # mask ratio, for time-conditioned models
                    logits = predictor(model)(tokens, t)
                    logits_canvas = tokens.clone()
                    num_forward_passes += 1
                if needs_prior and log_prior is None:
                    # free generation: the first step's prediction on an all-mask row is the prior
                    log_prior = log_mean_probability(logits[fully_masked.nonzero()[0, 0]])
                remaining = eligible.sum(dim=1)
                num_scheduled = _num_to_reveal(
                    num_masked, remaining, block_steps, local_step, eligible, options, generator
                )
                # an adaptive rule's extras may run ahead of the schedule: then each pass still reveals one
                num_to_reveal = num_scheduled.clamp(min=1).minimum(remaining) if adaptive else num_scheduled
                streams_due = None if stream_plan is None else (stream_plan > 0) & (stream_plan <= local_step)
                tokens, revealed, step_confidence = denoise_step(
                    logits,
                    tokens,
                    eligible,
                    num_to_reveal,
                    options,
                    generator,
                    log_prior,
                    streams_due=streams_due,
                    capitals=capitals,
                    separators=separators,
                    separator_ids=separator_ids,
                )
                confidence = torch.where(revealed, step_confidence, confidence)
                remasked = nothing
                if options.remask_ratio > 0 and local_step < block_steps:  # the last step leaves no mask
                    may_remask = in_block & ~is_given & (tokens != mask_id) & ~revealed
                    still_masked = ((tokens == mask_id) & in_block).any(dim=1)
                    remasked = remask_picks(confidence, may_remask, revealed, num_scheduled, still_masked, options)
                    tokens = tokens.masked_fill(remasked, mask_id)
                    confidence = confidence.masked_fill(remasked, float("nan"))
                step += 1
                yield SamplerState(
                    tokens.clone(),
                    revealed,
                    remasked,
                    confidence.clone(),
                    is_given,
                    step,
                    total_steps,
                    num_forward_passes,
                    mask_id,
                )


def remask_picks(
    confidence: torch.Tensor,
    may_remask: torch.Tensor,
    revealed: torch.Tensor,
    num_scheduled: torch.Tensor,
    still_masked: torch.Tensor,
    options: SamplerOptions,
) -> torch.Tensor:
    """The earlier characters (B, T) to mask again after a step: remask_ratio per character the schedule revealed
    (`num_scheduled` (B,)), the least confident of `may_remask`, none in a row with no mask left (`still_masked`)."""
    # in proportion to the schedule's reveals only: an adaptive rule's extras are net progress, a row ahead of the
    # schedule is not held back (so it can end early), and a filled row is done
    scheduled = revealed.sum(dim=1).minimum(num_scheduled)
    num_to_remask = torch.floor(scheduled * options.remask_ratio + 0.5).long() * still_masked
    return lowest_confidence(confidence, may_remask, num_to_remask)


def _num_to_reveal(
    num_masked: torch.Tensor,
    remaining: torch.Tensor,
    block_steps: int,
    local_step: int,
    eligible: torch.Tensor,
    options: SamplerOptions,
    generator: torch.Generator,
) -> torch.Tensor:
    """How many positions the schedule reveals in each row at this step (B,)."""
    if local_step == block_steps:
        return remaining  # the last step of a block leaves no mask
    if options.reveal_counts == "binomial":
        before = revealed_fraction(options.schedule, (local_step - 1) / block_steps)
        after = revealed_fraction(options.schedule, local_step / block_steps)
        probability = (after - before) / (1.0 - before)
        draws = torch.rand(eligible.shape, generator=generator).to(eligible.device)
        return ((draws < probability) & eligible).sum(dim=1)
    already = num_masked - remaining
    target = planned_reveals(num_masked, block_steps, local_step, options.schedule)
    return (target - already).clamp(min=0).minimum(remaining)  # 0 where an adaptive rule ran ahead


def final_state(states: Iterator[SamplerState], state: SamplerState | None = None) -> SamplerState:
    """Runs a sampler generator to the end and returns its last state (`state`: one already taken from it)."""
    for state in states:  # noqa: B007 (the loop's last value is the point)
        pass
    return state
