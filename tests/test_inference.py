"""Defects of the inference paths: training mode restored on error, and bad token tensors named."""

import pytest
import torch

import mdlm_hf
from mdlm_hf import MDLM, CharTokenizer, SamplerOptions, elbo, sample
from mdlm_hf.diffusion import accuracy_by_mask_ratio
from mdlm_hf.inference import evaluating
from mdlm_hf.likelihood import char_nll, exact_nll
from mdlm_hf.sampling.state import final_state


def ids(model, text="to be or not to be"):
    return torch.tensor(model.tokenizer.encode(text))


class Broken(RuntimeError):
    pass


INFERENCE_PATHS = {
    "elbo": lambda m, x: elbo(m, x),
    "exact_nll": lambda m, x: exact_nll(m, x),
    "char_nll": lambda m, x: char_nll(m, x),
    "accuracy_by_mask_ratio": lambda m, x: accuracy_by_mask_ratio(m, x, num_windows=2),
    "sample": lambda m, x: final_state(sample(m, torch.full((8,), m.mask_id), seed=0)),
}


@pytest.mark.parametrize("path", INFERENCE_PATHS)
def test_an_error_inside_an_inference_call_leaves_the_model_training(tiny_model, path, monkeypatch):
    # formerly: each path switched to eval mode and back without try/finally (accuracy never switched back)
    tiny_model.train()
    try:

        def fail(*args, **kwargs):
            raise Broken("the forward pass failed")

        monkeypatch.setattr(tiny_model, "forward", fail)
        with pytest.raises(Broken):
            INFERENCE_PATHS[path](tiny_model, ids(tiny_model))
        assert tiny_model.training
        monkeypatch.undo()
        INFERENCE_PATHS[path](tiny_model, ids(tiny_model))  # and after a good call, too
        assert tiny_model.training
    finally:
        tiny_model.eval()


def test_evaluating_restores_the_mode_it_found(tiny_model):
    for mode in (True, False):
        tiny_model.train(mode)
        with pytest.raises(Broken), evaluating(tiny_model):
            assert not tiny_model.training
            raise Broken
        assert tiny_model.training is mode
    tiny_model.eval()


@pytest.mark.parametrize("batch_size", [-1, 0, 1.5, True, "8"])
def test_a_batch_size_below_one_or_not_an_integer_is_refused(tiny_model, batch_size):
    # formerly: -1 returned 0.0 nats; 0 failed inside range()
    for score in (elbo, exact_nll):
        with pytest.raises(ValueError, match=f"batch_size must be an integer >= 1, got {batch_size!r}"):
            score(tiny_model, ids(tiny_model), batch_size=batch_size)


def test_scoring_text_that_holds_the_mask_id_is_refused(tiny_model):
    # formerly: the mask id gave nan (elbo) or inf (exact_nll)
    tokens = ids(tiny_model)
    tokens[3] = tiny_model.mask_id
    for score in (elbo, exact_nll, char_nll):
        with pytest.raises(ValueError, match=f"tokens hold the mask id \\({tiny_model.mask_id}\\), which is no"):
            score(tiny_model, tokens)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda m, x: x.float(), "tokens must hold integer token ids \\(torch.long\\), got dtype torch.float32"),
        (
            lambda m, x: x[None, None],
            "tokens must be a non-empty \\(T,\\) tensor of token ids, got shape \\(1, 1, 18\\)",
        ),
        (lambda m, x: x[:0], "tokens must be a non-empty \\(T,\\) tensor"),
        (lambda m, x: x + 100, "the ids of tokens must lie in \\[0, 22\\], got ids from 10"),
        (lambda m, x: x - 5, "the ids of tokens must lie in \\[0, 22\\], got ids from -"),
        (lambda m, x: x.to("meta"), "tokens are on meta but the model is on cpu: move them with .to\\('cpu'\\)"),
        (lambda m, x: x.tolist(), "tokens must be a torch.Tensor of token ids, got list"),
    ],
)
def test_bad_token_tensors_are_one_clear_error(tiny_model, make, message):
    # formerly: wrong dtype, rank, ids or device failed deep inside torch
    for score in (elbo, exact_nll, char_nll, accuracy_by_mask_ratio):
        with pytest.raises(ValueError, match=message):
            score(tiny_model, make(tiny_model, ids(tiny_model)))


