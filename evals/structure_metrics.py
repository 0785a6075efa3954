"""Structure metrics of a play: what a reader sees at once and the study's word metrics cannot.

A sample is a text and which of its characters the sampler wrote (the rest were given: a prompt, a template).
Only lines holding a written character are scored; given lines are context (the speaker before, the line after).
A sample's ragged ends are dropped: the first line when the text starts mid-document (its first character was
written), the last when it stops mid-line.

- A **heading** is a line `NAME:` whose name is one to five capitalised words (letters, apostrophes, hyphens,
  `&`, commas; "of", "the", "and" may join them), after a blank line or at the start of the text; an
  all-capitals one counts anywhere.
- A **real** heading names a speaker of `known_speakers` (every heading of the training text and the
  held-out plays) or one that a given line of the same sample names.
- An **empty speech** is a heading followed by a blank line or by another heading.
- **Same speaker twice** is a heading naming the speaker of the heading before it.
- **Same play** is the share of two speakers in a row (a heading and the one before it, different names, both of
  the cast map) who speak within CAST_SPAN lines of each other in one of the reference texts, a play of the corpus
  builder or TinyShakespeare; the others are **strangers**, casts of two plays mixed. The builder's plays come one
  by one, their headings mapped to the play's list of persons. TinyShakespeare marks no play's end, so there a span
  of about a play's length stands in for "the same play": speakers at the seam of two plays pass as one cast, so
  strangers are a floor. Real text has none by definition.
- A **repeated line** is a speech line (not blank, not a heading) that already occurred earlier in the text.
- A **long line** is a speech line over LONG_LINE characters (real text has none: its verse and its wrapped prose
  stay under it); a **run-on heading** is an all-capitals name and its colon with the speech run on after it in the
  same line (`LADY CAPULET:will require you`), counted against the headings and run-on headings together; it is
  neither a heading nor a speech line, so its words count toward no other metric.
- **Judge NLL** is the nats per written character under a character n-gram model fit on the training split.
- A **loop** is a span of LOOP_SPAN characters that occurs twice in one text (long generation's failure: a window
  copying its own context).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from evals.text_metrics import KneserNeyJudge
from mdlm_hf.metrics import SPEAKER_NAME, heading_name, speakers, words  # noqa: F401 (speakers: the suite reads it here)

JUDGE_HISTORY = 16  # characters of history handed to the judge (it reads its last order - 1 of them)
LOOP_SPAN = 64  # characters a verbatim repeat must span to count as a loop
LONG_LINE = 80  # characters a speech line must exceed to count as long
CAST_SPAN = 3000  # lines within which two speakers count as one play's cast (TinyShakespeare's plays: 3-4k lines)
NAME = SPEAKER_NAME  # the package's definition of a speaker's name (mdlm_hf/metrics.py)


def runs_on(line: str) -> bool:
    """Whether a line is a heading with its speech run on after the colon (`LADY CAPULET:will require you`)."""
    name, colon, rest = line.partition(":")
    return bool(colon and rest.strip() and len(name) >= 3 and name.isupper() and NAME.fullmatch(name))


def castmates(texts: Iterable[str], span: int = CAST_SPAN) -> dict[str, set[str]]:
    """Per speaker of the texts, every speaker with a heading within `span` lines of one of theirs (themselves too)."""
    cast: dict[str, set[str]] = {}
    for text in texts:
        lines = text.split("\n")
        window: deque[tuple[int, str]] = deque()  # the headings of the last `span` lines
        in_window: Counter[str] = Counter()
        for i, line in enumerate(lines):
            if (name := heading_name(line, lines[i - 1] if i else None)) is None:
                continue
            while window and window[0][0] < i - span:
                in_window[window.popleft()[1]] -= 1
            window.append((i, name))
            in_window[name] += 1
            for other in +in_window:  # the names still in the window
                cast.setdefault(name, set()).add(other)
                cast.setdefault(other, set()).add(name)
    return cast


@dataclass
class Sample:
    """A text and, per character, whether the sampler wrote it (False: given by the caller)."""

    text: str
    written: Sequence[bool]

    @classmethod
    def all_written(cls, text: str) -> Sample:
        """A sample every character of which the sampler wrote (a real window, both ends ragged)."""
        return cls(text, [True] * len(text))


@dataclass
class Counts:
    """What `count_structure` found in a set of samples; `metrics` turns it into rates."""

    chars: int = 0  # written characters on scored lines
    headings: int = 0
    real_headings: int = 0
    followed: int = 0  # headings whose next line is known
    empty: int = 0
    preceded: int = 0  # headings with a heading before them in the text
    twice: int = 0
    paired: int = 0  # headings after a heading of another speaker, both of the cast map
    strangers: int = 0
    speech_lines: int = 0
    repeated_lines: int = 0
    long_lines: int = 0
    run_on: int = 0  # run-on headings (not among `headings`)
    words: int = 0
    valid_words: int = 0
    judge_nats: float = 0.0


def scored_line_range(sample: Sample, lines: list[str]) -> range:
    """Indices of the lines that are not ragged ends."""
    first = 1 if sample.written and sample.written[0] else 0
    last = len(lines) - (1 if sample.written and sample.written[-1] and not sample.text.endswith("\n") else 0)
    return range(first, max(first, last))


def count_sample(
    sample: Sample,
    counts: Counts,
    known_speakers: set[str],
    known_words: set[str],
    judge: KneserNeyJudge | None,
    cast: dict[str, set[str]] | None = None,
) -> None:
    """Adds one sample's structure to `counts` (strangers only with a cast map, `castmates`)."""
    lines = sample.text.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    names = [heading_name(line, lines[i - 1] if i else None) for i, line in enumerate(lines)]
    # a speaker the prompt names is a real one to this sample (the prompt may invent one)
    given = {
        name for i, name in enumerate(names) if name and not any(sample.written[starts[i] : starts[i] + len(lines[i])])
    }
    known_speakers = known_speakers | given
    previous_names, last = [], None  # the speaker of the nearest heading above each line (None: none yet)
    for name in names:
        previous_names.append(last)
        last = name or last
    scored = scored_line_range(sample, lines)
    for i in scored:
        line, start = lines[i], starts[i]
        end = start + len(line) + (1 if i + 1 < len(lines) else 0)  # the line and its newline
        written = [j for j in range(start, end) if sample.written[j]]
        if not written:
            continue  # a given line: context only
        counts.chars += len(written)
        if judge is not None:
            for j in written:
                counts.judge_nats -= math.log(
                    judge.probability(sample.text[j], sample.text[max(0, j - JUDGE_HISTORY) : j])
                )
        name = names[i]
        if name is not None:
            counts.headings += 1
            counts.real_headings += name in known_speakers
            # the next line is unknown when the text stops right after the heading's newline
            has_next = i + 1 < len(lines) and not (i + 1 == len(lines) - 1 and lines[i + 1] == "")
            if has_next:
                counts.followed += 1
                counts.empty += lines[i + 1] == "" or names[i + 1] is not None
            if previous_names[i] is not None:
                counts.preceded += 1
                counts.twice += previous_names[i] == name
                if cast and previous_names[i] != name and name in cast and previous_names[i] in cast:
                    counts.paired += 1
                    counts.strangers += previous_names[i] not in cast[name]
        elif runs_on(line):
            counts.run_on += 1
        elif line.strip():
            counts.speech_lines += 1
            counts.repeated_lines += line in lines[:i]
            counts.long_lines += len(line) > LONG_LINE
            found = words(line)
            counts.words += len(found)
            counts.valid_words += sum(w in known_words for w in found)


