"""The diffusion model's writer: the reference sampler (reference.py) with every option, a generator of every state.

Free generation, prompted generation and infilling are the same call on a canvas of fixed length.
`write_by_denoising` plans the run and returns `denoising_states`, which yields a `SamplerState` before the first
step and after every step. Its loop is the reference's loop, run over windows and blocks:

    reference.py                      here
    for step in range(num_steps)      for each window (a canvas past the model's context, mdlm_hf/windows.py),
                                        for each block (semi-autoregressive, block_length), for each of its steps
    [predict] logits = model(tokens)  `DenoisingRun.predict`: one window's canvas; no new pass when it is unchanged
    [draw] [score] [reveal]           `step.denoise_step`: the orders, min-p and top-p, the rules (keeper.py)
    [count] revealed_after(...)       `schedule.num_to_reveal` (binomial counts, blocks), threshold, entropy_bound
    (nothing)                         remasking takes back the least confident draws (remasking.py)
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

from mdlm_hf.inference import evaluating, predictor
from mdlm_hf.sampling.casts import Casts
from mdlm_hf.sampling.drawing import capital_letters, newline_id, within_line_blanks, without_line_breaks
from mdlm_hf.sampling.keeper import Keeper
from mdlm_hf.sampling.lexicon import Lexicon
from mdlm_hf.sampling.options import SamplerOptions
from mdlm_hf.sampling.orders import reveal_order, word_separators
from mdlm_hf.sampling.prior import character_log_prior, log_mean_probability
from mdlm_hf.sampling.remasking import remask_picks
from mdlm_hf.sampling.schedule import block_plan, num_to_reveal
from mdlm_hf.sampling.state import SamplerState
from mdlm_hf.sampling.step import DenoisingPass, denoise_step
from mdlm_hf.windows import Window, context_of, plan_windows

# each window with its blocks: (the positions of the window's canvas it fills, the steps it gets)
Plan = list[tuple[Window, list[tuple[slice, int]]]]


def write_by_denoising(
    model: nn.Module,
    canvas: torch.Tensor,
    options: SamplerOptions,
    generator: torch.Generator,
    lexicon: Lexicon | None = None,
    casts: Casts | None = None,
) -> Iterator[SamplerState]:
    """Fills the masks of `canvas` (B, T), checked by `mdlm_hf.sample`, its words kept to `lexicon` (real_words) and
    its headings to `casts` (keep_cast) when given; a generator of every state."""
    plan = plan_run(model, canvas, options)  # before the generator: a plan it cannot make is refused at the call
    keeper = Keeper.for_run(model, canvas.size(0), lexicon, casts)
    return denoising_states(DenoisingRun(model, canvas, plan, options, generator, keeper))


def plan_run(model: nn.Module, canvas: torch.Tensor, options: SamplerOptions) -> Plan:
    """The run's windows (one, unless the canvas is longer than the model's context), each with its blocks."""
    is_masked = canvas == model.mask_id
    window_context = context_of(model.block_size, options.window_context)
    if canvas.size(1) > model.block_size and window_context >= model.block_size:
        raise ValueError(
            f"window_context must be below the model's block_size ({model.block_size}) to write a canvas longer "
            f"than it, got {window_context}"
        )
    windows = plan_windows(is_masked, model.block_size, window_context, options.num_steps, options.spacing)
    plan, pending = [], is_masked.clone()
    for w in windows:
        steps = w.num_steps
        if len(windows) > 1 and options.block_length:  # a window's share of the steps still gives each block one
            steps = max(steps, math.ceil((w.fill_end - w.start) / options.block_length))
        plan.append((w, block_plan(pending[:, w.start : w.fill_end], steps, options.block_length)))
        pending[:, w.start : w.fill_end] = False
    return plan


@torch.no_grad()  # not inference_mode: states stay ordinary tensors that users can feed back to the model
def denoising_states(run: DenoisingRun) -> Iterator[SamplerState]:
    """The reference sampler's loop over windows, blocks and steps: the canvas before the first step and after each."""
    yield run.state()
    with evaluating(run.model):  # back in the caller's mode when the run ends, fails or is closed
        for window, blocks in run.plan:
            run.enter(window)
            for block, block_steps in blocks:
                run.start_block(block, block_steps)
                for local_step in range(1, block_steps + 1):
                    step = run.next_pass(local_step)
                    if step is None:
                        break  # an adaptive rule (threshold, entropy_bound) finished this block early
                    run.take(*denoise_step(step), local_step)
                    yield run.state()


