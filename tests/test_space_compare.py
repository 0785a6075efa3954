"""The app's Compare tab: the race of the two orders and the autoregressive twin, its readouts and takeaway."""

import re
import time

import gradio as gr
import pytest
import torch

import app
from mdlm_hf import MASK_GLYPH, SamplerOptions, SamplerState
from mdlm_space import loading, race, render
from tests.app_helpers import cell_classes

# the Compare tests' race: 40 characters after ROMEO's heading in 8 passes, seed 0
ROMEO_RACE = dict(prompt="ROMEO:\n", length=40, num_steps=8, temperature=0.8, seed=0)


def passes_and_rate(stats: str) -> tuple[int, float]:
    found = re.search(r"(\d+) forward pass(?:es)? · ([\d.]+) chars per pass", stats)
    return int(found[1]), float(found[2])


def test_compare_streams_both_sides(client):
    frames = list(client.submit(**ROMEO_RACE, autoregressive=False, api_name="/compare_page"))
    assert len(frames) >= 9
    left_html, left_stats, right_html, right_stats, summary, seed, twin_html, twin_stats, *orders = frames[-1]
    assert "8 forward passes" in left_stats and "8 forward passes" in right_stats and "real words" in left_stats
    *_, (left_html, left_stats, right_html, right_stats, summary, seed, twin_html, twin_stats, *orders) = client.submit(
        **ROMEO_RACE, autoregressive=True, api_name="/compare_page"
    )
    assert "40 forward passes · 1.0 chars per pass" in left_stats and "8 forward passes" in right_stats
    assert MASK_GLYPH not in left_html and MASK_GLYPH not in right_html


def test_compare_counts_the_characters_revealed_so_far_per_pass(client):
    autoregressive = list(client.submit(**ROMEO_RACE, autoregressive=True, api_name="/compare_page"))
    assert [passes_and_rate(frame[1]) for frame in autoregressive[1:]] == [(i, 1.0) for i in range(1, 41)]
    rule = dict(order_temperature=0, prior_weight=0.35, remask_ratio=0, spacing=1)
    frames = list(client.submit(**ROMEO_RACE, autoregressive=False, **rule, api_name="/compare_page"))
    for left_html, left_stats, right_html, right_stats, *_ in frames[1:]:
        for canvas, stats in ((left_html, left_stats), (right_html, right_stats)):
            passes, rate = passes_and_rate(stats)
            assert rate == pytest.approx((40 - canvas.count(MASK_GLYPH)) / passes, abs=0.05), stats
    assert all(passes_and_rate(stats)[1] == 5.0 for frame in frames[1:] for stats in (frame[1], frame[3]))


def test_compare_uses_one_reveal_rule_on_both_sides_and_says_which(client):
    rule = dict(order_temperature=0.25, prior_weight=0.35, remask_ratio=0.5, spacing=1)
    frames = list(client.submit(**ROMEO_RACE, autoregressive=False, **rule, api_name="/compare_page"))
    left_html, left_stats, right_html, right_stats, summary, seed, twin_html, twin_stats, *orders = frames[-1]
    for stats in (left_stats, right_stats):
        assert "order temperature 0.25" in stats and "remask ratio 0.5" in stats
    assert "spacing 1" in right_stats and "no spacing" in left_stats  # left to right writes characters in a row
    assert "prior weight 0.35" in right_stats and "no prior weight" in left_stats  # left to right scores nothing
    assert any("#d9534f" in frame[0] for frame in frames)  # left to right remasks too
    # the autoregressive-like side: strictly one character per pass, no reveal rule, and says so
    *_, (left_html, left_stats, right_html, right_stats, summary, seed, twin_html, twin_stats, *orders) = client.submit(
        **ROMEO_RACE, autoregressive=True, **rule, api_name="/compare_page"
    )
    assert "one character per forward pass" in left_stats and "remask" not in left_stats
    assert "remask ratio 0.5" in right_stats


def test_compare_has_a_legend_and_a_one_line_takeaway(client, model_dir):
    model, _ = loading.load_model(model_dir)
    demo = app.build_demo(model)
    assert render.RACE_LEGEND in [block.value for block in demo.blocks.values() if isinstance(block, gr.HTML)]
    frames = list(client.submit(**ROMEO_RACE, autoregressive=False, api_name="/compare_page"))
    assert frames[1][4] == "" and frames[-1][4].startswith("**Takeaway:** same 8 forward passes")
    assert "real words" in frames[-1][4]
    *_, (left_html, left_stats, right_html, right_stats, summary, seed, twin_html, twin_stats, *orders) = client.submit(
        **ROMEO_RACE, autoregressive=True, api_name="/compare_page"
    )
    assert "took left to right 40 passes" in summary and "in 8, 5.0x fewer" in summary
    assert "key" in summary and "Compare the passes, not the time" in summary  # no key/value cache here
    # each side's own compute time, the twin's beside the others' (its wall time, live)
    assert all(re.search(r"· \d+\.\d\d s ·", stats) for stats in (left_stats, right_stats, twin_stats))
    assert "The autoregressive twin took 40 forward passes, one character each" in summary


