"""The app's input checks (mdlm_space/checks.py): a bad value from the page or the API is one line naming it."""

import gradio as gr
import pytest

import app
from mdlm_space import checks, endpoints, handlers, loading, race
from tests.app_helpers import Page, tab_controls

# a valid call of each endpoint, by name, that each bad input below changes in one or a few values
RUN = dict(prompt="", length=20, num_steps=4, temperature=0.8, top_p=1.0, order="confidence", seed=0, block_length=0)


FILL = dict(template="", num_steps=4, temperature=0.8, top_p=1.0, order="confidence", seed=0)


RACE = dict(prompt="ROMEO:\n", length=20, num_steps=4, temperature=0.8, seed=0, autoregressive=False)


RULE = dict(order_temperature=0.25, prior_weight=0.35, remask_ratio=0.75, spacing=1)


BAD_INPUTS = [
    ("/generate", dict(RUN, prompt="ROMEO é:\n"), "outside the model's vocabulary: 'é'"),
    # the sliders' and dropdown's own bounds (from the model) answer first
    ("/generate", dict(RUN, length=20000), "length: Value 20000 is greater than maximum value 16384"),
    ("/generate", dict(RUN, num_steps=0), "num_steps: Value 0 is less than minimum value 1"),
    ("/generate", dict(RUN, temperature=-1), "temperature: Value -1 is less than minimum value 0"),
    ("/generate", dict(RUN, order="sideways"), "order: Value: sideways is not in the list of choices"),
    ("/generate", dict(RUN, seed=-3, **RULE, fixed_seed=True), "seed must be a whole"),
    ("/generate", dict(RUN, prompt="x" * 16384), "the prompt has 16,384 characters, but a run"),
    ("/compare", dict(RACE, prompt="x" * 128), "the prompt has 128 characters, but a run holds at most 128"),
    ("/generate", dict(RUN, order_temperature=-1), "order_temperature: Value -1 is less than minimum value 0"),
    ("/generate", dict(RUN, **dict(RULE, remask_ratio=0.99)), "remask_ratio: Value 0.99 is greater than"),
    (
        "/generate",
        dict(RUN, **dict(RULE, prior_weight=-1, remask_ratio=0.5)),
        "prior_weight: Value -1 is less than minimum",
    ),
    ("/infill", FILL, "template is empty"),
    ("/infill", dict(FILL, template="To be or not to be"), "template has no blank"),
    (
        "/infill",
        dict(FILL, template="_" * 16385),
        "the template has 16,385 characters, but a run writes at most 16,384 characters",
    ),
    (
        "/forward_process",
        dict(line="x" * 200, t=0.5, seed=0),
        "the line has 200 characters, but the model's context is 128",
    ),
    (
        "/compare",
        dict(RACE, length=40, num_steps=8, temperature=-0.5),
        "temperature: Value -0.5 is less than minimum value 0",
    ),
    ("/forward_process", dict(line="Shall I compare thee é", t=0.5, seed=0), "outside the model's vocabulary: 'é'"),
]


@pytest.mark.parametrize("endpoint,args,message", BAD_INPUTS)
def test_bad_input_is_a_visible_error_and_the_app_keeps_serving(client, endpoint, args, message):
    with pytest.raises(Exception) as error:  # gradio_client's AppError carries the gr.Error message
        client.predict(**args, api_name=endpoint)
    assert message in str(error.value) and "block_size" not in str(error.value)
    assert (
        len(
            client.predict(
                prompt="",
                length=10,
                num_steps=2,
                temperature=0.8,
                top_p=1.0,
                order="confidence",
                seed=0,
                block_length=0,
                end_at="length",
                api_name="/generate_page",
            )[1]
        )
        == 10
    )


@pytest.mark.parametrize(
    ("endpoint", "kwargs", "message"),
    [
        ("/generate", dict(prompt="", length=20.5), "length must be a whole number between 0 and 16384, got 20.5"),
        ("/generate", dict(prompt="", length=20, seed=1.5, fixed_seed=True), "seed must be a whole number"),
        ("/generate", dict(prompt="", length=20, num_steps=4.5), "num_steps must be an integer >= 1, got 4.5"),
        ("/generate", dict(prompt="", length=20, spacing=2.5), "spacing must be an integer >= 0, got 2.5"),
        ("/compare", dict(prompt="", length=20, num_steps=3.5), "num_steps must be an integer >= 1, got 3.5"),
    ],
)
def test_a_fraction_where_a_whole_number_belongs_is_refused_not_rounded(client, endpoint, kwargs, message):
    # the sliders and the seed box rounded 1.5 to 2 before the handler saw it
    with pytest.raises(Exception, match=message):
        client.predict(**kwargs, api_name=endpoint)
    _, text, readout, seed = client.predict(
        prompt="", length=20.0, num_steps=4.0, seed=3.0, fixed_seed=True, end_at="length", api_name="/generate_page"
    )
    assert len(text) == 20 and seed == 3 and "done in 4 steps" in readout  # whole numbers sent as floats are fine