class DenoisingRun:
    """A run's canvas and what it carries from step to step: the characters' confidence, the last pass's logits,
    the window and block being written, and what the run read of the model once (capitals, separators, prior)."""

    def __init__(
        self,
        model: nn.Module,
        canvas: torch.Tensor,
        plan: Plan,
        options: SamplerOptions,
        generator: torch.Generator,
        keeper: Keeper | None = None,
    ) -> None:
        device = next(model.parameters()).device
        self.model, self.plan, self.options, self.generator = model, plan, options, generator
        self.keeper = keeper  # real_words, keep_cast: keeps each revealed character to the rules
        self.mask_id = model.mask_id
        self.tokens = canvas.clone().to(device)  # (B, N) the whole canvas, updated in place (the keeper reads it)
        self.is_given = self.tokens != self.mask_id  # (B, N) the caller's characters, never changed
        self.confidence = torch.full(self.tokens.shape, float("nan"), device=device)  # (B, N) p when revealed
        self.revealed = self.remasked = torch.zeros_like(self.is_given)  # (B, N) by the last step
        self.step, self.num_forward_passes = 0, 0
        self.total_steps = sum(steps for _, blocks in plan for _, steps in blocks)
        self.window = plan[0][0]
        self.needs_prior = options.prior_weight > 0 and reveal_order(options.order).by_belief
        # an adaptive rule with exact counts reveals at least one per pass; binomial counts may still draw none
        self.adaptive = options.reveal_counts == "exact" and (
            options.threshold is not None or options.entropy_bound is not None
        )
        planned = reveal_order(options.order).plan is not None
        self.capitals, self.line_break = capital_letters(model, device), newline_id(model)
        self.separator_ids = word_separators(model, device) if planned else None
        # keep_lines: (B, N) the masks of blanks within a line, where no line break is drawn
        self.inside = within_line_blanks(self.tokens, self.mask_id, self.line_break) if options.keep_lines else None

    def state(self) -> SamplerState:
        """The whole canvas after the last step, as the writer yields it."""
        return SamplerState(
            self.tokens.clone(),
            self.revealed,
            self.remasked,
            self.confidence.clone(),
            self.is_given,
            self.step,
            self.total_steps,
            self.num_forward_passes,
            self.mask_id,
            (self.window.start, self.window.end),
        ).with_fallbacks(self.keeper)

    def enter(self, window: Window) -> None:
        """Starts a window: the text before it (given, or written by earlier windows) is its fixed context; the prior
        is read now unless a row starts all masked (then the first step's prediction is the prior)."""
        self.window, self.logits, self.logits_canvas = window, None, None
        self.span = slice(window.start, window.end)  # the positions of the canvas the model reads
        tokens = self.tokens[:, self.span]  # (B, T)
        self.fixed = tokens != self.mask_id  # (B, T) never remasked in this window
        if self.keeper is not None:  # the caller's text only is given: earlier windows' text was kept to the rules
            self.keeper.enter(self.tokens, self.is_given, window.start)
        self.log_prior, self.fully_masked = None, (tokens == self.mask_id).all(dim=1)  # (B,)
        if self.needs_prior and not self.fully_masked.any():
            self.log_prior = character_log_prior(self.model, tokens.size(1), tokens.device)

    def start_block(self, block: slice, block_steps: int) -> None:
        """Starts a block of the window: its masks, and a planned order's plan over them."""
        self.in_block = torch.zeros_like(self.fixed)  # (B, T)
        self.in_block[:, block] = True
        self.block_steps = block_steps
        is_masked = self.tokens[:, self.span] == self.mask_id
        self.block_masks = (is_masked & self.in_block).sum(dim=1)  # (B,) masks in this block at its start
        self.stream_plan, self.separators, plan = None, None, reveal_order(self.options.order).plan
        if plan is not None:  # a planned order's plan over the block, made at its start
            eligible = is_masked & self.in_block
            self.stream_plan, self.separators = plan(eligible, ~is_masked, block_steps, self.separator_ids)

    def predict(self) -> torch.Tensor:
        """[predict] The logits (B, T, V) of the window's canvas: a new pass unless it is unchanged since the last
        (a model that is not told t gives the same logits for the same canvas)."""
        tokens = self.tokens[:, self.span]
        if self.logits is None or not torch.equal(tokens, self.logits_canvas):
            self.logits = predictor(self.model)(tokens.contiguous())  # no t: the masks tell the noise level
            self.logits_canvas = tokens.clone()
            self.num_forward_passes += 1
        if self.needs_prior and self.log_prior is None:
            # free generation: the first step's prediction on an all-mask row is the prior
            self.log_prior = log_mean_probability(self.logits[self.fully_masked.nonzero()[0, 0]])
        return self.logits

    def next_pass(self, local_step: int) -> DenoisingPass | None:
        """This step's pass (the model's prediction, the schedule's count), or None when the block has no mask left."""
        tokens = self.tokens[:, self.span]
        eligible = (tokens == self.mask_id) & self.in_block  # (B, T)
        if not eligible.any():
            return None
        inside = None if self.inside is None else self.inside[:, self.span]  # keep_lines: the window's
        logits, remaining = without_line_breaks(self.predict(), inside, self.line_break), eligible.sum(1)
        self.scheduled = num_to_reveal(
            self.block_masks, remaining, self.block_steps, local_step, eligible, self.options, self.generator
        )
        # an adaptive rule's extras may run ahead of the schedule: then each pass still reveals one
        count = self.scheduled.clamp(min=1).minimum(remaining) if self.adaptive else self.scheduled
        streams_due = None if self.stream_plan is None else (self.stream_plan > 0) & (self.stream_plan <= local_step)
        return DenoisingPass(
            logits,
            tokens,
            eligible,
            count,
            self.options,
            self.generator,
            log_prior=self.log_prior,
            streams_due=streams_due,
            separators=self.separators,
            separator_ids=self.separator_ids,
            capitals=self.capitals,
            keeper=self.keeper,
        )

    def take(self, tokens: torch.Tensor, revealed: torch.Tensor, confidence: torch.Tensor, local_step: int) -> None:
        """Writes a step's result (each (B, T), the window's) into the canvas, then remasks if the options say."""
        self.tokens[:, self.span] = tokens
        self.confidence[:, self.span][revealed] = confidence[revealed].to(self.confidence.dtype)  # a stand-in's logits
        remasked = torch.zeros_like(revealed)
        if self.options.remask_ratio > 0 and local_step < self.block_steps:  # the last step leaves no mask
            remasked = self.remask(revealed)
        whole = (self.window.start, self.tokens.size(1) - self.window.end)  # the window's (B, T) as the canvas's
        self.revealed, self.remasked = F.pad(revealed, whole), F.pad(remasked, whole)
        self.step += 1

    def remask(self, revealed: torch.Tensor) -> torch.Tensor:
        """Masks again the block's least confident earlier draws (`remask_picks`); returns them (B, T)."""
        tokens, confidence = self.tokens[:, self.span], self.confidence[:, self.span]
        may_remask = self.in_block & ~self.fixed & (tokens != self.mask_id) & ~revealed
        still_masked = ((tokens == self.mask_id) & self.in_block).any(dim=1)
        remasked = remask_picks(confidence, may_remask, revealed, self.scheduled, still_masked, self.options)
        tokens.masked_fill_(remasked, self.mask_id)
        confidence.masked_fill_(remasked, float("nan"))
        return remasked