def test_the_forward_pass_names_a_bad_canvas(tiny_model):
    canvas = ids(tiny_model)[None]
    with pytest.raises(ValueError, match="must hold integer token ids"):
        tiny_model(canvas.float())
    with pytest.raises(ValueError, match="must be a non-empty \\(B, T\\) tensor"):
        tiny_model(canvas[0])
    with pytest.raises(ValueError, match="tokens are on meta but the model is on cpu"):
        tiny_model(canvas.to("meta"))
    assert tiny_model(canvas.int()).shape == (1, 18, tiny_model.vocab_size)  # int32 ids are ids too


@pytest.mark.parametrize("name", ["temperature", "min_p", "top_p", "order_temperature", "prior_weight", "remask_ratio"])
def test_a_boolean_is_not_a_number_for_a_float_option(name):
    # formerly: True passed as 1.0
    with pytest.raises(ValueError, match=f"{name} must be .*, got True"):
        SamplerOptions(**{name: True})


def test_the_mask_glyph_is_not_a_character_of_a_vocabulary():
    # formerly: "█" was accepted, and then a decoded text could not tell it from a mask
    with pytest.raises(ValueError, match="vocab must not hold '█'"):
        CharTokenizer("ab█")
    with pytest.raises(ValueError, match="vocab must not hold '█'"):
        MDLM("ab█", n_layer=1, n_head=2, n_embd=16, block_size=16)


# each module-level function that takes the model first: a call with `first` first, and what a swap puts there
MODEL_FIRST = {
    "sample": (lambda first, m: mdlm_hf.sample(first, torch.full((8,), m.mask_id)), torch.zeros(8)),
    "infill": (lambda first, m: mdlm_hf.infill(first, m), "ab__"),
    "complete": (lambda first, m: mdlm_hf.complete(first, m, 5), "to"),
    "rewrite": (lambda first, m: mdlm_hf.rewrite(first, m, 0, 2), "to be"),
    "stream_rewrite": (lambda first, m: mdlm_hf.stream_rewrite(first, m, 0, 2), "to be"),
    "span_bits_per_char": (lambda first, m: mdlm_hf.span_bits_per_char(first, m, 0, 2), "to be"),
    "elbo": (lambda first, m: mdlm_hf.elbo(first, m), torch.zeros(8)),
    "diffusion_loss": (lambda first, m: mdlm_hf.diffusion_loss(first, m, torch.Generator()), torch.zeros(1, 8)),
}


@pytest.mark.parametrize("name", MODEL_FIRST)
def test_a_module_function_given_no_model_first_says_so_naming_the_type(tiny_model, name):
    assert name in mdlm_hf.__all__
    call, swapped = MODEL_FIRST[name]
    got = type(swapped).__name__
    with pytest.raises(TypeError, match=f"^{name} takes the model first: {name}\\(model, .*\\), got a {got}$"):
        call(swapped, tiny_model)
    with pytest.raises(TypeError, match=f"^{name} takes the model first: .*, got None$"):
        call(None, tiny_model)


def test_messages_name_the_type_of_a_model_or_tensor_never_its_repr(tiny_model):
    canvas = torch.full((8,), tiny_model.mask_id)
    calls = [
        lambda: tiny_model.complete(tiny_model, 5),
        lambda: sample(tiny_model, canvas, tiny_model),
        lambda: sample(tiny_model, canvas, generator=canvas),
        lambda: sample(tiny_model, canvas, seed=tiny_model),
        lambda: SamplerOptions(temperature=canvas),
        lambda: elbo(tiny_model, ids(tiny_model), num_samples=canvas),
        lambda: elbo(tiny_model, ids(tiny_model), generator=tiny_model),
    ]
    for call in calls:
        with pytest.raises((TypeError, ValueError)) as refused:
            call()
        message = str(refused.value)
        assert "\n" not in message and "tensor(" not in message and "MDLM(" not in message, message
        assert "got MDLM" in message or "got Tensor" in message, message


def test_a_model_on_meta_is_one_line_not_torchs_error(tiny_model):
    # m.to("meta"); m.generate(length=16) raised "Tensor.item() cannot be called on meta tensors"
    tiny_model.to("meta")
    with pytest.raises(ValueError, match="weights are on meta"):
        tiny_model.generate(length=16)
