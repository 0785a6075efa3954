"""The texts the app shows for a model: its subject, default prompt, infill examples and sample text (Shakespeare's
for the shipped model, a model's demo.json otherwise), and the wording shared by several views."""

from __future__ import annotations

import dataclasses

from mdlm_hf import MDLM

DEFAULT_PROMPT = "ROMEO:\n"
LAST_RUN = "Last run, before the edit: "
SCORING = "Scoring…"  # Score's line while it scores


LAST_RUN_HTML = f"<p style='margin: 0 0 4px; font-size: 13px;'><b>{LAST_RUN.rstrip(': ')}</b></p>"


def marked_last_run(value: str | None, placeholders: tuple[str, ...] = ()) -> str | None:
    """A finished run's line or view (markdown, or HTML) marked as the last run's after an edit of its input; None
    for an empty one, one of `placeholders`, one marked already or a score still streaming."""
    if not value or value in placeholders or value.startswith((LAST_RUN, LAST_RUN_HTML, SCORING)):
        return None
    return LAST_RUN_HTML + value if value.lstrip().startswith("<") else LAST_RUN + value


END_AT_WORDS = {
    "line": "the end of a line",
    "speech": "the end of a speech",
    "length": "exactly the length (may stop mid-word)",
}

INFILL_EXAMPLES = [
    "To be, or not to be, ________ is the question:",
    "ROMEO:\nBut soft, what light through ______ window breaks?\nIt is the east, and ______ is the sun.",
    "KING RICHARD III:\nNow is the winter of our __________\nMade glorious summer by this sun of York;",
    "First Citizen:\nBefore we proceed any further, ____ me speak.\n\nAll:\nSpeak, ______.",
]
# Shakespeare that is not in TinyShakespeare (Sonnet 18), for the accuracy plot and the forward process
SONNET_18 = """Shall I compare thee to a summer's day?
Thou art more lovely and more temperate:
Rough winds do shake the darling buds of May,
And summer's lease hath all too short a date;
Sometime too hot the eye of heaven shines,
And often is his gold complexion dimm'd;
And every fair from fair sometime declines,
By chance or nature's changing course untrimm'd;
But thy eternal summer shall not fade,
Nor lose possession of that fair thou ow'st;
Nor shall death brag thou wander'st in his shade,
When in eternal lines to time thou grow'st:
So long as men can breathe or eyes can see,
So long lives this, and this gives life to thee.
"""
# the blank of infill templates: "_", or the first of these the model's vocabulary lacks
BLANK_CHOICES = "_#*~^|@¤□"


@dataclasses.dataclass(frozen=True)
class DemoText:
    """What the app shows for one model: the subject in its title, the default prompt, infill examples (each "_" a
    blank), and a sample text (`sample_name`: what it is) for the forward process and the accuracy plot."""

    subject: str
    prompt: str = ""
    examples: tuple[str, ...] = ()
    sample: str = ""
    sample_name: str = "a sample of the model's own"
    emoji: str = ""


SHAKESPEARE = DemoText(
    "Shakespeare", DEFAULT_PROMPT, tuple(INFILL_EXAMPLES), SONNET_18, "Sonnet 18 (unseen in training)", "🎭"
)


def choose_blank(vocab: str) -> str:
    """The infill blank: "_", or, when the model writes "_", the first of BLANK_CHOICES it does not write (else the
    first character from U+2580 on that it does not write)."""
    return next(char for char in BLANK_CHOICES + "".join(map(chr, range(0x2580, 0x2600))) if char not in vocab)


def covers(model: MDLM, text: str, blank: str = "") -> bool:
    """Whether the model writes every character of `text` (blanks aside) and reads it all at a time."""
    return len(text) <= model.block_size and not model.tokenizer.unknown_chars(text.replace(blank, ""))


def model_sample(model: MDLM) -> str:
    """A short text of the model's own (seed 0), for a model that comes with no sample text it covers."""
    return model.generate(length=min(128, model.block_size), num_steps=16, seed=0)