# inf and "1e999" (infinite once read) crashed every endpoint with a seed: OverflowError, not a line naming it
@pytest.mark.parametrize("value", [float("nan"), "abc", None, 2.5, -1, float("inf"), float("-inf"), "1e999"])
def test_number_checks_name_the_problem(value):
    with pytest.raises(gr.Error, match="seed must be"):
        checks.as_int(value, "seed", 0, 10)
    with pytest.raises(gr.Error, match="top-p must be"):
        checks.as_float(value if value != 2.5 else 1.5, "top-p", 0.0, 1.0)


def test_a_boolean_is_not_a_number_to_the_checks():
    for value in (True, False):
        with pytest.raises(gr.Error, match=f"seed must be a number, got {value}"):
            checks.as_int(value, "seed", 0, 10)
        with pytest.raises(gr.Error, match=f"mask ratio must be a number, got {value}"):
            checks.as_float(value, "mask ratio", 0.0, 1.0)
        for component in (gr.Slider(0, 10), gr.Number()):
            with pytest.raises(gr.Error, match=f"length must be a number, got {value}"):
                endpoints.preprocessed(component, "length", value)
    assert endpoints.preprocessed(gr.Checkbox(), "fixed_seed", True) is True  # a checkbox's value is a bool


@pytest.mark.parametrize(
    ("endpoint", "kwargs", "message"),
    [
        ("/generate", dict(prompt="", length=True), "length must be a number, got True"),
        ("/generate", dict(prompt="", length=20, num_steps=True), "num_steps must be a number, got True"),
        ("/generate", dict(prompt="", length=20, seed=True, fixed_seed=True), "seed must be a number, got True"),
        ("/forward_process", dict(line="to be", t=True, seed=0), "t must be a number, got True"),
        ("/forward_process", dict(line="to be", t=0.5, seed=False), "seed must be a number, got False"),
    ],
)
def test_a_boolean_sent_for_a_number_is_refused_naming_the_parameter(client, endpoint, kwargs, message):
    with pytest.raises(Exception, match=message):
        client.predict(**kwargs, api_name=endpoint)


SHIPPED_VOCAB = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def test_the_vocabulary_is_described_compactly():
    # "writes only 3 A-Z a-z ..." read as a count of characters
    words = "letters A-Z and a-z, the digit 3, the marks ! $ & ' , - . : ; ?, line break and space"
    assert checks.vocabulary_words(SHIPPED_VOCAB) == words
    assert checks.vocabulary_words("abdef_ \t") == "letters a, b and d-f, the mark _, space and tab"
    assert checks.vocabulary_words("0123456789x") == "letter x and the digits 0-9"


@pytest.mark.parametrize(
    "endpoint,kwargs,what",
    [
        ("/generate", dict(prompt="😀" * 130, length=20, num_steps=4), "prompt"),  # too long, but the emoji first
        ("/generate", dict(prompt="ROMEO 😀:\n", length=20, num_steps=4), "prompt"),
        ("/infill", dict(template="😀 __" * 50, num_steps=4), "template"),
        ("/compare", dict(prompt="😀" * 130, length=20, num_steps=4), "prompt"),
        ("/forward_process", dict(line="😀" * 200, t=0.5, seed=0), "line"),
    ],
)
def test_an_unknown_character_is_named_before_any_length_and_the_vocabulary_listed(
    client, model_dir, endpoint, kwargs, what
):
    with pytest.raises(Exception) as error:
        client.predict(**kwargs, api_name=endpoint)
    message = str(error.value)
    model, _ = loading.load_model(model_dir)
    assert f"the {what} has 1 character outside the model's vocabulary: '😀'" in message
    assert f"it writes only {checks.vocabulary_words(model.tokenizer.vocab)}" in message
    assert "characters at a time" not in message and "context" not in message and "\n" not in message