def test_compare_races_the_autoregressive_twin_in_a_third_column(client, model_dir, twin_dir):
    frames = list(client.submit(**ROMEO_RACE, autoregressive=False, api_name="/compare_page"))
    twin_passes = [passes_and_rate(frame[7]) for frame in frames[1:]]
    assert twin_passes == [(i, 1.0) for i in range(1, 41)]  # one character a pass, every frame one more
    assert frames[1][6].count("mdlm-mask") == 39 and MASK_GLYPH not in frames[-1][6]  # cells, within the context
    assert "keys and values cached" in frames[-1][7]
    assert "real words" in frames[-1][7] and "The autoregressive twin took 40 forward passes" in frames[-1][4]
    model, _ = loading.load_model(model_dir)
    with pytest.raises(ValueError, match="the twin must be a model that writes left to right"):
        app.build_demo(model, twin=model)
    with pytest.raises(ValueError, match="the app's model must be one that fills blanks, a diffusion model; pass this"):
        loading.load_model(twin_dir)
    # the shipped twin goes with the shipped model only: another model has no known twin
    assert loading.default_twin("someone/another-model") == "none"
    assert loading.default_twin(loading.DEFAULT_MODEL) in ("none", str(loading.DEFAULT_TWIN))
    without = list(race.compare(model, None, "", 20, 4, 1.0, 0, False, False))
    assert without[-1][6:8] == ("", "") and "twin" not in without[-1][4]


def test_the_twin_sentence_claims_a_speed_margin_only_where_it_is_real():

    state = SamplerState(
        torch.zeros(1, 4, dtype=torch.long),
        *[torch.zeros(1, 4, dtype=torch.bool)] * 2,
        torch.zeros(1, 4),
        torch.zeros(1, 4, dtype=torch.bool),
        4,
        4,
        4,
        9,
    )
    assert "about confidence order's time" in race.twin_sentence(state, state, 3.0, 2.7)
    assert "2.0x confidence order's time" in race.twin_sentence(state, state, 2.4, 1.2)
    assert "2.0x less time" in race.twin_sentence(state, state, 0.6, 1.2)
    # a difference of a few tenths of a second is the machine's noise, whatever its ratio: over four runs the
    # sentence said "1.3x less time", "2.0x less" and "about the same", and at length 1 "2.9x less time (0.03 s
    # against 0.08 s)"; the passes, which repeat from run to run, are what it then compares
    for twin_seconds, diffusion_seconds in ((0.03, 0.08), (0.2, 0.4), (0.9, 0.6)):
        said = race.twin_sentence(state, state, twin_seconds, diffusion_seconds)
        assert "x less" not in said and "x confidence" not in said and "about" not in said, said
        assert "too short" in said and "against confidence order's 4" in said, said
    # the twin draws each character as the other sides do: only the model and the order differ
    drawn = race.twin_options(SamplerOptions(order="left_to_right", temperature=0.7, min_p=0.2, top_p=0.9))
    assert (drawn.order, drawn.temperature, drawn.min_p, drawn.top_p, drawn.spacing) == (
        "left_to_right",
        0.7,
        0.2,
        0.9,
        0,
    )


def test_the_compare_takeaway_claims_a_margin_only_where_it_is_real():
    # "surest characters first" was said for any margin, one word on a short canvas too
    known = {"the", "king", "is", "dead", "long", "live"}
    assert race.clearly_more_words("the king is dead " * 10, "xq zv wk " * 10, known)
    assert not race.clearly_more_words("the king is dead xq", "the king xq dead xq", known)  # 4/5 against 3/5
    assert not race.clearly_more_words("", "the king", known)


