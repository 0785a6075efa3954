"""The autoregressive twin: MDLM(objective="ar"), its loss, exact NLL, cached writing, loading, training and errors."""

import json
import math

import pytest
import torch

from mdlm_hf import MDLM, CharTokenizer, SamplerOptions, diffusion_loss, elbo, sample
from mdlm_hf.autoregressive import autoregressive_loss, char_nats, left_to_right_defaults, shifted
from mdlm_hf.diffusion import accuracy_by_mask_ratio
from mdlm_hf.likelihood import char_nll, exact_nll, surprise_steps
from mdlm_hf.objectives import AUTOREGRESSIVE
from mdlm_hf.sampling.drawing import draw_tokens
from mdlm_hf.sampling.state import final_state
from tests.conftest import TINY_TEXT


@pytest.fixture
def twin() -> MDLM:
    """A randomly initialised causal model with weights large enough that every character's logits differ."""
    torch.manual_seed(0)
    model = MDLM(
        CharTokenizer.from_text(TINY_TEXT).vocab, n_layer=2, n_head=2, n_embd=32, block_size=32, objective="ar"
    )
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.2)
    return model.eval()


def uncached_writing(model: MDLM, prompt: list[int], length: int, options: SamplerOptions, seed: int) -> list[int]:
    """The reference writer: every character drawn from a full pass over its context window, no cache; the window
    starts where the cached writer's does (its context, then three quarters of it once full)."""
    generator = torch.Generator().manual_seed(seed)
    L, text, window_start = model.block_size, list(prompt), None
    for i in range(len(prompt), len(prompt) + length):
        if window_start is None or i - window_start == L:
            window_start = max(0, i - (L - 1)) if window_start is None else i - L * 3 // 4
        reading = torch.tensor([[model.mask_id] + text[window_start:i]])
        logits = model(reading)[:, -1:].float()
        text.append(int(draw_tokens(logits, options, generator)[0, 0]))
    return text


def test_a_position_never_sees_the_characters_after_it(twin):
    tokens = torch.randint(0, twin.mask_id, (2, 32))
    changed = tokens.clone()
    changed[:, 20] = (changed[:, 20] + 1) % twin.mask_id
    before, after = (twin(shifted(t, twin.mask_id))[..., :-1] for t in (tokens, changed))
    assert torch.equal(before[:, :21], after[:, :21])  # the input at 21 is the character at 20
    assert not torch.equal(before[:, 21:], after[:, 21:])


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_cached_writing_equals_writing_without_a_cache_past_the_context(twin, temperature):
    prompt = twin.tokenizer.encode("to be ")
    options = left_to_right_defaults().replace(temperature=temperature)
    canvas = torch.tensor(prompt + [twin.mask_id] * 90)  # three times the context: two re-reads
    state = final_state(sample(twin, canvas, options, seed=3))
    assert state.tokens[0].tolist() == uncached_writing(twin, prompt, 90, options, seed=3)
    assert state.num_forward_passes == state.num_steps == 90 and state.done


def test_each_state_writes_the_next_character_and_marks_the_window(twin):
    states = list(twin.stream("to" + "_" * 40))
    assert [s.step for s in states] == list(range(41))
    for before, after in zip(states, states[1:], strict=False):
        assert int(after.revealed.sum()) == 1 and int(after.revealed[0].nonzero()) == 2 + before.step
        assert after.window[1] == 2 + after.step and after.window[1] - after.window[0] <= twin.block_size


def test_a_batch_writes_rows_of_their_own(twin):
    canvas = torch.full((3, 20), twin.mask_id)
    state = final_state(sample(twin, canvas, seed=0))
    assert state.done and len({tuple(row) for row in state.tokens.tolist()}) == 3


def test_the_loss_and_the_exact_nll_are_the_same_number(twin):
    tokens = torch.tensor(twin.tokenizer.encode(TINY_TEXT[:64]))
    nats = char_nats(twin, tokens)
    assert nats.shape == (64,) and torch.isfinite(nats).all()
    by_loss = autoregressive_loss(twin, tokens.view(2, 32)).item()
    assert math.isclose(nats.mean().item(), by_loss, rel_tol=1e-5)
    assert math.isclose(exact_nll(twin, tokens), by_loss, rel_tol=1e-5)
    assert torch.allclose(char_nll(twin, tokens[:32]), nats[:32], atol=1e-5)
    with_context = list(surprise_steps(twin, tokens, context=8))[-1]
    assert torch.allclose(with_context[:32], nats[:32], atol=1e-5)  # the first window is the same
    assert not torch.allclose(with_context[32:], nats[32:])  # later ones read 8 characters before