def test_length_zero_is_one_clear_message_and_generates_nothing(client, model_dir, monkeypatch):
    for endpoint in ("/generate", "/compare"):
        with pytest.raises(Exception) as error:
            client.predict(prompt="ROMEO:\n", length=0, num_steps=4, api_name=endpoint)
        assert str(error.value) == "nothing to generate: set at least 1 character to generate", endpoint
    model, _ = loading.load_model(model_dir)
    monkeypatch.setattr(handlers, "sample", lambda *args, **kwargs: pytest.fail("sampled with length 0"))
    run = handlers.generate(model, prompt="ROMEO:\n", length=0, seed=0, fixed_seed=False, num_steps=4)
    with pytest.raises(gr.Error, match="nothing to generate"):
        next(run)
    # the page: a length of 0 typed is not taken (it was, then Generate refused it): the box keeps its value and
    # says so, and 5.5 is set to 5, saying so
    page = Page(app.build_demo(model))
    controls = tab_controls(page.demo, "generate")
    kept = page.value(controls["length"])
    page.type(controls["length"], 0)
    assert page.value(controls["length"]) == kept
    assert page.props[controls["length"]._id]["info"] == f"0 is less than 1, the least here: kept {kept:,}"
    page.type(controls["length"], 5.5)
    assert page.value(controls["length"]) == 5
    assert page.props[controls["length"]._id]["info"] == "5.5 is not a whole number: set to 5"


WRONG_TYPES = [
    ("/generate", dict(prompt="", length="abc"), "length must be a number, got 'abc'"),
    ("/generate", dict(prompt="", length=20, num_steps="abc"), "num_steps must be a number, got 'abc'"),
    ("/generate", dict(prompt="", length=20, temperature="hot"), "temperature must be a number, got 'hot'"),
    ("/generate", dict(prompt=None, length=20), "prompt must be a string, got nothing"),
    ("/generate", dict(prompt="", length=20, fixed_seed="yes"), "fixed_seed must be true or false, got 'yes'"),
    ("/generate", dict(prompt="", length=20, seed="x", fixed_seed=True), "seed must be a number, got 'x'"),
    ("/infill", dict(template=None), "template must be a string, got nothing"),
    ("/infill", dict(template="to __", num_steps=[2]), "num_steps must be a number, got [2]"),
    ("/compare", dict(prompt="", length="x"), "length must be a number, got 'x'"),
    ("/compare", dict(prompt="", length=20, autoregressive="no"), "autoregressive must be true or false, got 'no'"),
    ("/forward_process", dict(line=None, t=0.5, seed=0), "line must be a string, got nothing"),
    ("/forward_process", dict(line="abc", t="x", seed=0), "t must be a number, got 'x'"),
]


@pytest.mark.parametrize("endpoint,kwargs,message", WRONG_TYPES)
def test_a_payload_of_the_wrong_type_is_one_line_naming_the_field(client, endpoint, kwargs, message):
    with pytest.raises(Exception) as error:
        client.predict(**kwargs, api_name=endpoint)
    assert str(error.value) == message and "verbose error reporting" not in str(error.value)


def test_handlers_name_a_field_of_the_wrong_type(model_dir):
    model, _ = loading.load_model(model_dir)
    with pytest.raises(ValueError, match="^prompt must be a string, got nothing$"):
        next(handlers.generate(model, prompt=None, length=10, seed=0, fixed_seed=False))
    with pytest.raises(ValueError, match="^template must be a string, got nothing$"):
        next(handlers.infill(model, template=None, seed=0, fixed_seed=False))
    with pytest.raises(ValueError, match="^prompt must be a string"):
        next(race.compare(model, None, None, 10, 4, 1.0, 0, False, False))
    with pytest.raises(ValueError, match="^line must be a string"):
        handlers.forward_process(model, None, 0.5, 0)
    with pytest.raises(ValueError, match="fixed_seed must be true or false"):
        next(handlers.generate(model, prompt="", length=10, seed=0, fixed_seed="yes"))


def test_a_users_mistake_logs_no_traceback(client, capfd):
    # steps 999 and 26 other ordinary mistakes each printed a traceback in the server's log
    capfd.readouterr()
    from gradio_client.exceptions import AppError

    for kwargs in (dict(num_steps=999), dict(length=0), dict(prompt="é"), dict(order="sideways")):
        with pytest.raises(AppError):
            client.predict(**{"prompt": "", "length": 20, **kwargs}, api_name="/generate_page")
    with pytest.raises(AppError, match="template has no blank"):
        client.predict(template="to be", api_name="/infill_page")
    assert "Traceback" not in capfd.readouterr().err


def test_an_unexpected_failure_reaches_the_caller_as_one_line_naming_it(client, monkeypatch):
    # a RuntimeError in the sampler (infill across the context) reached an API caller as {"error": null}
    def failing_sample(*args, **kwargs):
        raise RuntimeError("the sampler broke")
        yield

    monkeypatch.setattr(handlers, "sample", failing_sample)
    with pytest.raises(Exception) as error:
        client.predict(**dict(FILL, template="To be, or ___ to be"), api_name="/infill")
    assert "the app failed on this input (RuntimeError: the sampler broke)" in str(error.value)
