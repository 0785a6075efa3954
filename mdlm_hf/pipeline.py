"""The text API: strings in, strings out, over `sample`, which hands a canvas to the writer of the model's kind.

Every function takes a model first (a torch module with `tokenizer`, `block_size` and `mask_id`, such as `MDLM`),
then `options` (default: the sampling study's recommendation, `SamplerOptions()`) and single options by
name, plus `seed` or `generator`: `complete(model, "ROMEO:\\n", 200, num_steps=32, seed=0)`.
"""

from __future__ import annotations

import functools
import itertools
import os
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

import torch
import torch.nn as nn

from mdlm_hf.checks import check_seed, described
from mdlm_hf.inference import check_model, shipped_file
from mdlm_hf.metrics import heading_name
from mdlm_hf.objectives import objective_of
from mdlm_hf.sampling.casts import Casts, names_a_speaker, run_casts
from mdlm_hf.sampling.lexicon import Lexicon, run_lexicon
from mdlm_hf.sampling.options import SamplerOptions
from mdlm_hf.sampling.state import SamplerState
from mdlm_hf.streaming import check_streamer, streamed
from mdlm_hf.windows import MAX_CANVAS, check_canvas_length

# where a text may end: "length" (exactly the characters asked for), or within that budget at the end of the last
# "line" or "speech" (a line followed by a blank line) written; never mid-word
END_AT = ("length", "line", "speech")


def sample(
    model: nn.Module,
    canvas: torch.Tensor,
    options: SamplerOptions | None = None,
    *,
    generator: torch.Generator | None = None,
    seed: int | None = None,
    lexicon: Lexicon | Iterable[str] | str | os.PathLike | None = None,
    casts: Casts | dict | str | os.PathLike | None = None,
    **overrides: Any,
) -> Iterator[SamplerState]:
    """Fills the [MASK] positions of `canvas` (T,) or (B, T); returns a generator of every state.

    `options` defaults to `default_options(model)`; `overrides` change single options by name. `seed` or `generator`
    is the run's one source of randomness; `lexicon` and `casts` replace the model's own word list (real_words) and
    casts (keep_cast). docs/sampler.md describes every option.
    """
    check_model(model, "sample", "canvas")
    if options is not None and not isinstance(options, SamplerOptions):
        raise TypeError(f"options must be a SamplerOptions, got {described(options)}; change single options by name")
    options = (default_options(model) if options is None else options).replace(**overrides)
    canvas = checked_canvas(model, canvas)
    generator = run_generator(generator, seed)
    words, cast_list = run_lexicon(model, options, lexicon), run_casts(model, options, casts)
    return objective_of(model).writer(model, canvas.clone(), options, generator, words, cast_list)


def default_options(model: nn.Module) -> SamplerOptions:
    """The options a run of `model` starts from: its objective's defaults, with `real_words` on where its folder has
    a words.txt and `keep_cast` where it has a casts.json that names a speaker."""
    has_words = shipped_file(model, "word_list_file") is not None
    has_casts = names_a_speaker(shipped_file(model, "casts_file"))
    return objective_of(model).default_options().replace(real_words=has_words, keep_cast=has_casts)


def checked_canvas(model: nn.Module, canvas: object) -> torch.Tensor:
    """`canvas` as (B, T) ids, or a ValueError saying why the model cannot fill it."""
    if not isinstance(canvas, torch.Tensor):
        raise ValueError(f"canvas must be a torch.Tensor of token ids, got {type(canvas).__name__}")
    if canvas.dim() == 1:
        canvas = canvas[None, :]
    if canvas.dim() != 2 or canvas.numel() == 0 or canvas.dtype != torch.long:
        raise ValueError("canvas must be a non-empty (T,) or (B, T) tensor of token ids (torch.long)")
    check_canvas_length(canvas.size(1))
    if canvas.device.type == "meta":  # the sampler copies any other device's canvas to the model's
        device = next(model.parameters()).device
        raise ValueError(f"canvas is on meta, which holds no data: pass it on the cpu or the model's device ({device})")
    if int(canvas.min()) < 0 or int(canvas.max()) > model.mask_id:
        raise ValueError(f"canvas ids must lie in [0, {model.mask_id}] (mask_id = {model.mask_id})")
    if not (canvas == model.mask_id).any():
        raise ValueError("canvas has no masked position: nothing to fill")
    return canvas