def test_windows_side_by_side_score_a_short_last_window_from_its_start(twin):
    # as exact_nll cuts them: 40 characters are a window of 32 and one of 8, each read from its first character
    tokens = torch.tensor(twin.tokenizer.encode(TINY_TEXT[:40]))
    nats = char_nats(twin, tokens)
    assert torch.allclose(nats[32:], char_nats(twin, tokens[32:]), atol=1e-6)
    assert torch.allclose(nats[:32], char_nats(twin, tokens[:32]), atol=1e-6)


def test_the_twin_loads_with_from_pretrained_and_says_what_it_is(twin, tmp_path):
    twin.save_pretrained(tmp_path / "twin")
    assert json.loads((tmp_path / "twin" / "config.json").read_text())["objective"] == "ar"
    loaded = MDLM.from_pretrained(tmp_path / "twin", fast=False)
    tokens = torch.randint(0, twin.mask_id, (1, 32))
    assert loaded.objective is AUTOREGRESSIVE and torch.equal(loaded(tokens), twin(tokens))
    card = (tmp_path / "twin" / "README.md").read_text()
    assert "autoregressive twin" in card and "- autoregressive" in card and "masked-diffusion" not in card


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda m: m.infill("to __ or not"), "writes left to right only: it continues a prompt"),
        (lambda m: m.generate(10, order="streams"), "order must be 'left_to_right', got 'streams'"),
        (lambda m: m.generate(10, options=SamplerOptions()), "order must be 'left_to_right', got 'word_streams'"),
        (lambda m: m.generate(10, remask_ratio=0.5), "remask_ratio does not apply to it"),
        (lambda m: m.generate(10, block_length=4), "block_length does not apply to it"),
        (lambda m: m.generate(10, num_steps=8), "one character a pass: num_steps does not apply to it"),
        (lambda m: m.generate(300, window_context=32), "window_context does not apply to it"),
        (lambda m: sample(m, torch.tensor([[1, 2, m.mask_id], [1, m.mask_id, m.mask_id]])), "end at the same column"),
        (lambda m: diffusion_loss(m, torch.ones(1, 8, dtype=torch.long), torch.Generator()), "fills no blanks"),
        (lambda m: accuracy_by_mask_ratio(m, torch.ones(64, dtype=torch.long)), "fills no blanks"),
        (lambda m: elbo(m, torch.tensor([1, 2, 3])), "the ELBO is a diffusion model.s.*mdlm_hf.likelihood"),
        (lambda m: exact_nll(m, torch.tensor([1, 2, 3]), order="confidence"), "reads left to right only"),
    ],
)
def test_what_a_twin_cannot_do_is_one_line(twin, call, words):
    with pytest.raises(ValueError, match=words):
        call(twin)


