import concurrent.futures
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from gradio_client import Client

import app
from mdlm_hf import MASK_GLYPH, SamplerOptions
from mdlm_hf.metrics import save_word_list
from mdlm_hf.sampler import OPTION_SPECS

REPO_ROOT = Path(__file__).resolve().parent.parent
SHAKESPEARE_LIKE = (
    "ROMEO:\nBut soft, what light through yonder window breaks?\nTo be, or not to be, that is the question:\n"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    import torch

    from mdlm_hf import MDLM

    text = open(REPO_ROOT / "tests" / "data" / "vocab.txt", encoding="utf-8").read()
    torch.manual_seed(0)
    model = MDLM("".join(sorted(set(text))), n_layer=1, n_head=2, n_embd=32, block_size=128)
    path = tmp_path_factory.mktemp("model")
    model.save_pretrained(path)
    save_word_list(SHAKESPEARE_LIKE, path / "words.txt")
    return path


@pytest.fixture(scope="module")
def server(model_dir):
    model, known_words = app.load_model(model_dir)
    demo = app.build_demo(model, known_words)
    port = free_port()
    demo.queue(default_concurrency_limit=8).launch(server_port=port, prevent_thread_lock=True, quiet=True)
    yield f"http://127.0.0.1:{port}/"
    demo.close()


@pytest.fixture(scope="module")
def client(server):
    return Client(server, verbose=False)


def test_generate_streams_and_keeps_the_prompt(client):
    job = client.submit("ROMEO:\n", 60, 12, 0.8, 1.0, "confidence", 3, 0, api_name="/generate")
    frames = list(job)
    assert len(frames) == 13  # the all-mask canvas, then one frame per step
    assert MASK_GLYPH in frames[0][0] and frames[0][1] == ""
    canvas_html, text, readout = frames[-1]
    canvas_only = canvas_html.replace(app.LEGEND, "")
    assert len(text) == 67 and text.startswith("ROMEO:\n") and MASK_GLYPH not in text and MASK_GLYPH not in canvas_only
    assert "step 12/12" in readout and "12 forward passes" in readout and "chars/s" in readout


def test_generate_semi_autoregressive_blocks(client):
    *_, (canvas_html, text, readout) = client.submit("", 64, 8, 1.0, 0.9, "margin", 1, 16, api_name="/generate")
    assert len(text) == 64 and MASK_GLYPH not in text and "8 forward passes" in readout


def test_generate_with_a_soft_order(client):
    job = client.submit("", 48, 6, 1.0, 1.0, "confidence", 2, 0, 0.5, api_name="/generate")
    *_, (canvas_html, text, readout) = job
    assert len(text) == 48 and MASK_GLYPH not in text and "step 6/6" in readout


def test_generate_shows_characters_taken_back_by_remasking(client):
    rule = (0.25, 0.35, 0.75, 1)  # order temperature, prior weight, remask ratio, spacing
    frames = list(client.submit("", 64, 12, 1.0, 1.0, "confidence", 0, 0, *rule, api_name="/generate"))
    assert len(frames) == 13 and len(frames[-1][1]) == 64 and MASK_GLYPH not in frames[-1][1]
    taken_back = [html.replace(app.LEGEND, "").count("#d9534f") for html, *_ in frames]
    assert sum(taken_back) > 0 and taken_back[-1] == 0
    plain = list(client.submit("", 64, 12, 1.0, 1.0, "confidence", 0, 0, 0.25, 0.35, 0.0, 1, api_name="/generate"))
    assert all("#d9534f" not in html.replace(app.LEGEND, "") for html, *_ in plain)


def test_infill_keeps_fixed_characters(client):
    template = "To be, or not to be, ________ is the question:"
    frames = list(client.submit(template, 4, 0.8, 1.0, "entropy", 0, 0.3, api_name="/infill"))
    assert len(frames) == 5
    text = frames[-1][1]
    assert len(text) == len(template) and "_" not in text and MASK_GLYPH not in text
    assert all(a == b for a, b in zip(template, text, strict=True) if a != "_")


def test_compare_streams_both_sides(client):
    frames = list(client.submit("ROMEO:\n", 40, 8, 0.8, 0, False, api_name="/compare"))
    assert len(frames) >= 9
    left_html, left_stats, right_html, right_stats = frames[-1]
    assert "8 forward passes" in left_stats and "8 forward passes" in right_stats and "real words" in left_stats
    *_, (left_html, left_stats, right_html, right_stats) = client.submit(
        "ROMEO:\n", 40, 8, 0.8, 0, True, api_name="/compare"
    )
    assert "40 forward passes · 1.0 chars per pass" in left_stats and "8 forward passes" in right_stats
    assert MASK_GLYPH not in left_html and MASK_GLYPH not in right_html


def test_endpoints_take_their_parameters_by_name(client):
    *_, (canvas_html, text, readout) = client.submit(prompt="", length=30, num_steps=3, seed=1, api_name="/generate")
    assert len(text) == 30 and "step 3/3" in readout
    *_, (canvas_html, text, readout) = client.submit(template="to __ or", num_steps=2, api_name="/infill")
    assert text.startswith("to ") and text.endswith(" or") and "step 2/2" in readout


def test_option_controls_take_label_bounds_and_defaults_from_the_one_table(model_dir):
    model, _ = app.load_model(model_dir)
    demo = app.build_demo(model)
    endpoints = {fn.api_name: fn for fn in demo.fns.values()}
    generate = dict(zip(app.GENERATE_API, endpoints["generate"].inputs, strict=True))
    infill = dict(zip(app.INFILL_API, endpoints["infill"].inputs, strict=True))
    for name in OPTION_SPECS.keys() & generate.keys():
        spec, control = OPTION_SPECS[name], generate[name]
        assert control.label == spec.label and control.value == spec.shown(getattr(SamplerOptions(), name)), name
        if spec.slider is None:
            assert [value for _, value in control.choices] == list(spec.accepts.choices)
        else:
            low, high, step = spec.slider
            assert (control.minimum, control.maximum, control.step) == (low, high or model.block_size, step), name
    # the Infill tab starts with fewer steps and remasking off
    assert (infill["num_steps"].value, infill["remask_ratio"].value) == (app.INFILL_STEPS, app.INFILL_REMASK_RATIO)


def test_forward_process(client):
    masked, predicted, summary = client.predict("Shall I compare thee", 0.5, 0, api_name="/forward_process")
    assert "of 20 characters masked" in summary and MASK_GLYPH in masked


BAD_INPUTS = [
    ("/generate", ("ROMEO é:\n", 20, 4, 0.8, 1.0, "confidence", 0, 0), "outside the model's vocabulary: 'é'"),
    # the sliders' and dropdown's own bounds (from the model) answer first
    ("/generate", ("", 500, 4, 0.8, 1.0, "confidence", 0, 0), "Value 500 is greater than maximum value 128"),
    ("/generate", ("", 20, 0, 0.8, 1.0, "confidence", 0, 0), "Value 0 is less than minimum value 1"),
    ("/generate", ("", 20, 4, -1, 1.0, "confidence", 0, 0), "Value -1 is less than minimum value 0"),
    ("/generate", ("", 20, 4, 0.8, 1.0, "sideways", 0, 0), "sideways is not in the list of choices"),
    ("/generate", ("", 20, 4, 0.8, 1.0, "confidence", -3, 0), "seed must be a whole number between 0 and"),
    ("/generate", ("x" * 120, 20, 4, 0.8, 1.0, "confidence", 0, 0), "exceeds the model's block_size 128"),
    ("/generate", ("", 20, 4, 0.8, 1.0, "confidence", 0, 0, -1), "Value -1 is less than minimum value 0"),
    ("/generate", ("", 20, 4, 0.8, 1.0, "confidence", 0, 0, 0.25, 0.35, 0.99, 1), "Value 0.99 is greater than"),
    ("/generate", ("", 20, 4, 0.8, 1.0, "confidence", 0, 0, 0.25, -1, 0.5, 1), "Value -1 is less than minimum"),
    ("/infill", ("", 4, 0.8, 1.0, "confidence", 0), "template is empty"),
    ("/infill", ("To be or not to be", 4, 0.8, 1.0, "confidence", 0), "template has no blank"),
    ("/infill", ("_" * 200, 4, 0.8, 1.0, "confidence", 0), "template has 200 characters"),
    ("/compare", ("ROMEO:\n", 40, 8, -0.5, 0, False), "Value -0.5 is less than minimum value 0"),
    ("/forward_process", ("Shall I compare thee é", 0.5, 0), "outside the model's vocabulary: 'é'"),
]


@pytest.mark.parametrize("endpoint,args,message", BAD_INPUTS)
def test_bad_input_is_a_visible_error_and_the_app_keeps_serving(client, endpoint, args, message):
    with pytest.raises(Exception) as error:  # gradio_client's AppError carries the gr.Error message
        client.predict(*args, api_name=endpoint)
    assert message in str(error.value)
    assert len(client.predict("", 10, 2, 0.8, 1.0, "confidence", 0, 0, api_name="/generate")[1]) == 10


@pytest.mark.parametrize("value", [float("nan"), "abc", None, 2.5, -1])
def test_number_checks_name_the_problem(value):
    with pytest.raises(app.gr.Error, match="seed must be"):
        app.as_int(value, "seed", 0, 10)
    with pytest.raises(app.gr.Error, match="top-p must be"):
        app.as_float(value if value != 2.5 else 1.5, "top-p", 0.0, 1.0)


def test_eight_concurrent_users_are_all_served(server):
    def one_user(seed: int) -> str:
        return Client(server, verbose=False).predict("", 50, 10, 1.0, 1.0, "random", seed, 0, api_name="/generate")[1]

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        texts = list(pool.map(one_user, range(8)))
    assert len(texts) == 8 and all(len(t) == 50 and MASK_GLYPH not in t for t in texts)
    assert len(set(texts)) == 8  # different seeds, different texts


def test_missing_or_corrupt_model_stops_start_up_with_one_clear_line(tmp_path, model_dir):
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "app.py"), "--model", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: could not load the model from {tmp_path / 'nowhere'}: "
        f"model directory {tmp_path / 'nowhere'} does not exist"
    ]
    corrupt = tmp_path / "corrupt"
    shutil.copytree(model_dir, corrupt)
    (corrupt / "model.safetensors").write_bytes(b"\x00" * 10)
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "app.py"), "--model", str(corrupt)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and "not a readable safetensors file" in result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr


