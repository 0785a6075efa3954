"""How each character is drawn from the model's logits: temperature (cooler after a capital), top-k, top-p, min-p.
They extend the reference sampler's [draw] line (reference.py), a draw from the whole distribution. The autoregressive
twin's writer draws every character here too.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from mdlm_hf.sampling.options import SamplerOptions
from mdlm_hf.sampling.orders import position_after_run, position_before_run

# temperature and order_temperature below this act as 0 (greedy, strict order): dividing scores by a tinier one
# overflows float64 and turns the draw into garbage
GREEDY_BELOW = 1e-3
# a temperature above this draws as this one: logits divided by it vanish beside the Gumbel noise, so the draw is
# already uniform among the possible characters, and a larger one overflows the float32 of the per-position temperatures
UNIFORM_ABOVE = 1e30


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


def after_capital(tokens: torch.Tensor, capitals: torch.Tensor | None) -> torch.Tensor | None:
    """(B, T) bool: the positions of `tokens` (B, T) whose left neighbour is a capital letter (`capital_letters`)."""
    if capitals is None:
        return None
    is_capital = capitals[tokens]  # (B, T); [MASK] is not one
    return torch.cat([torch.zeros_like(is_capital[:, :1]), is_capital[:, :-1]], dim=1)


def newline_id(model: nn.Module) -> int | None:
    """The id of `model`'s line break, or None (a model with no tokenizer, a stub, or none in its vocabulary)."""
    tokenizer = getattr(model, "tokenizer", None)
    return None if tokenizer is None else tokenizer.char_to_id.get("\n")


def within_line_blanks(tokens: torch.Tensor, mask_id: int, line_break: int | None) -> torch.Tensor | None:
    """(B, T) bool: the masks of `tokens` (B, T) in a blank within a line, with a given character other than a line
    break right before and right after it (keep_lines: no line break goes there); None where there is none. A blank
    at the text's edge or beside a line break may take line breaks."""
    if line_break is None:
        return None
    masked, T = tokens == mask_id, tokens.size(1)
    before, after = position_before_run(masked), position_after_run(masked)  # the given positions around each blank
    left, right = tokens.gather(1, before.clamp(min=0)), tokens.gather(1, after.clamp(max=T - 1))
    inside = masked & (before >= 0) & (after < T) & (left != line_break) & (right != line_break)
    return inside if inside.any() else None


def without_line_breaks(logits: torch.Tensor, inside: torch.Tensor | None, line_break: int | None) -> torch.Tensor:
    """`logits` (B, T, V) with the line break ruled out where `inside` (B, T) marks, for a rule's redraw too."""
    if inside is None or line_break is None:
        return logits
    logits = logits.clone()
    logits[..., line_break].masked_fill_(inside, float("-inf"))
    return logits


def draw_tokens(
    logits: torch.Tensor,
    options: SamplerOptions,
    generator: torch.Generator,
    cooler: torch.Tensor | None = None,
) -> torch.Tensor:
    """Draws one character per position (B, T) from temperature / top-k / top-p / min-p filtered logits; those that
    `cooler` (B, T) marks (after a capital, `after_capital`) at the temperature times capital_temperature_factor."""
    if options.temperature < GREEDY_BELOW:  # 0, or so close that the division would overflow
        return logits.argmax(dim=-1)
    temperature: float | torch.Tensor = min(options.temperature, UNIFORM_ABOVE)
    if cooler is not None and options.capital_temperature_factor < 1:  # (B, T, 1): each position its own
        cooled = temperature * options.capital_temperature_factor
        temperature = torch.where(cooler, cooled, temperature).to(torch.float64)[..., None]
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


def separator_tokens(
    logits: torch.Tensor, separator_ids: torch.Tensor, options: SamplerOptions, generator: torch.Generator
) -> torch.Tensor:
    """(B, T): a space or a line break per position, at the model's own odds between them (greedy where the options
    are)."""
    among = logits.index_select(-1, separator_ids).double()  # (B, T, S)
    if options.temperature >= GREEDY_BELOW:
        among = among + gumbel_noise(among, generator)
    return separator_ids[among.argmax(dim=-1)]