def test_a_diffusion_model_refuses_a_cache_and_a_twin_reads_one_position_after_one(tiny_model, twin):
    from mdlm_hf.network import KVCache

    with pytest.raises(ValueError, match="cache must be a KVCache or None, got Tensor"):
        tiny_model(torch.zeros(1, 4, dtype=torch.long), torch.tensor([0.5]))  # a mask ratio: the model reads none
    with pytest.raises(ValueError, match="a KVCache is for a causal pass"):
        tiny_model(torch.zeros(1, 4, dtype=torch.long), KVCache(2))
    cache = KVCache(2)
    twin(torch.zeros(1, 4, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="after a cached prefix a causal pass reads one position at a time"):
        twin(torch.zeros(1, 2, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="causal must be true or false"):
        MDLM("ab", causal="yes")


def test_the_training_script_trains_and_exports_a_twin(tmp_path, tiny_text, capsys):
    from training import train

    text = tmp_path / "text.txt"
    text.write_text(tiny_text * 3)
    tiny = "--n-layer 1 --n-head 2 --n-embd 32 --block-size 32 --batch-size 4 --warmup-steps 2 --eval-interval 3"
    flags = [*tiny.split(), "--eval-chars", "256", "--dtype", "float32", "--threads", "1", "--objective", "ar"]
    summary = train.main(["--data", str(text), "--out-dir", str(tmp_path / "run"), *flags, "--max-steps", "6"])
    assert summary["finished"] and summary["model"].objective is AUTOREGRESSIVE
    assert "val NLL" in capsys.readouterr().out
    resumed = train.main(["--data", str(text), "--out-dir", str(tmp_path / "run"), "--resume", "--max-steps", "8"])
    assert resumed["step"] == 8 and resumed["model"].objective is AUTOREGRESSIVE

    from training import export

    export.export_run(tmp_path / "run", tmp_path / "export", text, weights_dtype="float32")
    loaded = MDLM.from_pretrained(tmp_path / "export")
    metrics = json.loads((tmp_path / "export" / "metrics.json").read_text())
    card = (tmp_path / "export" / "README.md").read_text()
    assert loaded.objective is AUTOREGRESSIVE and f"**{metrics['val_nll_nats_per_char']:.4f} nats/char**" in card
    assert "accuracy" not in card and not (tmp_path / "export" / "accuracy_vs_mask_ratio.png").exists()
    assert "objective=ar" in card and "loss_weighting" not in card  # the diffusion loss's settings did nothing
    from training import evaluate

    capsys.readouterr()
    with pytest.raises(SystemExit):  # its score draws no masks
        evaluate.main(["--model", str(tmp_path / "export"), "--data", str(text), "--num-samples", "2"])
    assert "--num-samples draws masks for the ELBO; the NLL of the autoregressive twin" in capsys.readouterr().err


def test_a_resume_keeps_the_runs_objective(tmp_path, tiny_text):
    from training import train

    text = tmp_path / "text.txt"
    text.write_text(tiny_text * 3)
    tiny = "--n-layer 1 --n-head 2 --n-embd 32 --block-size 32 --batch-size 4 --warmup-steps 1 --eval-interval 2"
    run = ["--data", str(text), "--out-dir", str(tmp_path / "run")]
    train.main([*run, *tiny.split(), "--eval-chars", "256", "--dtype", "float32", "--max-steps", "2"])
    checkpoint = torch.load(tmp_path / "run" / "ckpt.pt", weights_only=False)
    del checkpoint["args"]["objective"]  # as a checkpoint from before the flag
    torch.save(checkpoint, tmp_path / "run" / "ckpt.pt")
    with pytest.raises(ValueError, match="--objective ar \\(the run has diffusion\\)"):
        train.main([*run, "--resume", "--objective", "ar", "--max-steps", "3"])


def test_diffusion_flags_are_refused_for_an_autoregressive_run(capsys):
    from training import train

    with pytest.raises(SystemExit):
        train.parse_args(["--objective", "ar", "--loss-weighting", "elbo"])
    assert "--loss-weighting is not an option of --objective ar: the autoregressive twin" in capsys.readouterr().err


def test_the_command_line_writes_with_a_twin_and_refuses_its_template(twin, tmp_path, capsys):
    from mdlm_hf.__main__ import main

    twin.save_pretrained(tmp_path / "twin")
    main(["--model", str(tmp_path / "twin"), "--prompt", "to be", "--length", "20", "--seed", "0"])
    written = capsys.readouterr().out
    assert written.startswith("to be") and len(written) == len("to be") + 20 + 1  # print's newline
    with pytest.raises(SystemExit, match="an autoregressive model writes left to right only: it continues a prompt"):
        main(["--model", str(tmp_path / "twin"), "--template", "to __ or not"])
    with pytest.raises(SystemExit, match="order must be 'left_to_right', got 'entropy'"):
        main(["--model", str(tmp_path / "twin"), "--order", "entropy"])


def test_the_fast_path_decides_for_a_twin_on_its_own_work(twin, monkeypatch):
    # a full pass (the diffusion model's work) and one-position cached passes (the twin's) favour different dtypes
    from mdlm_hf import fast

    config = {k: getattr(twin, k) for k in ("block_size",)}
    diffusion = MDLM(twin.tokenizer.vocab, n_layer=2, n_head=2, n_embd=32, **config)
    assert fast.shape_key(diffusion) != fast.shape_key(twin)
    calls = []
    monkeypatch.setattr(twin, "forward", lambda tokens, cache=None: calls.append(tokens.shape))
    fast._time_pass(twin, torch.zeros(1, 32, dtype=torch.long))
    assert calls == [(1, 1)] * fast.DECODE_TIMED
