"""The texts the app shows for a model (mdlm_space/texts.py): a model of other text, demo.json, Shakespeare."""

import json
import shutil

import gradio as gr
import pytest
import torch

import app
from mdlm_space import loading
from mdlm_space.tabs import how_it_works
from mdlm_space.texts import SHAKESPEARE, DemoText, choose_blank, demo_texts, sample_line
from tests.app_helpers import Page, api_names, tab_controls

ARITHMETIC = "".join(f"{a}+{b}={a + b}\n" for a in range(0, 40, 3) for b in range(0, 30, 7)) + "x_1 = 2 - 3\n"


@pytest.fixture(scope="module")
def arithmetic_dir(tmp_path_factory):
    """A tiny model of sums: its vocabulary writes "_" and none of Sonnet 18's letters; no card, no demo.json."""

    from mdlm_hf import MDLM, CharTokenizer

    torch.manual_seed(0)
    model = MDLM(CharTokenizer.from_text(ARITHMETIC).vocab, n_layer=1, n_head=2, n_embd=32, block_size=64)
    path = tmp_path_factory.mktemp("arithmetic")
    model.save_pretrained(path)
    return path


def labelled(demo: gr.Blocks, kind: type, start: str):
    return next(b for b in demo.blocks.values() if isinstance(b, kind) and str(b.label).startswith(start))


def test_a_model_of_other_text_starts_and_shows_text_it_writes(arithmetic_dir):
    model, known_words = loading.load_model(arithmetic_dir)
    assert "_" in model.tokenizer.vocab and "S" not in model.tokenizer.vocab
    assert loading.load_demo_metadata(arithmetic_dir) is None
    demo = app.build_demo(model, known_words)
    page = Page(demo)  # the page loads: the forward process runs on a line the model writes
    assert "Shakespeare" not in demo.title and "Shakespeare" not in str(next(iter(demo.blocks.values())).value)
    generate = tab_controls(demo, "generate")
    assert page.value(generate["prompt"]) == ""  # Shakespeare's "ROMEO:\n" is not the model's to write
    # "_" is a character of the model's, so the blank is another, and the tab says which
    template = labelled(demo, gr.Textbox, "Template")
    assert choose_blank(model.tokenizer.vocab) == "#"
    assert template.label == "Template: every # is a character to fill"
    assert "_" in template.info and "#" in template.info
    line = labelled(demo, gr.Textbox, "A line")
    assert line.label == "A line the model wrote" and not model.tokenizer.unknown_chars(page.value(line))
    summary = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "forward-summary")
    assert "characters masked" in page.value(summary)
    tab = next(b for b in demo.blocks.values() if isinstance(b, gr.Tab) and b.label == "How it works")
    page.fire(tab, "select")  # the accuracy plot measures the model's own sample
    assert page.value(next(b for b in demo.blocks.values() if isinstance(b, gr.Plot))) is not None
    # the endpoint fills the blank and keeps the model's "_" as a character
    infill = next(fn for fn in demo.fns.values() if fn.api_name == "infill_page")
    named = dict(template="x# = 2#3", num_steps=2, temperature=1.0, top_p=1.0, order="confidence", seed=0)
    named |= dict(order_temperature=0.25, prior_weight=0.35, remask_ratio=0.0, spacing=1, fixed_seed=True)
    named |= dict(entropy_bound=0, min_p=0.0, cut_where_sure=0.0, capital_temperature_factor=1.0, real_words=False)
    named["keep_cast"], named["read_better"] = False, False
    values = tuple(named[name] for name in api_names(demo, "infill"))  # the event's function takes the API's order
    *_, (_, text, *_) = infill.fn(*values)
    assert text.startswith("x") and text[2:6] == " = 2" and text[7] == "3" and "#" not in text
    named["template"] = "x_1 = #"
    *_, (_, text, *_) = infill.fn(*(named[name] for name in api_names(demo, "infill")))
    assert text.startswith("x_1 = ") and "#" not in text


def test_a_models_demo_json_gives_title_prompt_examples_and_sample(arithmetic_dir, tmp_path):
    shutil.copytree(arithmetic_dir, tmp_path / "model")
    metadata = dict(subject="sums", prompt="12+", examples=["3+4=_", "1_+2_=3_", "Shall _"], sample="3+4=7\n9+9=18\n")
    (tmp_path / "model" / loading.DEMO_FILE).write_text(json.dumps(metadata), encoding="utf-8")
    model, known_words = loading.load_model(tmp_path / "model")
    assert loading.load_demo_metadata(tmp_path / "model") == metadata
    demo = app.build_demo(model, known_words, loading.load_demo_metadata(tmp_path / "model"))
    page = Page(demo)
    assert demo.title == "mdlm_hf: Sums from masks"
    assert page.value(tab_controls(demo, "generate")["prompt"]) == "12+"
    assert page.value(tab_controls(demo, "compare")["prompt"]) == "12+"
    examples = next(b for b in demo.blocks.values() if isinstance(b, gr.Dataset))
    assert [sample[0] for sample in examples.samples] == ["3+4=#", "1#+2#=3#"]  # the blank converted; "Shall" dropped
    assert labelled(demo, gr.Textbox, "Template").value == "3+4=#"
    assert labelled(demo, gr.Textbox, "A line").value == "3+4=7" and labelled(demo, gr.Textbox, "A line").label == (
        "A line of sums"
    )
    figure = how_it_works.accuracy_plot_once(model, demo_texts(model, metadata))(0.5)
    assert figure.axes[0].get_title() == "Denoising accuracy on a passage of sums"


def test_the_shipped_model_keeps_shakespeare(model_dir):
    model, _ = loading.load_model(model_dir)
    assert demo_texts(model) == SHAKESPEARE and demo_texts(model, {"prompt": "JULIET:\n"}).prompt == ("JULIET:\n")
    demo = app.build_demo(model)
    assert demo.title == "mdlm_hf: Shakespeare from masks"
    assert labelled(demo, gr.Textbox, "Template").label == "Template: every _ is a character to fill"
    assert labelled(demo, gr.Textbox, "A line").label == "A line of Shakespeare"


def test_the_forward_process_shows_a_line_long_enough_to_mask():
    texts = DemoText("sums", sample="+\n1\n06++60=_3262-\n47+90+4-24 -9x1208 5 _04-7+5x\n3")
    assert sample_line(texts, 64) == "47+90+4-24 -9x1208 5 _04-7+5x"  # the first of 20 characters or more
    short = DemoText("sums", sample="+\n\n1+2=3\n4\n10+20=30")
    assert sample_line(short, 64) == "1+2=3" and sample_line(short, 3) == "1+2"  # else the first of 5
    assert sample_line(DemoText("sums", sample="+\n12\n4"), 64) == "12"  # else the longest
