import math
import time

import pytest
import torch

from mdlm_hf import MDLM, CharTokenizer, diffusion_loss, elbo, mask_tokens, sample_times
from mdlm_hf.diffusion import NLL_ORDERS, accuracy_by_mask_ratio
from mdlm_hf.likelihood import exact_nll, surprise_steps
from tests.stubs import StubModel


class UniformModel(StubModel):
    """Puts equal probability on every non-mask character, whatever the canvas."""

    def forward(self, tokens):
        return self.logits_from(torch.full((*tokens.shape, self.vocab_size), 1.0 / (self.vocab_size - 1)))


def test_sample_times_are_stratified():
    t = sample_times(8, torch.Generator().manual_seed(0), t_min=0.0)
    strata = (t * 8).floor().sort().values
    assert torch.equal(strata, torch.arange(8.0))  # one t in each eighth of [0, 1)


def test_mask_tokens_rate_and_values():
    tokens = torch.zeros(4, 10_000, dtype=torch.long)
    t = torch.tensor([0.0, 0.25, 0.5, 1.0])
    noisy, is_masked = mask_tokens(tokens, t, mask_id=7, generator=torch.Generator().manual_seed(0))
    assert torch.equal(noisy == 7, is_masked)
    rates = is_masked.float().mean(dim=1)
    assert torch.allclose(rates, t, atol=0.02)


def test_uniform_model_elbo_is_log_v_minus_one():
    vocab_size = 40
    model = UniformModel(vocab_size)
    tokens = torch.randint(0, vocab_size - 1, (5000,), generator=torch.Generator().manual_seed(0))
    result = elbo(model, tokens, num_samples=4, generator=torch.Generator().manual_seed(1))
    assert result.nats_per_char == pytest.approx(math.log(vocab_size - 1), rel=0.01)
    assert result.bits_per_char == pytest.approx(math.log2(vocab_size - 1), rel=0.01)


def test_training_loss_estimates_the_bound():
    vocab_size = 40
    model = UniformModel(vocab_size)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, vocab_size - 1, (64, 64), generator=generator)
    losses = [diffusion_loss(model, tokens, generator, weighting="elbo").item() for _ in range(100)]
    assert sum(losses) / len(losses) == pytest.approx(math.log(vocab_size - 1), rel=0.03)


class MaskShareModel(StubModel):
    """Gives the true character (always 0) probability 1 - 0.9 x the share of its window that is masked, so a
    draw's cross-entropy depends on its mask count alone, from 0 (no masks) to log 10 (all): as a real model's."""

    def forward(self, tokens):
        share = (tokens == self.mask_id).float().mean(dim=1, keepdim=True)  # (B, 1)
        right = (1 - 0.9 * share)[..., None].expand(*tokens.shape, 1)  # (B, T, 1)
        wrong = ((1 - right) / (self.vocab_size - 2)).expand(*tokens.shape, self.vocab_size - 1)
        return self.logits_from(torch.cat([right, wrong], dim=-1))


def test_elbo_stratifies_the_mask_count_over_the_windows():
    """At 2 draws a window, the estimate on 64 windows is within 0.01 of the exact integral for every seed: strata
    within a window alone missed it by about 0.05 (a real model's ELBO moved 0.1 nats between seeds)."""
    model, L = MaskShareModel(vocab_size=12, block_size=64), 64
    exact = sum(-math.log(1 - 0.9 * m / L) for m in range(1, L + 1)) / L
    tokens = torch.zeros(64 * L, dtype=torch.long)
    for seed in range(5):
        estimate = elbo(model, tokens, num_samples=2, generator=torch.Generator().manual_seed(seed)).nats_per_char
        assert estimate == pytest.approx(exact, abs=0.01)


def test_elbo_is_deterministic_for_a_generator(tiny_model):
    tokens = torch.randint(0, tiny_model.mask_id, (300,), generator=torch.Generator().manual_seed(0))
    first = elbo(tiny_model, tokens, 2, torch.Generator().manual_seed(5)).nats_per_char
    second = elbo(tiny_model, tokens, 2, torch.Generator().manual_seed(5)).nats_per_char
    other = elbo(tiny_model, tokens, 2, torch.Generator().manual_seed(6)).nats_per_char
    assert first == second != other


def test_bad_loss_arguments(tiny_model):
    tokens = torch.zeros(2, 8, dtype=torch.long)
    with pytest.raises(ValueError, match="weighting"):
        diffusion_loss(tiny_model, tokens, torch.Generator(), weighting="snr")
    with pytest.raises(ValueError, match="num_samples"):
        elbo(tiny_model, tokens[0], num_samples=0)