def run_generator(generator: object, seed: int | None) -> torch.Generator:
    """The run's one source of randomness: `generator`, else a new one seeded with `seed` (else at random)."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {described(generator)}")
    if generator is not None and seed is not None:
        raise ValueError("give seed or generator, not both: a generator already carries its own seed")
    if generator is not None and generator.device.type != "cpu":
        raise ValueError(
            f"generator must be a CPU torch.Generator (every draw is made on the CPU, then moved to the model's "
            f"device), got one on {generator.device.type}"
        )
    if seed is not None:
        check_seed(seed)
    if generator is None:
        generator = torch.Generator()
        generator.manual_seed(seed) if seed is not None else generator.seed()
    return generator


def check_text(value: object, name: str) -> None:
    """A ValueError naming the argument when a prompt or template is not a string."""
    if value is None:  # an API caller's null, an empty box
        raise ValueError(f"{name} must be a string, got nothing")
    if not isinstance(value, str):
        shown, kind = described(value), type(value).__name__
        raise ValueError(f"{name} must be a string, got {kind if shown == kind else f'{kind} {shown}'}")


def text_to_canvas(model: nn.Module, text: str, blank: str = "_") -> torch.Tensor:
    """Encodes `text`, turning each `blank` character into [MASK]; (T,) ids."""
    check_text(text, "template")
    if not isinstance(blank, str) or len(blank) != 1:
        raise ValueError(f"blank must be a single character, got {described(blank)}")
    if not text:
        raise ValueError("template is empty")
    check_canvas_length(len(text), "template")
    if blank not in text:
        raise ValueError(f"template has no blank: mark each character to fill with {blank!r}")
    tokenizer = model.tokenizer
    tokenizer.encode(text.replace(blank, ""))  # raises, naming every unknown character
    ids = [tokenizer.mask_id if c == blank else tokenizer.char_to_id[c] for c in text]
    return torch.tensor(ids, dtype=torch.long)


def prompt_canvas(model: nn.Module, prompt: str, length: int) -> torch.Tensor:
    """The prompt's ids followed by `length` masks; (T,) ids."""
    check_text(prompt, "prompt")
    check_canvas_length(len(prompt), "prompt")
    room = MAX_CANVAS - len(prompt)
    if not isinstance(length, int) or isinstance(length, bool) or not 1 <= length <= room:
        after = f" after a prompt of {len(prompt)}" if prompt else ""
        raise ValueError(f"length must be an integer from 1 to {room:,}{after}, got {described(length)}")
    return torch.tensor(model.tokenizer.encode(prompt) + [model.tokenizer.mask_id] * length, dtype=torch.long)


def stream(
    model: nn.Module, template: str, blank: str = "_", options: SamplerOptions | None = None, **overrides: Any
) -> Iterator[SamplerState]:
    """Every intermediate state while filling the `blank` characters of `template`."""
    return sample(model, text_to_canvas(model, template, blank), options, **overrides)


def infill(
    model: nn.Module,
    template: str,
    blank: str = "_",
    options: SamplerOptions | None = None,
    *,
    streamer: Any = None,
    **overrides: Any,
) -> str:
    """The template with every `blank` character filled in; other characters stay exactly as given (`streamer`:
    handed each draft and the text, as transformers' streamers are, mdlm_hf.streaming)."""
    check_model(model, "infill", "template")
    check_streamer(streamer)
    return streamed(model.tokenizer, stream(model, template, blank, options, **overrides), streamer, 0)


def check_end_at(end_at: object) -> None:
    """A ValueError naming the choices when `end_at` is not one of END_AT."""
    if end_at not in END_AT:
        raise ValueError(f"end_at must be one of {END_AT}, got {described(end_at)}")


def ended(text: str, start: int, end_at: str) -> str:
    """`text` cut where `end_at` says within what was written after its first `start` characters (always kept):
    at the last speech end, else line end, else word end, never after a heading (a speech's name without its
    speech); written text without a space or break stays whole."""
    check_end_at(end_at)
    if end_at == "length":
        return text
    written = text[start:]
    breaks = ("\n\n", "\n") if end_at == "speech" else ("\n",)
    for mark in (*breaks, " "):
        cut = len(written)
        while (cut := written.rfind(mark, 0, cut)) > 0:
            kept = written[:cut].rstrip()
            if kept and not ends_on_heading(text[:start] + kept):
                return text[:start] + kept
    return text[:start] if written[:1].isspace() else text  # one word fragment after a break: the prompt alone


def ends_on_heading(text: str) -> bool:
    """Whether the last line of `text` is a speaker's heading (`NAME:` after a blank line, or all capitals)."""
    lines = text.split("\n")
    return heading_name(lines[-1], lines[-2] if len(lines) > 1 else None) is not None


def unseen_prompt_note(first: SamplerState, prompt_length: int) -> str | None:
    """The words that say, from a run's first state, how much of a prompt no window reads; None if it all fits."""
    unseen = min(first.window[0], prompt_length)
    if unseen == 0:
        return None
    window = first.window[1] - first.window[0]
    return (
        f"the prompt has {prompt_length:,} characters and the model reads {window} at a time: its last "
        f"{prompt_length - unseen:,} are the context of what is written; the whole prompt is kept in the text"
    )


def complete(
    model: nn.Module,
    prompt: str,
    length: int,
    options: SamplerOptions | None = None,
    *,
    end_at: str = "length",
    streamer: Any = None,
    **overrides: Any,
) -> str:
    """The prompt followed by `length` generated characters (with `end_at`, at most `length`, ending at a line or
    speech end); a prompt longer than the context is kept whole, a warning says how much of it was read.
    `streamer`: handed the prompt, each draft and the text, as transformers' streamers are (mdlm_hf.streaming)."""
    check_model(model, "complete", "prompt, length")
    check_end_at(end_at)
    check_streamer(streamer)
    states = sample(model, prompt_canvas(model, prompt, length), options, **overrides)
    first = next(states)
    note = unseen_prompt_note(first, len(prompt))
    if note is not None:
        warnings.warn(note, UserWarning, stacklevel=2)
    finish = functools.partial(ended, start=len(prompt), end_at=end_at)
    return streamed(model.tokenizer, itertools.chain([first], states), streamer, len(prompt), finish)


def generate(
    model: nn.Module,
    length: int | None = None,
    options: SamplerOptions | None = None,
    *,
    end_at: str = "length",
    streamer: Any = None,
    **overrides: Any,
) -> str:
    """`length` characters (default: the model's block_size) from an all-mask canvas (`end_at`, `streamer`: as
    `complete`)."""
    length = model.block_size if length is None else length
    return complete(model, "", length, options, end_at=end_at, streamer=streamer, **overrides)
