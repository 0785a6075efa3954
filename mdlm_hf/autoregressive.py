"""The autoregressive twin: the same network with a causal mask (`MDLM(objective="ar")`), trained on the next character,
scored exactly in one pass, and writing left to right with a key-value cache.

Its input is the text shifted right by one behind a start token, [MASK]: a causal model reads no other mask, and
"nothing known yet" is what [MASK] means to the diffusion model too. So a window of block_size characters is scored
from its first character on, as the diffusion model's exact left-to-right NLL scores it (mdlm_hf.diffusion), and the
two figures compare character for character.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields

import torch
import torch.nn as nn
import torch.nn.functional as F

from mdlm_hf.checks import described
from mdlm_hf.inference import evaluating, predictor
from mdlm_hf.network import KVCache
from mdlm_hf.sampling.casts import Casts
from mdlm_hf.sampling.drawing import capital_letters, draw_tokens
from mdlm_hf.sampling.keeper import Keeper
from mdlm_hf.sampling.lexicon import Lexicon
from mdlm_hf.sampling.options import SamplerOptions
from mdlm_hf.sampling.state import SamplerState
from mdlm_hf.windows import batches_by_length, score_windows

WRITES_LEFT_TO_RIGHT = "an autoregressive model writes left to right only"
# the options a left-to-right run takes: how each character is drawn, as the diffusion model draws it; the others
# (num_steps and window_context too: one character a pass, the context slides by itself) are refused unless left as
# left_to_right_defaults() has them
DRAWS = (
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "cut_where_sure",
    "capital_temperature_factor",
    "real_words",
    "keep_cast",
)
# after its context fills, the writer reads again the last three quarters of it, so that a re-read (one pass over
# 192 characters) comes every 64 characters and every character is drawn knowing at least 192 before it
KEPT_CONTEXT = 3 / 4


def left_to_right_defaults() -> SamplerOptions:
    """An autoregressive twin's defaults: left to right, one character a pass, each drawn from the model's own
    distribution (temperature 1, no cut), as its likelihood is measured."""
    return SamplerOptions.plain(order="left_to_right")


def shifted(tokens: torch.Tensor, start_id: int) -> torch.Tensor:
    """The input (B, T) that predicts `tokens` (B, T): the start token, then every character but the last."""
    start = torch.full_like(tokens[:, :1], start_id)
    return torch.cat((start, tokens[:, :-1]), dim=1)


def autoregressive_loss(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Training loss for a batch of clean `tokens` (B, T): next-character cross-entropy, nats per character (the
    exact NLL of the batch, where the diffusion loss is a bound)."""
    mask_id = getattr(model, "module", model).mask_id  # DistributedDataParallel wraps the model in .module
    logits = model(shifted(tokens, mask_id))  # (B, T, V)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), tokens.reshape(-1))


@torch.no_grad()
def char_nats(model: nn.Module, tokens: torch.Tensor, context: int = 0, batch_size: int = 64) -> torch.Tensor:
    """-log p, in nats, of each character of a 1-D `tokens` given those before it (n,), on the CPU: windows of
    block_size, past the first each keeping at least `context` characters before those it scores (0: windows side by
    side, as the diffusion model's `exact_nll` cuts them). Trusts its arguments: mdlm_hf.likelihood checks them."""
    device = next(model.parameters()).device
    tokens = tokens.long().to(device)
    n, L = tokens.numel(), model.block_size
    nats = torch.empty(n, device=device)
    windows = [(i, i, min(i + L, n)) for i in range(0, n, L)] if context == 0 else score_windows(n, L, context)
    with evaluating(model):
        for group in batches_by_length(windows, lambda window: window[2] - window[0], batch_size):
            text = torch.stack([tokens[start:end] for start, _, end in group])  # (b, n)
            log_probs = model(shifted(text, model.mask_id)).float().log_softmax(dim=-1)  # (b, n, V)
            window_nats = -log_probs.gather(-1, text[..., None])[..., 0]  # (b, n)
            for row, (start, first, end) in enumerate(group):
                nats[first:end] = window_nats[row, first - start : end - start]
    return nats.cpu()


def autoregressive_nll(model: nn.Module, tokens: torch.Tensor, batch_size: int = 64) -> float:
    """Exact negative log-likelihood in nats per char of a 1-D `tokens`, in windows side by side (`char_nats`' mean)."""
    return char_nats(model, tokens, 0, batch_size).double().mean().item()