def test_readme_front_matter_is_a_valid_space_config():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("---\n")
    config = yaml.safe_load(readme.split("---\n")[1])
    assert config["sdk"] == "gradio" and config["app_file"] == "app.py" and (REPO_ROOT / config["app_file"]).is_file()
    assert config["sdk_version"].split(".")[0] == "6" and config["title"] and config["license"]
    for key in ("colorFrom", "colorTo"):
        assert config[key] in {"red", "yellow", "green", "blue", "indigo", "purple", "pink", "gray"}
    assert len(config["short_description"]) <= 60


def test_shipped_checkpoint_serves_offline():
    model, known_words = app.load_model(app.DEFAULT_MODEL)
    assert known_words and "romeo" in known_words
    text = model.complete("ROMEO:\n", 40, num_steps=8, seed=0)
    assert text.startswith("ROMEO:\n") and len(text) == 47


@pytest.mark.browser
def test_browser_generate_and_infill(server, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    assert Path(chromium).exists(), "Debian's chromium is required (apt-get install chromium chromium-driver)"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            page = browser.new_page()
            page.goto(server)
            page.get_by_role("button", name="Generate", exact=True).click()
            final_text = page.locator("#generate-final-text textarea")
            expect(final_text).not_to_have_value("", timeout=60_000)
            assert final_text.input_value().startswith("ROMEO:\n") and MASK_GLYPH not in final_text.input_value()
            expect(page.locator("#generate-canvas .mdlm-canvas")).not_to_contain_text(MASK_GLYPH)
            page.screenshot(path=str(tmp_path / "generate.png"), full_page=True)

            page.get_by_role("tab", name="Infill").click()
            page.get_by_text("ROMEO:\nBut soft", exact=False).first.click()  # one of the examples
            # the steps slider is capped at the example's 12 blanks once the template's change event returns
            expect(page.get_by_label("number input for Denoising steps").nth(1)).to_have_value("12")
            page.get_by_role("button", name="Fill the blanks").click()
            infill_text = page.locator("#infill-final-text textarea")
            expect(infill_text).not_to_have_value("", timeout=60_000)
            filled = infill_text.input_value()
            assert filled.startswith("ROMEO:\nBut soft, what light through ") and "_" not in filled
            page.screenshot(path=str(tmp_path / "infill.png"), full_page=True)
        finally:
            browser.close()
    assert (tmp_path / "generate.png").stat().st_size > 10_000


def test_a_port_in_use_is_one_line(model_dir):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit) as stopped:
            app.main(["--model", str(model_dir), "--port", str(port)])
    message = str(stopped.value)
    assert message.startswith(f"error: could not serve the app on port {port}") and "\n" not in message
