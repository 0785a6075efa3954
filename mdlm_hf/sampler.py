"""The one sampler core: reveal masked positions of a canvas over a number of denoising steps.

Free generation (all masked), prompted generation (prefix given) and infilling (blanks anywhere)
are the same call on a canvas of fixed length. `sample` validates its options and returns a
generator that yields a `SamplerState` before the first step and after every step, so a UI can
stream it, a test can inspect it and a benchmark can time it. Each step is one call of
`denoise_step`; every random draw goes through one `torch.Generator`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn as nn

from mdlm_hf.tokenizer import CharTokenizer

ORDERS = ("confidence", "margin", "entropy", "random", "left_to_right")
SCORED_ORDERS = ("confidence", "margin", "entropy")  # orders that rank positions by the model's beliefs
# the options that, beside the order itself, decide which positions are revealed (and taken back)
REVEAL_RULE_OPTIONS = ("order_temperature", "prior_weight", "remask_ratio", "spacing")
SCHEDULES = ("linear", "cosine")
REVEAL_COUNTS = ("exact", "binomial")

# what the app, the CLI, the string API (generate / complete / infill / stream), the model card and
# evaluate.py use unless told otherwise; `sample` itself keeps every option off. Chosen by the sampling
# study (benchmarks/results/sampling_quality.md): confidence order wins at every step count; a soft order
# (order temperature 0.25) beats the strict one from 32 steps on; temperature 1.0 beats 0.7. Plain
# confidence decoding writes too few capitals, punctuation marks and line breaks (character entropy 0.86x
# real text's): the prior weight brings them back, remasking and spacing pay for it in words.
DEFAULT_SAMPLING = {
    "num_steps": 64,
    "order": "confidence",
    "temperature": 1.0,
    "order_temperature": 0.25,
    "prior_weight": 0.35,
    "remask_ratio": 0.75,
    "spacing": 1,
}


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

    @property
    def is_masked(self) -> torch.Tensor:
        return self.tokens == self.mask_id

    @property
    def done(self) -> bool:
        return not bool(self.is_masked.any())


@dataclass(frozen=True)
class SamplerOptions:
    """Validated options of one sampling run; see `sample` for their meaning."""

    num_steps: int = 64
    order: str = "confidence"
    order_temperature: float = 0.0
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    schedule: str = "linear"
    block_length: int | None = None
    threshold: float | None = None
    reveal_counts: str = "exact"
    remask_ratio: float = 0.0
    prior_weight: float = 0.0
    spacing: int = 0

    def __post_init__(self) -> None:
        def is_int(x: object) -> bool:
            return isinstance(x, int) and not isinstance(x, bool)

        def is_finite_non_negative(x: object) -> bool:
            return isinstance(x, (int, float)) and math.isfinite(x) and x >= 0

        if not is_int(self.num_steps) or self.num_steps < 1:
            raise ValueError(f"num_steps must be an integer >= 1, got {self.num_steps!r}")
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {self.order!r}")
        if not is_finite_non_negative(self.order_temperature):
            raise ValueError(f"order_temperature must be a finite number >= 0, got {self.order_temperature!r}")
        if not is_finite_non_negative(self.temperature):
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature!r}")
        if self.top_k is not None and (not is_int(self.top_k) or self.top_k < 1):
            raise ValueError(f"top_k must be None or an integer >= 1, got {self.top_k!r}")
        if self.top_p is not None and not (isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1):
            raise ValueError(f"top_p must be None or in (0, 1], got {self.top_p!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.block_length is not None and (not is_int(self.block_length) or self.block_length < 1):
            raise ValueError(f"block_length must be None or an integer >= 1, got {self.block_length!r}")
        if self.threshold is not None and not (isinstance(self.threshold, (int, float)) and 0 < self.threshold <= 1):
            raise ValueError(f"threshold must be None or in (0, 1], got {self.threshold!r}")
        if not (is_finite_non_negative(self.remask_ratio) and self.remask_ratio < 1):
            raise ValueError(f"remask_ratio must be a number in [0, 1), got {self.remask_ratio!r}")
        if not is_finite_non_negative(self.prior_weight):
            raise ValueError(f"prior_weight must be a finite number >= 0, got {self.prior_weight!r}")
        if not is_int(self.spacing) or self.spacing < 0:
            raise ValueError(f"spacing must be an integer >= 0, got {self.spacing!r}")
        if self.reveal_counts not in REVEAL_COUNTS:
            raise ValueError(f"reveal_counts must be one of {REVEAL_COUNTS}, got {self.reveal_counts!r}")


def revealed_fraction(schedule: str, x: float) -> float:
    """Fraction of the masked positions revealed after a fraction x of the steps."""
    return x if schedule == "linear" else 1.0 - math.cos(math.pi * x / 2)


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


def candidate_tokens(logits: torch.Tensor, options: SamplerOptions, generator: torch.Generator) -> torch.Tensor:
    """Draws one candidate character per position (B, T) from temperature / top-k / top-p filtered logits."""
    if options.temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits.double() / options.temperature  # float64: Gumbel noise on tiny probabilities stays exact
    if options.top_k is not None and options.top_k < scaled.size(-1):
        kth = scaled.topk(options.top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if options.top_p is not None and options.top_p < 1:
        sorted_logits, order = scaled.sort(dim=-1, descending=True)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        drop_sorted = cumulative - sorted_logits.softmax(dim=-1) >= options.top_p  # keeps the top-1 always
        scaled = scaled.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), float("-inf"))
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


def denoise_step(
    logits: torch.Tensor,
    tokens: torch.Tensor,
    eligible: torch.Tensor,
    num_to_reveal: torch.Tensor,
    options: SamplerOptions,
    generator: torch.Generator,
    log_prior: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reveals `num_to_reveal` (B,) of the `eligible` (B, T) positions; returns (tokens, revealed, confidence).

    `log_prior` (V,) is each character's log probability with no context (`character_log_prior`); the
    scores use it when given and prior_weight > 0.
    """
    probs = logits.softmax(dim=-1)  # (B, T, V) the model's own distribution
    candidates = candidate_tokens(logits, options, generator)  # (B, T)
    confidence = probs.gather(-1, candidates[..., None]).squeeze(-1)  # (B, T)
    scores = reveal_scores(probs, candidates, options.order, generator)
    if log_prior is not None and options.prior_weight > 0:
        # plain confidence reveals common characters (spaces, e, t) first and rarely commits to the rare
        # ones that carry structure (capitals of speaker names, punctuation, line breaks); judging each
        # candidate by how far the context lifted it above its prior restores them (1 = pointwise mutual
        # information)
        scores = scores - options.prior_weight * log_prior.to(scores.dtype)[candidates]
    if options.order_temperature > 0:
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
    revealed = (rank < num_to_reveal[:, None]) & eligible
    if options.threshold is not None:
        revealed |= eligible & (confidence >= options.threshold)
    return torch.where(revealed, candidates, tokens), revealed, confidence


