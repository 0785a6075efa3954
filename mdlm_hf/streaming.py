"""Streamers: a run's drafts and its text handed to any object with `put`, `end` and, optionally, `put_draft`, as
transformers' `generate(..., streamer=...)` hands them, so its streamers (`TextStreamer`, `TextDiffusionStreamer`)
work as they are. The calls, in order: `put(prompt ids)`, `put_draft(ids)` for every canvas on the way (the part
after the prompt, [MASK] where still masked), `put(ids)` of the finished text after the prompt, then `end()`; ids
are 1-D tensors.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

import torch

from mdlm_hf.checks import described
from mdlm_hf.sampling.state import SamplerState
from mdlm_hf.tokenizer import CharTokenizer


def check_streamer(streamer: object) -> None:
    """A ValueError unless `streamer` is None or has callable `put` and `end` (and `put_draft`, where it has one)."""
    if streamer is None:
        return
    if not all(callable(getattr(streamer, name, None)) for name in ("put", "end")):
        raise ValueError(
            f"streamer must have put and end methods (as transformers' streamers do), got {described(streamer)}"
        )
    if hasattr(streamer, "put_draft") and not callable(streamer.put_draft):
        raise ValueError(f"streamer's put_draft must be a method, got {described(streamer.put_draft)}")


def streamed(
    tokenizer: CharTokenizer,
    states: Iterator[SamplerState],
    streamer: Any,
    start: int,
    finish: Callable[[str], str] = lambda text: text,
) -> str:
    """Runs `states` to the end, handing `streamer` (None: no one) the prompt (the canvas's first `start`
    characters), each draft and the finished text (`finish` cuts it); returns the text, prompt included."""
    put_draft = getattr(streamer, "put_draft", None)
    state = None
    for state in states:
        if streamer is not None and state.step == 0:
            streamer.put(state.tokens[0, :start].cpu())
        if put_draft is not None and not state.done:
            put_draft(state.tokens[0, start:].cpu())
    text = finish(tokenizer.decode(state.tokens[0]))
    if streamer is not None:
        streamer.put(torch.tensor(tokenizer.encode(text[start:]), dtype=torch.long))
        streamer.end()
    return text


class TerminalStreamer:
    """Prints each draft in a terminal over the one before, then the text: the command line's live view, drawn as
    transformers' TextDiffusionStreamer draws its drafts (the cursor saved before a draft, restored to clear it)."""

    def __init__(self, tokenizer: CharTokenizer, out: TextIO | None = None) -> None:
        self.tokenizer, self.out, self.has_draft = tokenizer, out or sys.stdout, False

    def clear_draft(self) -> None:
        """Restores the cursor to where the last draft began and clears the screen below it."""
        if self.has_draft:
            self.out.write("\0338\033[J")
            self.has_draft = False

    def put_draft(self, ids: torch.Tensor) -> None:
        """Draws a draft (dimmed) over the last one."""
        self.clear_draft()
        self.out.write("\0337\033[2m" + self.tokenizer.decode(ids) + "\033[0m")
        self.out.flush()
        self.has_draft = True

    def put(self, ids: torch.Tensor) -> None:
        """Prints confirmed text: the prompt, then the finished text after it."""
        self.clear_draft()
        self.out.write(self.tokenizer.decode(ids))
        self.out.flush()

    def end(self) -> None:
        """Ends the text with a line break."""
        self.clear_draft()
        self.out.write("\n")
        self.out.flush()
