"""The named sampler rules that the speed benchmarks and the quality evals share: each a change to the bare core.

`RULES` names them; `rule_options(name)` is a rule's SamplerOptions. The structure suite (evals/structure_suite.py)
stores its rows per rule, so a rule's name means the same options for as long as its rows are kept.
"""

from __future__ import annotations

from mdlm_hf import SamplerOptions

LENGTH = 256  # the characters each rule writes in the structure suite, and the joint's passes

# name -> changes to the bare core, `SamplerOptions.plain()` (each rule names its order; strict, no prior, no
# remasking, no spacing, temperature 1, no filter), so a rule means the same whatever the defaults; "default" is
# `SamplerOptions()`
ENTROPY = dict(order="entropy", spacing=8)
RULES: dict[str, dict | None] = {
    "joint": dict(order="left_to_right", num_steps=LENGTH),  # one character per pass (num_steps: the masks)
    # the autoregressive twin (--twin), sampled as the joint is: its own distribution, left to right
    "twin": dict(order="left_to_right"),
    "default": None,  # SamplerOptions(): word streams order, min-p 0.1, temperature 0.8, 0.24 after a capital
    # the default before the structure suite
    "previous": dict(order="confidence", order_temperature=0.25, prior_weight=0.45, remask_ratio=0.65, spacing=2),
    "entropy-s2": dict(ENTROPY, spacing=2),
    "entropy-s8": dict(ENTROPY),
    "entropy-s8-p90": dict(ENTROPY, top_p=0.9),
    "entropy-s8-p95": dict(ENTROPY, top_p=0.95),
    "entropy-s8-p97": dict(ENTROPY, top_p=0.97),
    "entropy-s10-p95": dict(ENTROPY, spacing=10, top_p=0.95),
    "entropy-s12-p95": dict(ENTROPY, spacing=12, top_p=0.95),
    "entropy-s8-p95-r30": dict(ENTROPY, top_p=0.95, remask_ratio=0.3),
    "entropy-t10-s8-p95": dict(ENTROPY, top_p=0.95, order_temperature=0.1),
    "entropy-s8-p95-cos": dict(ENTROPY, top_p=0.95, schedule="cosine"),
    "entropy-s8-p95-front": dict(ENTROPY, top_p=0.95, schedule="front_loaded"),
    "entropy-s8-m10": dict(ENTROPY, min_p=0.1),
    "entropy-s8-m20": dict(ENTROPY, min_p=0.2),
    "entropy-s8-m10-t110": dict(ENTROPY, min_p=0.1, temperature=1.1),  # the default before streams order
    "entropy-s8-m10-t110-front": dict(ENTROPY, min_p=0.1, temperature=1.1, schedule="front_loaded"),
    # min-p cuts only where the model's top character has at least half the probability
    "entropy-s8-m10-t110-sure50": dict(ENTROPY, min_p=0.1, temperature=1.1, cut_where_sure=0.5),
    # streams order: each pass writes the next character of every stretch, left to right (the default before
    # capitals were drawn cooler: every character at temperature 1.2)
    "streams-m10-t120": dict(order="streams", min_p=0.1, temperature=1.2),
    # a character after a capital drawn at 0.67 of the temperature (0.8), the first value tried; the default before
    # word streams order drew it at half (0.6: streams-m10-t120-caps50 names that rule); today's draws it at 0.3
    "streams-m10-t120-caps67": dict(order="streams", min_p=0.1, temperature=1.2, capital_temperature_factor=0.67),
    "streams-m10-t120-caps50": dict(order="streams", min_p=0.1, temperature=1.2, capital_temperature_factor=0.5),
    # the model's own distribution (no cut, temperature 1) but for a name's letters, at half of it
    "streams-t100-caps50": dict(order="streams", temperature=1.0, capital_temperature_factor=0.5),
    "streams-m05-t100-caps50": dict(order="streams", min_p=0.05, temperature=1.0, capital_temperature_factor=0.5),
    # the same, cutting only where the model is sure (a stretch's first character, drawn blind, keeps its tail)
    "streams-m10-t110-sure50": dict(order="streams", min_p=0.1, temperature=1.1, cut_where_sure=0.5),
    "streams-m10-t120-sure50": dict(order="streams", min_p=0.1, temperature=1.2, cut_where_sure=0.5),
    # an earlier default: streams order (stretches of equal length, their first characters drawn blind)
    "streams-t120-caps50": dict(order="streams", min_p=0.1, temperature=1.2, capital_temperature_factor=0.5),
    # stretches that begin at word starts (word_streams order: a space or a line break before each, drawn first)
    "word-streams-t120": dict(order="word_streams", min_p=0.1, temperature=1.2, capital_temperature_factor=0.5),
    # the default before a capital's factor fell to 0.3 (the model before's default)
    "word-streams-t125": dict(order="word_streams", min_p=0.1, temperature=1.25, capital_temperature_factor=0.5),
    "word-streams-t130": dict(order="word_streams", min_p=0.1, temperature=1.3, capital_temperature_factor=0.5),
    # for the model trained on 25 plays: cooler (invented words follow the temperature), and a name's letters cooler
    # still, since its misspelt names ("MERGARET", "SAMERSET") are letters after a capital
    "word-streams-t110-caps30": dict(order="word_streams", min_p=0.1, temperature=1.1, capital_temperature_factor=0.3),
    "word-streams-t115-caps30": dict(order="word_streams", min_p=0.1, temperature=1.15, capital_temperature_factor=0.3),
    "word-streams-t125-caps30": dict(order="word_streams", min_p=0.1, temperature=1.25, capital_temperature_factor=0.3),
    "word-streams-t125-caps10": dict(order="word_streams", min_p=0.1, temperature=1.25, capital_temperature_factor=0.1),
    "word-streams-t100-caps30": dict(order="word_streams", min_p=0.1, temperature=1.0, capital_temperature_factor=0.3),
    # every word kept to the model's words.txt (real_words), at the default's temperature and cooler ones
    "real-words-t100": dict(
        order="word_streams", min_p=0.1, temperature=1.0, capital_temperature_factor=0.3, real_words=True
    ),
    "real-words-t110": dict(
        order="word_streams", min_p=0.1, temperature=1.1, capital_temperature_factor=0.3, real_words=True
    ),
    "real-words-t125": dict(
        order="word_streams", min_p=0.1, temperature=1.25, capital_temperature_factor=0.3, real_words=True
    ),
    # a play's shape, the shipped models' default (`default_options`): every word one it has read, names as written
    # (real_words) and one play's cast, headings on their own lines, no empty speech, clean starts and ends
    # (keep_cast), at the default's drawing
    "play-shape": dict(
        order="word_streams",
        spacing=8,
        min_p=0.1,
        temperature=0.8,
        capital_temperature_factor=0.3,
        real_words=True,
        keep_cast=True,
    ),
    # the model before's default at fewer passes (a stretch goal: 8 passes at 32 passes' structure)
    "word-streams-t125-16": dict(
        order="word_streams", min_p=0.1, temperature=1.25, capital_temperature_factor=0.5, num_steps=16
    ),
    "word-streams-t125-8": dict(
        order="word_streams", min_p=0.1, temperature=1.25, capital_temperature_factor=0.5, num_steps=8
    ),
    "random-s16": dict(order="random", spacing=16),
    "random-s16-r65": dict(order="random", spacing=16, remask_ratio=0.65),
    "random-s8-r65": dict(order="random", spacing=8, remask_ratio=0.65),
    "random-s16-r65-p90": dict(order="random", spacing=16, remask_ratio=0.65, top_p=0.9),
}


def rule_options(rule: str) -> SamplerOptions:
    """The options a rule names (the joint's num_steps is set per canvas, from its masks)."""
    return SamplerOptions() if RULES[rule] is None else SamplerOptions.plain(**RULES[rule])