def log_mean_probability(logits: torch.Tensor) -> torch.Tensor:
    """log of the softmax of `logits` (T, V) averaged over the T positions (V,)."""
    return logits.float().log_softmax(dim=-1).logsumexp(dim=0) - math.log(logits.size(0))


def character_log_prior(model: nn.Module, length: int, device: torch.device) -> torch.Tensor:
    """Each character's log probability with nothing known (V,): the model's prediction on an all-mask
    canvas of `length`, averaged over positions (the same everywhere with rotary positions)."""
    canvas = torch.full((1, length), model.mask_id, device=device)
    return log_mean_probability(model(canvas, torch.ones(1, device=device))[0])


def lowest_confidence(confidence: torch.Tensor, candidates: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """The `count` (B,) positions of `candidates` (B, T) with the lowest `confidence` (B, T), as a (B, T) mask."""
    scores = confidence.masked_fill(~candidates, float("inf"))
    rank = scores.argsort(dim=-1, stable=True).argsort(dim=-1)  # 0 = least confident
    return (rank < count[:, None]) & candidates


def _block_plan(
    is_masked: torch.Tensor, num_steps: int, block_length: int | None, reveal_counts: str
) -> list[tuple[slice, int]]:
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
        if reveal_counts == "exact":  # more steps than masks would only repeat forward passes
            steps = min(steps, int(is_masked[:, block].sum(dim=1).max()))
        plan.append((block, steps))
    return plan


def sample(
    model: nn.Module,
    canvas: torch.Tensor,
    num_steps: int = 64,
    order: str = "confidence",
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    schedule: str = "linear",
    block_length: int | None = None,
    threshold: float | None = None,
    reveal_counts: str = "exact",
    order_temperature: float = 0.0,
    remask_ratio: float = 0.0,
    prior_weight: float = 0.0,
    spacing: int = 0,
    seed: int | None = None,
    generator: torch.Generator | None = None,
) -> Iterator[SamplerState]:
    """Fills the [MASK] positions of `canvas` (T,) or (B, T); returns a generator of every state.

    num_steps      denoising steps (clamped to the number of masks with exact counts)
    order          which masked positions are revealed first: confidence (max prob), margin
                   (top1 - top2), entropy (lowest first), random, left_to_right
    order_temperature  0 = follow the order strictly; > 0 = draw the positions to reveal with
                   probability proportional to exp(score / order_temperature) (confidence^(1/temp)
                   for confidence order), trading the order's greed for the diversity of random order
    prior_weight   confidence, margin and entropy orders: subtract prior_weight * log p(character) from
                   each candidate's score, p being the model's prediction with nothing known, so rare
                   characters that the context makes likely (capitals, punctuation) are not left for
                   last (1 = pointwise mutual information); free when a row starts all masked (the
                   first step's prediction is the prior), else one extra forward pass of one row, not
                   counted in num_forward_passes (which counts the denoising steps' passes); random
                   and left_to_right orders do not score positions and ignore it
    temperature    0 = greedy argmax; otherwise Gumbel-max sampling in float64; top_k / top_p filter
    schedule       linear or cosine (few reveals early, many late) number of reveals per step
    block_length   semi-autoregressive: blocks left to right, steps split evenly among them
    threshold      also reveal every eligible position whose candidate has probability >= threshold,
                   so easy text finishes in fewer steps
    reveal_counts  "exact": the schedule's count each step; "binomial": each masked position is
                   revealed with the schedule's probability (MDLM's ancestral sampler), so some steps
                   reveal nothing and then reuse the previous logits
    remask_ratio   in [0, 1): after every step but a block's last, mask again this many generated
                   characters per character the step revealed, those least confident when revealed
                   (ReMDM-conf), so early guesses made with little context are redrawn with more; the
                   schedule reveals them again, so the number of forward passes does not change, but
                   re-reveals count as reveals, so a step reveals up to 1 / (1 - remask_ratio) times
                   the schedule's new characters (0.75: about 4x), which needs enough steps
    spacing        positions revealed in the same step keep apart: they are picked best score first,
                   each ruling out the positions within `spacing` of it, and only then does the rest
                   of the ranking fill the step (the step's characters are drawn independently, so
                   adjacent ones need not agree); 0 = plain ranking
    seed/generator the single source of randomness
    """
    options = SamplerOptions(
        num_steps=num_steps,
        order=order,
        order_temperature=order_temperature,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        schedule=schedule,
        block_length=block_length,
        threshold=threshold,
        reveal_counts=reveal_counts,
        remask_ratio=remask_ratio,
        prior_weight=prior_weight,
        spacing=spacing,
    )
    if canvas.dim() == 1:
        canvas = canvas[None, :]
    if canvas.dim() != 2 or canvas.size(1) == 0 or canvas.dtype != torch.long:
        raise ValueError("canvas must be a non-empty (T,) or (B, T) tensor of token ids (torch.long)")
    if canvas.size(1) > model.block_size:
        raise ValueError(f"canvas length {canvas.size(1)} exceeds the model's block_size {model.block_size}")
    if int(canvas.min()) < 0 or int(canvas.max()) > model.mask_id:
        raise ValueError(f"canvas ids must lie in [0, {model.mask_id}] (mask_id = {model.mask_id})")
    is_masked = canvas == model.mask_id
    if not is_masked.any():
        raise ValueError("canvas has no masked position: nothing to fill")
    if generator is None:
        generator = torch.Generator()
        generator.manual_seed(seed) if seed is not None else generator.seed()
    plan = _block_plan(is_masked, options.num_steps, options.block_length, options.reveal_counts)
    return _run(model, canvas.clone(), plan, options, generator)


@torch.no_grad()  # not inference_mode: states stay ordinary tensors that users can feed back to the model
def _run(
    model: nn.Module,
    tokens: torch.Tensor,
    plan: list[tuple[slice, int]],
    options: SamplerOptions,
    generator: torch.Generator,
) -> Iterator[SamplerState]:
    device = next(model.parameters()).device
    tokens = tokens.to(device)
    B, T = tokens.shape
    mask_id = model.mask_id
    is_given = tokens != mask_id
    confidence = torch.full((B, T), float("nan"), device=device)
    total_steps = sum(steps for _, steps in plan)
    nothing = torch.zeros_like(is_given)
    yield SamplerState(tokens.clone(), nothing, nothing, confidence.clone(), is_given, 0, total_steps, 0, mask_id)
    was_training = model.training
    model.eval()
    step, num_forward_passes, logits, logits_canvas = 0, 0, None, None
    try:
        needs_prior = options.prior_weight > 0 and options.order in SCORED_ORDERS
        log_prior, fully_masked = None, (tokens == mask_id).all(dim=1)  # (B,)
        if needs_prior and not fully_masked.any():
            log_prior = character_log_prior(model, T, device)  # one row; not a denoising step, not counted
        for block, block_steps in plan:
            in_block = torch.zeros_like(is_given)
            in_block[:, block] = True
            num_masked = ((tokens == mask_id) & in_block).sum(dim=1)  # (B,) masks in this block at its start
            for local_step in range(1, block_steps + 1):
                eligible = (tokens == mask_id) & in_block
                if not eligible.any():
                    break  # threshold mode finished this block early
                # a model that ignores t gives the same logits for the same canvas
                if logits is None or model.time_conditioning or not torch.equal(tokens, logits_canvas):
                    t = (tokens == mask_id).float().mean(dim=1)  # mask ratio, for time-conditioned models
                    logits = model(tokens, t)
                    logits_canvas = tokens.clone()
                    num_forward_passes += 1
                if needs_prior and log_prior is None:
                    # free generation: the first step's prediction on an all-mask row is the prior
                    log_prior = log_mean_probability(logits[fully_masked.nonzero()[0, 0]])
                remaining = eligible.sum(dim=1)
                num_to_reveal = _num_to_reveal(
                    num_masked, remaining, block_steps, local_step, eligible, options, generator
                )
                tokens, revealed, step_confidence = denoise_step(
                    logits, tokens, eligible, num_to_reveal, options, generator, log_prior
                )
                confidence = torch.where(revealed, step_confidence, confidence)
                remasked = nothing
                if options.remask_ratio > 0 and local_step < block_steps:  # the last step leaves no mask
                    may_remask = in_block & ~is_given & (tokens != mask_id) & ~revealed
                    num_to_remask = torch.floor(revealed.sum(dim=1) * options.remask_ratio + 0.5).long()
                    remasked = lowest_confidence(confidence, may_remask, num_to_remask)
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
    finally:
        model.train(was_training)


def _num_to_reveal(
    num_masked: torch.Tensor,
    remaining: torch.Tensor,
    block_steps: int,
    local_step: int,
    eligible: torch.Tensor,
    options: SamplerOptions,
    generator: torch.Generator,
) -> torch.Tensor:
    """How many positions each row reveals at this step (B,)."""
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
    return (target - already).clamp(min=1 if options.threshold is not None else 0).minimum(remaining)


# --- thin string API ---


def text_to_canvas(tokenizer: CharTokenizer, text: str, blank: str = "_") -> torch.Tensor:
    """Encodes `text`, turning each `blank` character into [MASK]; (T,) ids."""
    if not isinstance(blank, str) or len(blank) != 1:
        raise ValueError(f"blank must be a single character, got {blank!r}")
    if not text:
        raise ValueError("template is empty")
    if blank not in text:
        raise ValueError(f"template has no blank: mark each character to fill with {blank!r}")
    given = text.replace(blank, "")
    tokenizer.encode(given)  # raises, naming every unknown character
    ids = [tokenizer.mask_id if c == blank else tokenizer.char_to_id[c] for c in text]
    return torch.tensor(ids, dtype=torch.long)


def prompt_canvas(tokenizer: CharTokenizer, prompt: str, length: int, block_size: int) -> torch.Tensor:
    """The prompt's ids followed by `length` masks; (T,) ids."""
    if not isinstance(length, int) or isinstance(length, bool) or length < 1:
        raise ValueError(f"length must be an integer >= 1, got {length!r}")
    if len(prompt) + length > block_size:
        raise ValueError(
            f"prompt ({len(prompt)} chars) + length ({length}) exceeds the model's block_size {block_size}"
        )
    return torch.tensor(tokenizer.encode(prompt) + [tokenizer.mask_id] * length, dtype=torch.long)


def final_state(states: Iterator[SamplerState]) -> SamplerState:
    """Runs a sampler generator to the end and returns its last state."""
    state = None
    for state in states:  # noqa: B007 (the loop's last value is the point)
        pass
    return state


def recommended(options: dict) -> dict:
    """The study's settings (DEFAULT_SAMPLING) overridden by `options`: the string API's defaults."""
    return {**DEFAULT_SAMPLING, **options}


def complete(model: nn.Module, prompt: str, length: int, **options) -> str:
    """The prompt followed by `length` generated characters (DEFAULT_SAMPLING unless told otherwise)."""
    canvas = prompt_canvas(model.tokenizer, prompt, length, model.block_size)
    return model.tokenizer.decode(final_state(sample(model, canvas, **recommended(options))).tokens[0])


def infill(model: nn.Module, template: str, blank: str = "_", **options) -> str:
    """The template with every `blank` character filled in (DEFAULT_SAMPLING unless told otherwise)."""
    if len(template) > model.block_size:
        raise ValueError(f"template length {len(template)} exceeds the model's block_size {model.block_size}")
    canvas = text_to_canvas(model.tokenizer, template, blank)
    return model.tokenizer.decode(final_state(sample(model, canvas, **recommended(options))).tokens[0])