@pytest.mark.parametrize(
    ("call", "says"),
    [
        # each was a RuntimeError or TypeError from torch, or (t_min 2, ratio 2) numbers that mean nothing
        (lambda m, x: sample_times(-1, torch.Generator()), "batch_size must be an integer >= 1, got -1"),
        (lambda m, x: sample_times(4, torch.Generator(), t_min=2), "t_min must be a number in \\[0, 1\\), got 2"),
        (lambda m, x: sample_times(4, torch.Generator(), t_min=math.nan), "t_min must be a number in"),
        (lambda m, x: elbo(m, x, generator=5), "generator must be a torch.Generator or None, got 5"),
        (lambda m, x: accuracy_by_mask_ratio(m, x, num_windows=0), "num_windows must be an integer >= 1, got 0"),
        (lambda m, x: accuracy_by_mask_ratio(m, x, ratios=(0.5, 2.0)), "mask ratios must be numbers in \\(0, 1\\]"),
        (lambda m, x: accuracy_by_mask_ratio(m, x, ratios=(math.nan,)), "mask ratios must be numbers in"),
        (lambda m, x: MDLM.from_pretrained(None), "pass a local directory or a Hub repo id as a string or path"),
        (lambda m, x: MDLM.from_pretrained(5), "pass a local directory or a Hub repo id as a string or path, got 5"),
        (lambda m, x: accuracy_by_mask_ratio(m, x, seed=1.5), "seed must be an integer in \\[0, 2\\*\\*63\\), got 1.5"),
        (lambda m, x: accuracy_by_mask_ratio(m, x, seed=True), "seed must be an integer in \\[0, 2\\*\\*63\\)"),
        (lambda m, x: accuracy_by_mask_ratio(m, x, ratios=None), "ratios must be a non-empty tuple or list of mask"),
        (lambda m, x: accuracy_by_mask_ratio(m, x, ratios=0.5), "ratios must be a non-empty tuple or list of mask"),
        (lambda m, x: accuracy_by_mask_ratio(m, x, ratios=()), "ratios must be a non-empty tuple or list of mask"),
        (lambda m, x: accuracy_by_mask_ratio(m, x, num_windows=10**9), "num_windows must be at most 10,000"),
        (lambda m, x: accuracy_by_mask_ratio(m, x, num_windows=True), "num_windows must be an integer >= 1"),
        (lambda m, x: elbo(m, x, num_samples=10**8), "num_samples must be at most 10,000 \\(each"),
        (lambda m, x: elbo(m, x, num_samples=2.0), "num_samples must be an integer >= 1, got 2.0"),
        (lambda m, x: next(surprise_steps(m, x, context="3")), "context must be in \\[0, block_size\\).*got '3'"),
        (lambda m, x: next(surprise_steps(m, x, context=True)), "context must be in \\[0, block_size\\).*got True"),
        (lambda m, x: next(surprise_steps(m, x, context=1.5)), "context must be in \\[0, block_size\\).*got 1.5"),
        (lambda m, x: next(surprise_steps(m, x, fast="no")), "fast must be True or False, got 'no'"),
        (lambda m, x: exact_nll(m, x, progress=1), "progress must be True or False, got 1"),
        (lambda m, x: sample_times(4, 5), "generator must be a torch.Generator, got int"),
        (lambda m, x: sample_times(4, torch.Generator(), t_min=False), "t_min must be a number in \\[0, 1\\)"),
        (lambda m, x: diffusion_loss(m, x[None], torch.Generator(), weighting="elbo_count"), "weighting must be one"),
    ],
)
def test_bad_arguments_of_the_public_functions_are_one_line(tiny_model, call, says):
    tokens = torch.tensor(tiny_model.tokenizer.encode("to be or not\n" * 10))
    began = time.monotonic()
    with pytest.raises(ValueError, match=says) as refused:
        call(tiny_model, tokens)
    assert "\n" not in str(refused.value) and time.monotonic() - began < 5  # refused before any work


@pytest.mark.slow  # several seconds: CI runs it
def test_training_on_deterministic_text_drives_elbo_toward_zero():
    # the only uncertainty is the phase of the period-8 pattern: log(8) / 32 = 0.065 nats/char per window
    text = "abcdefgh" * 128
    torch.manual_seed(0)
    model = MDLM(CharTokenizer.from_text(text).vocab, n_layer=2, n_head=2, n_embd=64, block_size=32)
    data = torch.tensor(model.tokenizer.encode(text))
    generator = torch.Generator().manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    before = elbo(model, data, 2, torch.Generator().manual_seed(0)).nats_per_char
    for _ in range(400):
        starts = torch.randint(0, len(data) - 32, (32,), generator=generator)
        batch = torch.stack([data[s : s + 32] for s in starts])
        loss = diffusion_loss(model, batch, generator)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    after = elbo(model, data, 2, torch.Generator().manual_seed(0)).nats_per_char
    assert before > 1.5 and after < 0.25  # from log(8) = 2.08 towards the 0.065 floor