def demo_texts(model: MDLM, metadata: dict | None = None) -> DemoText:
    """The texts the app shows for `model`: its metadata's (demo.json) where they are text it writes, over
    Shakespeare's when the model writes those (the shipped model) or else none; a sample text it covers always,
    its own sample if need be. Examples keep "_" as their blank."""
    metadata = metadata or {}
    every_text = "".join((*SHAKESPEARE.examples, SHAKESPEARE.prompt, SONNET_18)).replace("_", "")
    shakespeare = not model.tokenizer.unknown_chars(every_text)
    base = SHAKESPEARE if shakespeare and metadata.get("subject", "Shakespeare") == "Shakespeare" else None
    if base is None:  # Sonnet 18 as the sample where the model writes it
        base = DemoText(str(metadata.get("subject") or "text"), sample=SONNET_18, sample_name="Sonnet 18")
    fields = {name: metadata[name] for name in ("subject", "prompt", "sample") if isinstance(metadata.get(name), str)}
    if "sample" in fields:
        named = metadata.get("sample_name")
        subject = fields.get("subject", base.subject)
        fields["sample_name"] = named if isinstance(named, str) else f"a passage of {subject}"
    if isinstance(metadata.get("examples"), list):
        fields["examples"] = tuple(e for e in metadata["examples"] if isinstance(e, str))
    texts = dataclasses.replace(base, **fields)
    texts = dataclasses.replace(
        texts,
        prompt=texts.prompt if covers(model, texts.prompt) and len(texts.prompt) < model.block_size else "",
        examples=tuple(e for e in texts.examples if "_" in e and covers(model, e, "_")),
    )
    if not texts.sample.strip() or model.tokenizer.unknown_chars(texts.sample):
        texts = dataclasses.replace(texts, sample=model_sample(model), sample_name=DemoText("").sample_name)
    return texts


def sample_label(texts: DemoText) -> str:
    """The How-it-works line's label: what the sample text is."""
    if texts.sample == SONNET_18:
        return "A line of Shakespeare"
    return "A line the model wrote" if texts.sample_name == DemoText("").sample_name else f"A line of {texts.subject}"


def sample_passage(texts: DemoText, block_size: int) -> str:
    """The sample text's first whole lines that fit in what the model reads at a time (at least its first line,
    cut to fit)."""
    lines = [line for line in texts.sample.splitlines() if line.strip()]
    passage = lines[0][:block_size] if lines else ""
    for line in lines[1:]:
        if len(passage) + 1 + len(line) > block_size:
            break
        passage += "\n" + line
    return passage


# a line shorter than these shows little of the forward process: the first line of 20 characters, else of 5, else
# the longest one
SAMPLE_LINE_CHARS = (20, 5)


def sample_line(texts: DemoText, block_size: int) -> str:
    """A line of the sample text long enough to mask (SAMPLE_LINE_CHARS), cut to what the model reads at a time."""
    lines = [line for line in texts.sample.splitlines() if line.strip()] or [texts.sample]
    long_enough = (line for chars in SAMPLE_LINE_CHARS for line in lines if len(line) >= chars)
    return next(long_enough, max(lines, key=len))[:block_size]


def passes(count: int) -> str:
    """ "1 forward pass", "2 forward passes"."""
    return f"{count:,} forward pass{'' if count == 1 else 'es'}"


TITLE_WORDS = {"alls": "All's", "winters": "Winter's", "loves": "Love's", "labours": "Labour's", "nights": "Night's"}


def play_title(name: str) -> str:
    """A play's name as a reader writes it: "romeo_and_juliet" -> "Romeo and Juliet", "henry_vi_part_3" -> "Henry
    VI Part 3"."""

    def titled(i: int, word: str) -> str:
        if word in TITLE_WORDS:
            return TITLE_WORDS[word]
        if set(word) <= set("ivx"):
            return word.upper()
        return word if i and word in ("and", "of", "the") else word.title()

    return " ".join(titled(i, word) for i, word in enumerate(name.split("_")))


def sentence(text: str) -> str:
    """`text` as a sentence: its first letter a capital, a full stop at its end ("" stays "")."""
    if not text:
        return ""
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")
