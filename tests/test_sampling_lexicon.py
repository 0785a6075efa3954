"""real_words: every word a run writes is one of a word list, or a counted fallback (mdlm_hf/sampling/lexicon.py)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mdlm_hf import MDLM, sample
from mdlm_hf.metrics import words
from mdlm_hf.pipeline import prompt_canvas, text_to_canvas
from mdlm_hf.sampling.lexicon import Lexicon, as_lexicon
from mdlm_hf.sampling.options import SamplerOptions
from mdlm_hf.sampling.state import final_state
from mdlm_hf.tokenizer import CharTokenizer
from tests.stubs import StubModel
from training.words import save_word_list

VOCAB = " \n.,:'abcdefghijklmnopqrstuvwxyzRT"
TINY = {"to", "be", "or", "not"}


class OtherLettersModel(StubModel):
    """Favours the letters no word of TINY holds (x, z, q, ...) everywhere, then the other letters."""

    def __init__(self, block_size: int = 64) -> None:
        super().__init__(len(VOCAB) + 1, block_size)
        self.tokenizer = CharTokenizer(VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*tokens.shape, self.vocab_size)
        logits[..., VOCAB.index("a") :] = 1.0  # a letter before a separator
        for c in "xzqjkvw":
            logits[..., VOCAB.index(c)] = 6.0
        logits[..., self.mask_id] = -math.inf
        return logits


def written_words(model, state, row=0):
    """The words of a row's final text that hold a written character."""
    text = model.tokenizer.decode(state.tokens[row])
    given = state.is_given[row].tolist()
    found, at = [], 0
    for word in words(text):
        at = text.lower().index(word, at)
        if not all(given[at : at + len(word)]):
            found.append(word)
        at += len(word)
    return found


@pytest.mark.parametrize(
    "changes",
    [
        {},
        dict(order="streams"),
        dict(order="left_to_right", num_steps=48, spacing=0),
        dict(order="left_to_right", num_steps=12),
        dict(order="confidence"),
        dict(order="random"),
        dict(order="left_to_right", block_length=16, num_steps=16, spacing=0),
        dict(temperature=0.0),
    ],
)
def test_every_word_written_is_in_the_lexicon_or_a_counted_fallback(changes):
    model = OtherLettersModel()
    canvas = torch.full((4, 48), model.mask_id)
    for real_words in (False, True):
        lexicon = TINY if real_words else None
        state = final_state(sample(model, canvas, seed=0, real_words=real_words, lexicon=lexicon, **changes))
        invented = [sum(w not in TINY for w in written_words(model, state, row)) for row in range(4)]
        if not real_words:
            assert sum(invented) > 0 and state.word_fallbacks is None  # the odds alone write other words
            continue
        assert all(n <= int(f) for n, f in zip(invented, state.word_fallbacks, strict=True)), (changes, invented)
        assert sum(len(written_words(model, state, row)) for row in range(4)) > 0
    if changes.get("order", "word_streams") == "word_streams" or changes.get("spacing") == 0:
        assert state.word_fallbacks.sum() == 0  # written left to right from a word's start: no dead end


def test_a_canvas_past_the_context_keeps_its_words_window_by_window():
    model = OtherLettersModel(block_size=32)
    state = final_state(sample(model, torch.full((2, 100), model.mask_id), seed=1, real_words=True, lexicon=TINY))
    assert state.done
    for row in range(2):
        assert sum(w not in TINY for w in written_words(model, state, row)) <= int(state.word_fallbacks[row])


def test_a_prompts_own_word_is_kept_as_written_and_a_word_it_starts_is_finished_from_the_list():
    model = OtherLettersModel()
    for prompt, starts in (("xqz", "xqz"), ("n", "not"), ("RT: to b", "RT: to be")):
        canvas = prompt_canvas(model, prompt, 24).expand(3, -1)
        state = final_state(sample(model, canvas, seed=2, real_words=True, lexicon=TINY))
        for row in range(3):
            text = model.tokenizer.decode(state.tokens[row])
            assert text.lower().startswith(starts.lower()) and int(state.word_fallbacks[row]) == 0, text
            assert all(w in TINY for w in written_words(model, state, row)), text


def test_a_word_that_cannot_fit_is_a_counted_fallback_not_a_hang():
    model = OtherLettersModel()
    # "a" starts the one word, which has no room: every draw after it is a dead end
    state = final_state(sample(model, text_to_canvas(model, "a___"), seed=0, real_words=True, lexicon=["abcdefghij"]))
    assert state.done and int(state.word_fallbacks[0]) >= 1
    assert model.tokenizer.decode(state.tokens[0]).startswith("a")


def test_the_twins_writer_keeps_its_words_to_the_list(tiny_text):
    torch.manual_seed(0)
    twin = MDLM(CharTokenizer.from_text(tiny_text).vocab, n_layer=1, n_head=2, n_embd=16, block_size=32, causal=True)
    lexicon = set(words(tiny_text))
    canvas = prompt_canvas(twin, "", 80).expand(2, -1)
    state = final_state(sample(twin, canvas, seed=0, real_words=True, lexicon=lexicon))
    for row in range(2):
        assert sum(w not in lexicon for w in written_words(twin, state, row)) <= int(state.word_fallbacks[row])