def check_options(options: SamplerOptions) -> None:
    """A ValueError naming the first option that asks an autoregressive model for more than a left-to-right draw."""
    if options.order != "left_to_right":
        raise ValueError(f"{WRITES_LEFT_TO_RIGHT}: order must be 'left_to_right', got {described(options.order)}")
    plain = left_to_right_defaults()
    for f in fields(options):
        if f.name not in DRAWS and getattr(options, f.name) != getattr(plain, f.name):
            raise ValueError(
                f"{WRITES_LEFT_TO_RIGHT}, one character a pass: {f.name} does not apply to it "
                f"(leave it at {getattr(plain, f.name)!r})"
            )


def write_left_to_right(
    model: nn.Module,
    canvas: torch.Tensor,
    options: SamplerOptions,
    generator: torch.Generator,
    lexicon: Lexicon | None = None,
    casts: Casts | None = None,
) -> Iterator[SamplerState]:
    """The sampler core for a causal model: fills the masks of `canvas` (B, T), which must all follow its given text,
    one character a pass with a key-value cache, its words kept to `lexicon` (real_words) and its headings to one
    play of `casts` (keep_cast) when given; yields the states as `mdlm_hf.sample` does."""
    check_options(options)
    is_masked = canvas == model.mask_id
    columns = torch.arange(canvas.size(1), device=canvas.device)
    begin = int(is_masked.any(dim=0).int().argmax())  # the first column with a mask
    if not torch.equal(is_masked, (columns >= begin).expand_as(is_masked)):
        firsts = torch.where(is_masked.any(dim=1), is_masked.int().argmax(dim=1), canvas.size(1))  # (B,)
        each_a_prompt = torch.equal(is_masked, columns[None, :] >= firsts[:, None])  # masks only after a prompt
        problem = (
            "so every row's prompt must end at the same column"
            if each_a_prompt
            else "and cannot fill blanks that have text after them (the diffusion model infills)"
        )
        raise ValueError(f"{WRITES_LEFT_TO_RIGHT}: it continues a prompt, {problem}")
    keeper = Keeper.for_run(model, canvas.size(0), lexicon, casts)
    return _write(model, canvas, begin, options, generator, keeper)


@torch.no_grad()
def _write(
    model: nn.Module,
    canvas: torch.Tensor,
    begin: int,
    options: SamplerOptions,
    generator: torch.Generator,
    keeper: Keeper | None = None,
) -> Iterator[SamplerState]:
    """`write_left_to_right`'s states, the masks being columns begin..T-1."""
    device = next(model.parameters()).device
    tokens = canvas.to(device)
    B, N = tokens.shape
    L, mask_id = model.block_size, model.mask_id
    is_given = tokens != mask_id
    confidence = torch.full((B, N), float("nan"), device=device)
    nothing = torch.zeros_like(is_given)
    num_steps, cache, window_start = N - begin, None, max(0, begin - (L - 1))
    if keeper is not None:
        keeper.enter(tokens, is_given)
    yield SamplerState(
        tokens.clone(), nothing, nothing, confidence.clone(), is_given, 0, num_steps, 0, mask_id, (window_start, begin)
    ).with_fallbacks(keeper)
    capitals = capital_letters(model, device)
    with evaluating(model):
        for i in range(begin, N):
            if cache is None or cache.length == L:  # read the context afresh: the start token, then the last characters
                window_start = max(0, i - (L - 1)) if cache is None else i - int(L * KEPT_CONTEXT)
                cache = KVCache(model.n_layer)
                reading = shifted(tokens[:, window_start : i + 1], mask_id)  # (B, i - window_start + 1)
            else:
                reading = tokens[:, i - 1 : i]  # (B, 1) the character written last
            logits = predictor(model)(reading, cache)[:, -1:].float()  # (B, 1, V)
            cooler = None if capitals is None or i == 0 else capitals[tokens[:, i - 1 : i]]  # (B, 1)
            drawn = draw_tokens(logits, options, generator, cooler)  # (B, 1)
            if keeper is not None:
                at, proposed = torch.zeros_like(is_given), tokens.clone()
                at[:, i], proposed[:, i] = True, drawn[:, 0]
                drawn = keeper.keep(logits, tokens, at, proposed, options, generator)[:, i : i + 1]
            probability = logits.softmax(dim=-1).gather(-1, drawn[..., None])[:, 0, 0]  # (B,)
            tokens[:, i], confidence[:, i] = drawn[:, 0], probability
            revealed = nothing.clone()
            revealed[:, i] = True
            step = i - begin + 1
            yield SamplerState(
                tokens.clone(),
                revealed,
                nothing,
                confidence.clone(),
                is_given,
                step,
                num_steps,
                step,
                mask_id,
                (window_start, i + 1),
            ).with_fallbacks(keeper)