def test_the_takeaway_tells_word_salad_from_text_by_how_the_twin_reads_each_side():
    # the takeaway said "real words 100%" beside a left-to-right side that read "of ten err ut e sol Jocund th me;din"
    from tests.space_browser import SHIPPED

    model, _ = loading.load_model(SHIPPED)
    twin = loading.load_twin(SHIPPED.with_name("mdlm-shakespeare-char-ar"), model)
    salad = "of ten err ut e sol Jocund th me din and the wo are to thee the sir of"
    sense = "But soft, what light through yonder window breaks? It is the east, and Juliet is the sun."
    line = race.twin_reading(model, twin, {"left_to_right": salad, "confidence": sense})
    bits = float(
        re.search(r"The twin reads left to right as nonsense \((\d+\.\d) bits a character; real text 2.0\)", line)[1]
    )
    assert bits > race.NONSENSE_RATIO * 2.0 and "confidence order" not in line, line
    assert race.twin_bits(twin, sense) < race.NONSENSE_RATIO * 2.0
    assert race.twin_reading(model, twin, {"left_to_right": sense, "confidence": " "}) == ""


def test_compare_draws_the_twin_racing_as_cells_not_as_a_long_text(model_dir, twin_dir):
    # while it raced, the twin's column was drawn as a text longer than the context: framed, pinned to the bottom,
    # with "… 126 more characters to write", though 128 characters fit the context
    model, known_words = loading.load_model(model_dir)
    twin = loading.load_twin(twin_dir, model)
    frames = race.compare(model, known_words, "ROMEO:\n", 20, 4, 0.8, 0, False, True, twin=twin)
    for _ in range(3):
        twin_canvas = next(frames)[6]
        assert "mdlm-window" not in twin_canvas and "more characters to write" not in twin_canvas
        assert "class='mdlm-canvas mdlm-follow'" not in twin_canvas and twin_canvas.count("mdlm-mask") > 0


def descendants(block):
    for child in getattr(block, "children", []):
        yield child
        yield from descendants(child)


def test_compare_left_to_right_reveals_in_a_row_and_its_legend_lists_what_can_occur(model_dir):
    # with the shared rule (spacing 8) "Left to right" revealed 4 scattered characters a pass, and the legend listed
    # the live window's frame, which a race within the context never shows
    model, known_words = loading.load_model(model_dir)
    prompt = "ROMEO:\n"
    frames = race.compare(model, known_words, prompt, 40, 10, 0.8, 0, False, True, spacing=8)
    next(frames)  # all masks
    left = cell_classes(next(frames)[0])[len(prompt) :]
    written = left.index("mask")
    assert written >= 2 and set(left[written:]) == {"mask"}, left  # a run from the prompt on, nothing apart
    demo = app.build_demo(model, known_words)
    tab = next(block for block in demo.blocks.values() if isinstance(block, gr.Tab) and block.label == "Compare")
    shown = [block.value for block in descendants(tab) if isinstance(block, gr.HTML) and block.value]
    assert any("revealed this step" in html for html in shown)
    assert not any("window the model reads" in html for html in shown)


def test_the_race_spreads_the_first_pass_of_a_round_over_the_sides():
    # the first pass after the page's own work runs slower; left to right, always first in a round, read 4-6x
    # confidence order's seconds for the same passes in a browser race
    woken = {"cold": True}

    def side(num_passes: int):
        for step in range(num_passes):
            if woken["cold"]:  # the round's first pass, after the consumer's work
                woken["cold"] = False
                time.sleep(0.02)
            yield step  # the race only hands a side's states on

    for _, seconds in race.race({"left_to_right": side(8), "confidence": side(8)}):  # noqa: B007 (the last round's)
        woken["cold"] = True  # the page renders the round
    assert abs(seconds["left_to_right"] - seconds["confidence"]) < 0.05  # each paid 4 of the 8 cold passes
    assert min(seconds.values()) > 0.06


def test_a_race_cut_short_by_stop_says_so_under_the_sides(model_dir):
    # after Stop each side kept its passes and seconds so far, and the takeaway stayed blank: nothing said it stopped
    assert race.race_stopped("", "9 forward passes · 0.4 s") == race.STOPPED
    lowered = "Length lowered from 121 to 79."  # a note of the race's own stays beside it
    assert race.race_stopped(lowered, "9 forward passes") == f"{race.STOPPED} {lowered}"
    finished = "**Takeaway:** same 32 forward passes and reveal rule"
    assert race.race_stopped(finished, "32 forward passes") == gr.skip()
    assert race.race_stopped("", "") == gr.skip()  # a race that never started (a bad prompt) says its error instead
    demo = app.build_demo(loading.load_model(model_dir)[0])
    run = next(fn for fn in demo.fns.values() if fn.api_name == "compare_page")
    stopped = next(fn for fn in demo.fns.values() if fn.fn is race.race_stopped)
    takeaway, left_stats = run.outputs[4], run.outputs[1]
    assert stopped.inputs == [takeaway, left_stats] and stopped.outputs == [takeaway]
    assert stopped.trigger_after == run._id  # once the race's event has ended, stopped or not
