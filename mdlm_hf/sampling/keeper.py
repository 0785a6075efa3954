"""The rules a run keeps its text to as it is written: its words to a word list (`real_words`, lexicon.py) and its
layout to a play's (`keep_cast`, layout.py). They extend the reference sampler's [draw] and [reveal] lines
(reference.py): a revealed character that breaks a rule is drawn again among those that keep it.

Each step's revealed characters are checked left to right, each seeing those placed before it. At a dead end (no
character keeps the rules) the model's draw stands and is counted (`SamplerState.word_fallbacks`); the lines it broke
bind no later character (the words still do), and each character written beside them is counted too.
"""

from __future__ import annotations

import math

import torch

from mdlm_hf.sampling.casts import Casts
from mdlm_hf.sampling.drawing import draw_tokens
from mdlm_hf.sampling.layout import LineRules, is_heading
from mdlm_hf.sampling.lexicon import Lexicon, WordRule
from mdlm_hf.sampling.options import SamplerOptions

MARGIN = 256  # characters each side of a step's positions that the rules read (a word's and a line's neighbours)
SEPARATORS = (" ", "\n")  # what a word streams order's planned separator may be


class Keeper:
    """A run's rules, `lexicon` (real_words) and `casts` (keep_cast), None where off, with each row's dead ends and
    plays (a bit set of `casts`' plays)."""

    def __init__(self, vocab: str, batch_size: int, lexicon: Lexicon | None, casts: Casts | None) -> None:
        self.vocab, self.lexicon, self.casts = vocab, lexicon, casts
        self.fallbacks = [0] * batch_size  # dead ends per row, over the whole run
        self.plays: list[int] | None = None  # per row: the plays its headings may come from
        self.canvas: torch.Tensor | None = None
        self.given: torch.Tensor | None = None
        self.offset = 0

    @classmethod
    def for_run(
        cls, model: torch.nn.Module, batch_size: int, lexicon: Lexicon | None, casts: Casts | None
    ) -> Keeper | None:
        """A run's keeper for `model`'s characters, or None with neither rule on."""
        if lexicon is None and casts is None:
            return None
        return cls(model.tokenizer.vocab, batch_size, lexicon, casts)

    def enter(self, canvas: torch.Tensor, given: torch.Tensor, offset: int = 0) -> None:
        """Starts a run or a window at `offset` of `canvas` (B, N), which the writer updates in place; `given` (B, N)
        marks the caller's text, which alone may break a rule. At the run's start each row's plays are chosen."""
        self.canvas, self.given, self.offset = canvas, given, offset
        if self.casts is not None and self.plays is None:
            self.plays = [self.casts.chosen(self.given_speakers(row)) for row in range(canvas.size(0))]

    def given_speakers(self, row: int) -> list[str]:
        """The speakers a row's given text names: its headings, and a line's given start that is one before masks
        ("ROMEO:" and no line break), which no speech line may start with."""
        ids, given = self.canvas[row].tolist(), self.given[row].tolist()
        text = "".join(self.vocab[i] if g and i < len(self.vocab) else "\0" for i, g in zip(ids, given, strict=True))
        starts = (line.split("\0")[0] for line in text.split("\n"))  # each line's given characters before a mask
        return [start[:-1] for start in starts if is_heading(start)]

    def report(self) -> dict:
        """SamplerState's fields of the rules: the options kept, each row's dead ends (B,) and plays so far."""
        rules = tuple(name for name, rule in (("real_words", self.lexicon), ("keep_cast", self.casts)) if rule)
        plays = None if self.plays is None else [self.casts.names_of(plays) for plays in self.plays]
        return dict(word_fallbacks=torch.tensor(self.fallbacks), kept_rules=rules, plays=plays)

    def keep(
        self,
        logits: torch.Tensor,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        drawn: torch.Tensor,
        options: SamplerOptions,
        generator: torch.Generator,
        separators: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """`drawn` (B, T) with each of `positions` (B, T) kept or drawn again from its `logits` (B, T, V), or (B, 1, V)
        from a one-position writer, left to right; `tokens` (B, T): the window (from `enter`'s offset) before them;
        at `separators` (B, T), word streams' planned word starts, only a space or a line break may go."""
        kept, offset = drawn.clone(), self.offset
        for row, at in enumerate(positions.tolist()):
            spots = [k for k, here in enumerate(at) if here]
            if not spots:
                continue
            lo, hi = max(0, offset + spots[0] - MARGIN), min(self.canvas.size(1), offset + spots[-1] + 1 + MARGIN)
            ids = self.canvas[row, lo:hi].tolist()
            w0, w1 = max(lo, offset), min(hi, offset + tokens.size(1))  # where `tokens` overlaps the view
            ids[w0 - lo : w1 - lo] = tokens[row, w0 - offset : w1 - offset].tolist()
            chars = [self.vocab[i] if i < len(self.vocab) else None for i in ids]
            view = _RowView(self, chars, self.given[row, lo:hi].tolist(), (lo > 0, hi < self.canvas.size(1)), row)
            restrict = separators[row].tolist() if separators is not None else None
            for k in spots:
                only = SEPARATORS if restrict is not None and restrict[k] else None
                here = logits[row, k if logits.size(1) > 1 else 0]  # a one-position writer's logits are (B, 1, V)
                kept[row, k] = view.place(offset + k - lo, int(kept[row, k]), here, options, generator, only)
            if self.plays is not None:
                self.plays[row] = view.plays
        return kept


class _RowView:
    """One row's characters around a step's positions, with the rules over them."""

    def __init__(
        self, keeper: Keeper, chars: list[str | None], given: list[bool], edges: tuple[bool, bool], row: int
    ) -> None:
        self.keeper, self.chars, self.given, self.edges, self.row = keeper, chars, given, edges, row
        self.lines = None if keeper.casts is None else LineRules(keeper.casts, chars, given, edges)
        self.plays = 0 if keeper.plays is None else self.lines.heading_plays(keeper.plays[row])

    def allows(self, p: int, c: str, words: WordRule | None) -> bool:
        """Whether `c` at position p keeps every rule (`words`: p's word rule, None without real_words)."""
        if words is not None and not words.allows(c):
            return False
        if self.lines is None:
            return True
        self.chars[p] = c
        try:
            return self.lines.allows(p, self.plays)
        finally:
            self.chars[p] = None

    def place(
        self,
        p: int,
        proposal: int,
        logits: torch.Tensor,
        options: SamplerOptions,
        generator: torch.Generator,
        only: tuple[str, ...] | None,
    ) -> int:
        """The id at p: `proposal` where it keeps the rules, else a draw among those that do, else (counted) it."""
        vocab = self.keeper.vocab
        self.chars[p] = None
        lexicon = self.keeper.lexicon
        words = None if lexicon is None else WordRule(lexicon, self.chars, self.given, p, self.edges)
        if not (proposal < len(vocab) and self.allows(p, vocab[proposal], words)):
            # lines an earlier dead end broke bind nothing here, the words still do; the character is counted
            lines_broken = self.lines is not None and self.lines.broken_at(p, self.plays)
            fits = [(only is None or c in only) and (words is None or words.allows(c)) for c in vocab]
            if lines_broken:
                self.keeper.fallbacks[self.row] += 1
            if not (lines_broken and proposal < len(vocab) and fits[proposal]):  # else the model's draw stands
                flags = [fit and (lines_broken or self.allows(p, c, None)) for fit, c in zip(fits, vocab, strict=True)]
                after_capital = p > 0 and (self.chars[p - 1] or "").isupper()
                drawn = draw(logits, flags, after_capital, options, generator)
                if drawn is None:
                    self.keeper.fallbacks[self.row] += not lines_broken
                else:
                    proposal = drawn
        self.chars[p] = vocab[proposal] if proposal < len(vocab) else None
        if self.lines is not None:
            self.plays = self.lines.narrowed(self.plays, p)
        return proposal


def draw(
    logits: torch.Tensor, flags: list[bool], after_capital: bool, options: SamplerOptions, generator: torch.Generator
) -> int | None:
    """One character from `logits` (V,) among those `flags` allows; None where the model gives none a chance."""
    keep = torch.tensor(flags + [False] * (logits.size(-1) - len(flags)), device=logits.device)
    masked = logits.float().masked_fill(~keep, -math.inf)
    if not torch.isfinite(masked).any():
        return None
    cooler = torch.tensor([[after_capital]], device=logits.device)
    return int(draw_tokens(masked.view(1, 1, -1), options, generator, cooler)[0, 0])