def count_structure(
    samples: Iterable[Sample],
    known_speakers: set[str],
    known_words: set[str],
    judge: KneserNeyJudge | None = None,
    cast: dict[str, set[str]] | None = None,
) -> Counts:
    """The structure of a set of samples, pooled; `cast` (from `castmates`) counts strangers."""
    counts = Counts()
    for sample in samples:
        if len(sample.written) != len(sample.text):
            raise ValueError("a sample's written flags must match its text, one per character")
        count_sample(sample, counts, known_speakers, known_words, judge, cast)
    return counts


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, NaN where there is nothing to divide by."""
    return numerator / denominator if denominator else math.nan


def metrics(counts: Counts) -> dict[str, float]:
    """The suite's rates from pooled counts (NaN where nothing was there to count)."""
    return {
        "headings_per_1k": ratio(1000 * counts.headings, counts.chars),
        "real_names": ratio(counts.real_headings, counts.headings),
        "empty_speeches": ratio(counts.empty, counts.followed),
        "same_speaker_twice": ratio(counts.twice, counts.preceded),
        "strangers": ratio(counts.strangers, counts.paired),
        "same_play": ratio(counts.paired - counts.strangers, counts.paired),
        "repeated_lines": ratio(counts.repeated_lines, counts.speech_lines),
        "long_lines": ratio(counts.long_lines, counts.speech_lines),
        "run_on_headings": ratio(counts.run_on, counts.headings + counts.run_on),
        "valid_words": ratio(counts.valid_words, counts.words),
        "judge_nll": ratio(counts.judge_nats, counts.chars),
        "headings": counts.headings,
        "chars": counts.chars,
    }


def repeated_span(text: str, span: int = LOOP_SPAN) -> str | None:
    """The first span of `span` characters that occurs twice in `text` (overlapping allowed), else None."""
    seen = set()
    for i in range(len(text) - span + 1):
        piece = text[i : i + span]
        if piece in seen:
            return piece
        seen.add(piece)
    return None