@pytest.mark.parametrize("order", NLL_ORDERS)
def test_exact_nll_of_uniform_logits_is_log_of_vocabulary(order):
    model = UniformModel(vocab_size=11, block_size=16)
    tokens = torch.randint(0, model.mask_id, (37,))  # two full windows and a short one
    assert exact_nll(model, tokens, order, batch_size=2) == pytest.approx(math.log(model.vocab_size - 1))


class CopyLeftModel(StubModel):
    """Puts 0.9 on the character left of each position once it is revealed; uniform otherwise."""

    def __init__(self, vocab_size: int = 11, block_size: int = 16) -> None:
        super().__init__(vocab_size, block_size)

    def forward(self, tokens):
        probs = torch.full((*tokens.shape, self.vocab_size), 1.0 / (self.vocab_size - 1))
        left = torch.cat([torch.full_like(tokens[:, :1], self.mask_id), tokens[:, :-1]], dim=1)  # (B, T)
        known = left != self.mask_id
        spread = 0.1 / (self.vocab_size - 2)
        probs[known] = spread
        probs[known, left[known]] = 0.9
        return self.logits_from(probs)


@pytest.mark.parametrize("order", NLL_ORDERS)
def test_exact_nll_conditions_on_what_it_revealed(order):
    # one character repeated: the first is a uniform guess, every later one is its left neighbour at 0.9,
    # and confidence order, which picks the first of equally confident positions, also goes left to right
    model = CopyLeftModel()
    expected = (math.log(model.vocab_size - 1) - 15 * math.log(0.9)) / 16
    assert exact_nll(model, torch.zeros(16, dtype=torch.long), order) == pytest.approx(expected)


def test_exact_nll_of_a_real_model_is_finite_and_orders_are_checked(tiny_model):
    tokens = torch.randint(0, tiny_model.mask_id, (64,))
    nll = exact_nll(tiny_model, tokens, "confidence")
    assert 0 < nll < math.inf
    with pytest.raises(ValueError, match="order"):
        exact_nll(tiny_model, tokens, "random")


@pytest.mark.parametrize("order", NLL_ORDERS)
def test_char_nll_is_each_characters_share_of_the_exact_nll(tiny_model, order):
    from mdlm_hf.likelihood import char_nll

    tokens = torch.tensor(tiny_model.tokenizer.encode("to be or not 3\nthat is"))
    nats = char_nll(tiny_model, tokens, order)
    assert nats.shape == tokens.shape and bool((nats > 0).all())
    assert nats.double().mean().item() == pytest.approx(exact_nll(tiny_model, tokens, order), rel=1e-6)
    with pytest.raises(ValueError, match="1 to block_size"):
        char_nll(tiny_model, torch.zeros(tiny_model.block_size + 1, dtype=torch.long))


def test_surprise_steps_is_the_left_to_right_chain_batched(tiny_model):
    from mdlm_hf.likelihood import char_nll, surprise_steps

    tokens = torch.tensor(tiny_model.tokenizer.encode("to be or not 3\nthat is the question"))
    steps = list(surprise_steps(tiny_model, tokens, batch_size=8))
    assert len(steps) == math.ceil(len(tokens) / 8)  # one forward pass per 8 characters
    assert int(steps[0].isnan().sum()) == len(tokens) - 8  # the rest not scored yet
    assert torch.allclose(steps[-1], char_nll(tiny_model, tokens), atol=1e-5)  # the same canvases, the same numbers


def test_surprise_steps_past_the_context_and_bad_input(tiny_model):
    from mdlm_hf.likelihood import surprise_steps

    long = torch.randint(0, tiny_model.mask_id, (150,), generator=torch.Generator().manual_seed(1))
    *_, nats = surprise_steps(tiny_model, long, batch_size=64, context=16)
    assert nats.shape == (150,) and bool(torch.isfinite(nats).all() and (nats > 0).all())
    with pytest.raises(ValueError, match="context must be in"):
        next(surprise_steps(tiny_model, long, context=64))
    with pytest.raises(ValueError, match="batch_size"):
        next(surprise_steps(tiny_model, long, batch_size=0))


def test_surprise_steps_fast_runs_the_samplers_pass_and_stays_near_the_exact_chain(tiny_model, monkeypatch):
    from mdlm_hf.likelihood import surprise_steps

    tokens = torch.tensor(tiny_model.tokenizer.encode("to be or not to be that is the question"))
    calls = []
    denoise = tiny_model.denoise
    monkeypatch.setattr(tiny_model, "denoise", lambda *args: calls.append(args[0].shape) or denoise(*args))
    *_, fast = surprise_steps(tiny_model, tokens, batch_size=16, fast=True)
    assert len(calls) == math.ceil(len(tokens) / 16)  # every pass on the sampler's forward (the fast path)
    *_, exact = surprise_steps(tiny_model, tokens, batch_size=16)
    assert len(calls) == math.ceil(len(tokens) / 16)  # the default stays on the exact forward
    assert fast.mean().item() == pytest.approx(exact.mean().item(), abs=0.01)
