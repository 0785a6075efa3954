"""The diffusion model's writer: reveal the masked positions of a canvas over a number of denoising steps.

Free generation (all masked), prompted generation (prefix given) and infilling (blanks anywhere) are the same call on
a canvas of fixed length. `write_by_denoising` yields a `SamplerState` before the first step and after every step, so
a UI can stream it, a test can inspect it and a benchmark can time it. A canvas longer than the model's context is
written window by window (`_slide`); each window's steps are `_run`'s, one `denoise_step` each, and every random
draw goes through one `torch.Generator`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
import torch.nn as nn

from mdlm_hf.inference import evaluating, predictor
from mdlm_hf.sampling.casts import Casts
from mdlm_hf.sampling.drawing import capital_letters, newline_id, within_line_blanks, without_line_breaks
from mdlm_hf.sampling.keeper import Keeper
from mdlm_hf.sampling.lexicon import Lexicon
from mdlm_hf.sampling.options import SamplerOptions
from mdlm_hf.sampling.orders import plan_streams, reveal_order, word_separators
from mdlm_hf.sampling.prior import character_log_prior, log_mean_probability
from mdlm_hf.sampling.remasking import remask_picks
from mdlm_hf.sampling.schedule import block_plan, num_to_reveal
from mdlm_hf.sampling.state import SamplerState
from mdlm_hf.sampling.step import denoise_step
from mdlm_hf.windows import Window, context_of, plan_windows


def write_by_denoising(
    model: nn.Module,
    canvas: torch.Tensor,
    options: SamplerOptions,
    generator: torch.Generator,
    lexicon: Lexicon | None = None,
    casts: Casts | None = None,
) -> Iterator[SamplerState]:
    """The sampler core for a diffusion model: fills the masks of `canvas` (B, T) (checked by `mdlm_hf.sample`), its
    windows and blocks planned up front, its words kept to `lexicon` (real_words) and its headings to one play of
    `casts` (keep_cast) when given; a generator of every state."""
    is_masked = canvas == model.mask_id
    window_context = context_of(model.block_size, options.window_context)
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
        plans.append(block_plan(pending[:, w.start : w.fill_end], steps, options.block_length))
        pending[:, w.start : w.fill_end] = False
    keeper = Keeper.for_run(model, canvas.size(0), lexicon, casts)
    inside = within_line_blanks(canvas, model.mask_id, newline_id(model)) if options.keep_lines else None
    return _slide(model, canvas.clone(), list(zip(windows, plans, strict=True)), options, generator, keeper, inside)


@torch.no_grad()
def _slide(
    model: nn.Module,
    tokens: torch.Tensor,
    plan: list[tuple[Window, list[tuple[slice, int]]]],
    options: SamplerOptions,
    generator: torch.Generator,
    keeper: Keeper | None = None,
    inside: torch.Tensor | None = None,
) -> Iterator[SamplerState]:
    """Runs the core over each window of `plan` in turn; yields the whole canvas's states (one window: as is).
    `inside` (B, N) marks the masks of blanks within a line, where no line break is drawn (keep_lines)."""
    device = next(model.parameters()).device
    tokens = tokens.to(device)
    B, N = tokens.shape
    is_given = tokens != model.mask_id
    inside = None if inside is None else inside.to(device)
    confidence = torch.full((B, N), float("nan"), device=device)
    nothing = torch.zeros_like(is_given)
    total_steps = sum(steps for _, blocks in plan for _, steps in blocks)
    step, num_forward_passes = 0, 0
    first = (plan[0][0].start, plan[0][0].end)
    yield SamplerState(
        tokens.clone(), nothing, nothing, confidence.clone(), is_given, 0, total_steps, 0, model.mask_id, first
    ).with_fallbacks(keeper)
    for w, blocks in plan:
        first_mask = int((tokens[:, w.start : w.fill_end] == model.mask_id).any(dim=0).int().argmax())
        fills = slice(w.start + first_mask, w.fill_end)  # only this window writes here
        if keeper is not None:  # the caller's text only is given: earlier windows' text was kept to the rules
            keeper.enter(tokens, is_given, w.start)
        in_window = None if inside is None else inside[:, w.start : w.end]
        for state in _run(model, tokens[:, w.start : w.end].clone(), blocks, options, generator, keeper, in_window):
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
            ).with_fallbacks(keeper)
        step, num_forward_passes = step + state.step, num_forward_passes + state.num_forward_passes


@torch.no_grad()  # not inference_mode: states stay ordinary tensors that users can feed back to the model
def _run(
    model: nn.Module,
    tokens: torch.Tensor,
    plan: list[tuple[slice, int]],
    options: SamplerOptions,
    generator: torch.Generator,
    keeper: Keeper | None = None,
    inside: torch.Tensor | None = None,
) -> Iterator[SamplerState]:
    """The steps of one window: `tokens` (B, T), on the model's device, filled block by block as `plan` says, no
    line break drawn where `inside` (B, T) says; yields the window's state after each step (`_slide` yields the
    canvas before the first)."""
    run = _WindowRun(model, tokens, options, generator, sum(steps for _, steps in plan), keeper, inside)
    with evaluating(model):  # back in the caller's mode when the run ends, fails or is closed
        run.start()
        for block, block_steps in plan:
            yield from run.block(block, block_steps)


class _WindowRun:
    """One window's run: the canvas, its characters' confidence and the last pass's logits, carried from step to
    step and from block to block."""

    def __init__(
        self,
        model: nn.Module,
        tokens: torch.Tensor,
        options: SamplerOptions,
        generator: torch.Generator,
        total_steps: int,
        keeper: Keeper | None = None,
        inside: torch.Tensor | None = None,
    ) -> None:
        self.model, self.options, self.generator, self.total_steps = model, options, generator, total_steps
        self.keeper = keeper  # real_words, keep_cast: keeps each revealed character to the rules
        self.inside = inside  # keep_lines: the masks of blanks within a line, where no line break is drawn
        self.tokens, self.mask_id = tokens, model.mask_id
        self.is_given = tokens != self.mask_id
        self.confidence = torch.full(tokens.shape, float("nan"), device=tokens.device)
        self.nothing = torch.zeros_like(self.is_given)
        self.step, self.num_forward_passes = 0, 0
        self.logits: torch.Tensor | None = None
        self.logits_canvas: torch.Tensor | None = None
        self.needs_prior = options.prior_weight > 0 and reveal_order(options.order).by_belief
        # an adaptive rule with exact counts reveals at least one per pass; binomial counts may still draw none
        self.adaptive = options.reveal_counts == "exact" and (
            options.threshold is not None or options.entropy_bound is not None
        )

    def start(self) -> None:
        """What the run reads of the model before its first step (in eval mode): its capitals, its word separators
        (a planned order) and, unless a row starts all masked, each character's prior (one row, not counted)."""
        device, planned = self.tokens.device, reveal_order(self.options.order).plan is not None
        self.capitals, self.line_break = capital_letters(self.model, device), newline_id(self.model)
        self.separator_ids = word_separators(self.model, device) if planned else None
        self.log_prior, self.fully_masked = None, (self.tokens == self.mask_id).all(dim=1)  # (B,)
        if self.needs_prior and not self.fully_masked.any():
            self.log_prior = character_log_prior(self.model, self.tokens.size(1), device)

    def predict(self) -> torch.Tensor:
        """The logits of the canvas as it is: a new pass, unless the canvas is unchanged and the model ignores t."""
        tokens = self.tokens
        if self.logits is None or self.model.time_conditioning or not torch.equal(tokens, self.logits_canvas):
            t = (tokens == self.mask_id).float().mean(dim=1)  # mask ratio, for time-conditioned models
            self.logits = predictor(self.model)(tokens, t)
            self.logits_canvas = tokens.clone()
            self.num_forward_passes += 1
        if self.needs_prior and self.log_prior is None:
            # free generation: the first step's prediction on an all-mask row is the prior
            self.log_prior = log_mean_probability(self.logits[self.fully_masked.nonzero()[0, 0]])
        return self.logits

    def block(self, block: slice, block_steps: int) -> Iterator[SamplerState]:
        """The steps of one block of the window; yields the window's state after each."""
        in_block = torch.zeros_like(self.is_given)
        in_block[:, block] = True
        is_masked = self.tokens == self.mask_id
        num_masked = (is_masked & in_block).sum(dim=1)  # (B,) masks in this block at its start
        stream_plan, separators = plan_streams(
            self.options.order, is_masked & in_block, ~is_masked, block_steps, self.separator_ids
        )
        for local_step in range(1, block_steps + 1):
            eligible = (self.tokens == self.mask_id) & in_block
            if not eligible.any():
                break  # an adaptive rule (threshold, entropy_bound) finished this block early
            logits, remaining = without_line_breaks(self.predict(), self.inside, self.line_break), eligible.sum(dim=1)
            num_scheduled = num_to_reveal(
                num_masked, remaining, block_steps, local_step, eligible, self.options, self.generator
            )
            # an adaptive rule's extras may run ahead of the schedule: then each pass still reveals one
            count = num_scheduled.clamp(min=1).minimum(remaining) if self.adaptive else num_scheduled
            streams_due = None if stream_plan is None else (stream_plan > 0) & (stream_plan <= local_step)
            self.tokens, revealed, step_confidence = denoise_step(
                logits,
                self.tokens,
                eligible,
                count,
                self.options,
                self.generator,
                self.log_prior,
                streams_due=streams_due,
                capitals=self.capitals,
                separators=separators,
                separator_ids=self.separator_ids,
                keeper=self.keeper,
            )
            self.confidence = torch.where(revealed, step_confidence, self.confidence)
            remasked = self.nothing
            if self.options.remask_ratio > 0 and local_step < block_steps:  # the last step leaves no mask
                remasked = self.remask(in_block, revealed, num_scheduled)
            self.step += 1
            yield SamplerState(
                self.tokens.clone(),
                revealed,
                remasked,
                self.confidence.clone(),
                self.is_given,
                self.step,
                self.total_steps,
                self.num_forward_passes,
                self.mask_id,
            )

    def remask(self, in_block: torch.Tensor, revealed: torch.Tensor, num_scheduled: torch.Tensor) -> torch.Tensor:
        """Masks again the block's least confident earlier draws (`remask_picks`); returns them (B, T)."""
        tokens, mask_id = self.tokens, self.mask_id
        may_remask = in_block & ~self.is_given & (tokens != mask_id) & ~revealed
        still_masked = ((tokens == mask_id) & in_block).any(dim=1)
        remasked = remask_picks(self.confidence, may_remask, revealed, num_scheduled, still_masked, self.options)
        self.tokens = tokens.masked_fill(remasked, mask_id)
        self.confidence = self.confidence.masked_fill(remasked, float("nan"))
        return remasked