def test_a_model_reads_its_own_words_txt(tiny_model, tiny_text, tmp_path, monkeypatch):
    tiny_model.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="real_words needs the model's word list, words.txt beside its weights"):
        MDLM.from_pretrained(tmp_path).generate(16, seed=0, real_words=True)
    save_word_list(tiny_text, tmp_path / "words.txt")
    model = MDLM.from_pretrained(tmp_path)
    assert model.word_list_file() == tmp_path / "words.txt"
    assert set(words(model.generate(40, seed=0, real_words=True, temperature=0.0))) <= set(words(tiny_text))

    def hub_download(repo_id, filename, **kwargs):  # the Hub, intercepted: this folder is the repo
        return str(tmp_path / filename)

    monkeypatch.setattr("mdlm_hf.model.hf_hub_download", hub_download)
    monkeypatch.setattr("huggingface_hub.hub_mixin.hf_hub_download", hub_download)
    assert MDLM.from_pretrained("someone/mdlm").word_list_file() == tmp_path / "words.txt"


def test_bad_lexicons_get_one_clear_line(tmp_path, tiny_model):
    canvas = torch.full((1, 8), tiny_model.mask_id)
    empty, binary = tmp_path / "empty.txt", tmp_path / "binary.txt"
    empty.write_text("\n\n")
    binary.write_bytes(b"\xff\xfe words")
    cases = [
        (empty, f"lexicon file {empty} holds no word"),
        (binary, f"lexicon file {binary} is not UTF-8 text"),
        (tmp_path / "missing.txt", "does not exist"),
        (tmp_path, "does not exist"),
        ([], "lexicon holds no word"),
        (["to", 5], "lexicon must hold words as strings, got 5"),
        (5, "lexicon must be words (a list or set of strings) or a file's path, got 5"),
    ]
    for lexicon, message in cases:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")) as error:
            final_state(sample(tiny_model, canvas, seed=0, real_words=True, lexicon=lexicon))
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="lexicon applies with real_words=True"):
        sample(tiny_model, canvas, seed=0, lexicon=["to"])
    with pytest.raises(ValueError, match="real_words must be True or False, got 1"):
        SamplerOptions(real_words=1)


def test_a_fragment_fits_as_its_sides_say():
    lexicon = Lexicon(["don't", "thee", "the", "them", "lovers", "'Tis"])
    assert lexicon.words == {"don't", "thee", "the", "them", "lovers", "tis"}
    assert lexicon.fits("The", True, True) and not lexicon.fits("th", True, True)  # a whole word, any case
    assert lexicon.fits("th", True, False, room=1) and not lexicon.fits("th", True, False, room=0)  # room for "the"
    assert lexicon.fits("em", False, True, room=2) and not lexicon.fits(
        "em", True, False, room=math.inf
    )  # an end, no start
    assert lexicon.fits("he", False, False, room=math.inf) and not lexicon.fits("ht", False, False, room=math.inf)
    assert lexicon.fits("don'", True, False, room=1) and lexicon.fits("lovers'", True, True)  # a quote is no letter
    assert as_lexicon(lexicon) is lexicon


@settings(max_examples=25, deadline=None)
@given(
    lexicon=st.sets(st.text(alphabet="abcdeo", min_size=1, max_size=5), min_size=1, max_size=6),
    seed=st.integers(0, 1000),
    order=st.sampled_from(["word_streams", "left_to_right", "confidence", "random"]),
)
def test_no_word_outside_the_list_goes_uncounted(lexicon, seed, order):
    model = OtherLettersModel(block_size=32)
    canvas = text_to_canvas(model, "to " + "_" * 20 + " be" + "_" * 12).expand(2, -1)
    state = final_state(sample(model, canvas, seed=seed, real_words=True, lexicon=lexicon, order=order))
    for row in range(2):
        assert sum(w not in lexicon for w in written_words(model, state, row)) <= int(state.word_fallbacks[row])


def test_a_word_list_past_its_limits_is_refused_in_one_line(monkeypatch):
    # a word of 20,000 letters filled a fragment table for minutes: a hang with nothing printed
    from mdlm_hf.sampling import lexicon

    with pytest.raises(ValueError, match="holds a word of 20,000 letters; a word list may hold"):
        lexicon.Lexicon(["a" * 20_000])
    monkeypatch.setattr(lexicon, "MAX_WORDS", 3)
    with pytest.raises(ValueError, match="holds 4 words; a word list may hold 3 words"):
        lexicon.Lexicon(["to", "be", "or", "not"])


def test_a_word_list_file_past_its_size_is_refused_naming_it(tmp_path, monkeypatch):
    from mdlm_hf.sampling import lexicon

    monkeypatch.setattr(lexicon, "MAX_LEXICON_BYTES", 100)
    (tmp_path / "words.txt").write_text("word\n" * 30)
    with pytest.raises(ValueError, match=r"words.txt has 150 bytes, more than the 100 such a file may have"):
        lexicon.as_lexicon(tmp_path / "words.txt")


def test_a_models_words_file_that_is_no_regular_file_is_refused_not_ignored(tmp_path):
    # words.txt linked to /dev/zero or a FIFO turned real words off without a word
    import os

    from mdlm_hf.data import file_in_folder

    os.mkfifo(tmp_path / "words.txt")
    with pytest.raises(ValueError, match="words.txt is not a regular file"):
        file_in_folder(tmp_path, "words.txt")
    (tmp_path / "casts.json").symlink_to("/dev/zero")
    with pytest.raises(ValueError, match="casts.json is not a regular file"):
        file_in_folder(tmp_path, "casts.json")
    assert file_in_folder(tmp_path, "demo.json") is None  # a file the export did not write: none
