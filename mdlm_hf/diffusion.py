"""The forward (noising) process, the training loss and the ELBO evaluation; no weights live here.

Absorbing-state diffusion with a linear schedule: at time t in [0, 1] every character is replaced by
[MASK] independently with probability t. The continuous-time negative ELBO of a sequence x of
length L is

    NELBO(x) = integral_0^1 (1/t) E_{x_t ~ q(x_t|x)} [ sum_{i masked} -log p(x_i | x_t) ] dt   >=  -log p(x)

so the training loss is cross-entropy at masked positions weighted by 1/t (MDLM, Sahoo et al. 2024).

The exact likelihood's functions here (exact_nll, reveal_nll, surprise_steps, char_nll) trust their arguments:
mdlm_hf.likelihood, which scores either kind of model, checks them and calls these for a diffusion model.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from mdlm_hf.checks import check_seed, described, is_number
from mdlm_hf.inference import check_draws, check_integer, check_model, check_token_ids, evaluating, predictor
from mdlm_hf.windows import batches_by_length, score_windows

LOSS_WEIGHTINGS = ("elbo", "uniform")
MASK_RATIOS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
NLL_ORDERS = ("left_to_right", "confidence")


def refuse_one_sided(model: nn.Module, what: str, instead: str = "") -> None:
    """A ValueError when a diffusion model's computation (`what`) is asked of a model whose objective fills no blanks
    (the autoregressive twin), whose predictions would give it meaningless numbers; `instead`: where its own
    figure is."""
    objective = getattr(getattr(model, "module", model), "objective", None)  # DDP wraps the model in .module
    if objective is not None and not objective.fills_blanks:  # a stand-in (the tests') names none
        raise ValueError(f"{what} is a diffusion model's; {objective.title} fills no blanks{instead}")


def sample_times(batch_size: int, generator: torch.Generator, t_min: float = 1e-3) -> torch.Tensor:
    """Low-discrepancy (stratified) t in [t_min, 1): one shared uniform offset, B evenly spaced strata."""
    check_integer(batch_size, "batch_size")
    if not (is_number(t_min) and 0 <= t_min < 1):  # also false for NaN
        raise ValueError(f"t_min must be a number in [0, 1), got {described(t_min)}")
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    offset = torch.rand((), generator=generator)
    u = (offset + torch.arange(batch_size) / batch_size) % 1.0  # (B,) one point per stratum
    return t_min + (1.0 - t_min) * u  # clamped away from 0 where the 1/t weight explodes


def mask_tokens(
    tokens: torch.Tensor, t: torch.Tensor, mask_id: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Samples x_t ~ q(x_t | x_0): each token of `tokens` (B, T) becomes `mask_id` with probability t (B,)."""
    u = torch.rand(tokens.shape, generator=generator).to(tokens.device)
    is_masked = u < t.to(tokens.device)[:, None]  # (B, T)
    return torch.where(is_masked, mask_id, tokens), is_masked


def random_subset_mask(
    batch_size: int, length: int, num_masked: torch.Tensor, generator: torch.Generator
) -> torch.Tensor:
    """(B, T) bool: in each row a uniformly random set of exactly num_masked (B,) or (1,) positions."""
    scores = torch.rand((batch_size, length), generator=generator)
    ranks = scores.argsort(dim=1).argsort(dim=1)  # the positions with the m smallest scores form the set
    return ranks < num_masked[:, None]


def diffusion_loss(
    model: nn.Module,
    tokens: torch.Tensor,
    generator: torch.Generator,
    weighting: str = "elbo",
    t_min: float = 1e-3,
) -> torch.Tensor:
    """Training loss for a batch of clean `tokens` (B, T), in nats per character.

    weighting="elbo": the continuous-time ELBO, cross-entropy summed over masked positions, times 1/t,
        divided by T; its expectation is the NELBO per character, an upper bound on the NLL.
    weighting="uniform": the plain mean cross-entropy over masked positions (the seed notebooks' loss);
        not a bound, but every t counts the same.
    """
    check_model(model, "diffusion_loss", "tokens, generator")
    if weighting not in LOSS_WEIGHTINGS:
        raise ValueError(f"weighting must be one of {LOSS_WEIGHTINGS}, got {described(weighting)}")
    refuse_one_sided(model, "the diffusion loss")
    B, T = tokens.shape
    t = sample_times(B, generator, t_min)  # (B,)
    mask_id = getattr(model, "module", model).mask_id  # DistributedDataParallel wraps the model in .module
    noisy, is_masked = mask_tokens(tokens, t, mask_id, generator)
    logits = model(noisy)  # (B, T, V)
    ce = F.cross_entropy(logits.view(B * T, -1), tokens.view(-1), reduction="none").view(B, T)
    ce = ce * is_masked
    if weighting == "uniform":
        return ce.sum() / is_masked.sum().clamp(min=1)
    return (ce.sum(dim=1) / t.to(ce.device)).mean() / T


@dataclass
class ElboResult:
    """Negative ELBO per character: an upper bound on the negative log-likelihood."""

    nats_per_char: float
    num_chars: int

    @property
    def bits_per_char(self) -> float:
        return self.nats_per_char / math.log(2)


@torch.no_grad()
def elbo(
    model: nn.Module,
    tokens: torch.Tensor,
    num_samples: int = 4,
    generator: torch.Generator | None = None,
    batch_size: int = 64,
) -> ElboResult:
    """Negative ELBO in nats per char of a long 1-D `tokens`, split into block_size windows.

    Integrating the Binomial number of masks over t turns the 1/t-weighted integral into an average
    over the mask count: NELBO(x)/L = E_{m ~ Uniform{1..L}} E_{|S| = m} [ (1/m) sum_{i in S} -log p(x_i | x_S masked) ].
    (int_0^1 (1/t) C(L,m) t^m (1-t)^(L-m) dt = 1/m.) This is the same bound as the t-form, without the
    variance of a random mask count; m is stratified over each window's `num_samples` draws and over the
    windows. Deterministic for a given generator state.
    """
    check_model(model, "elbo", "tokens")
    # a twin's likelihood is its own (mdlm_hf/objectives.py): the refusal points its caller there
    refuse_one_sided(model, "the ELBO", ": mdlm_hf.likelihood scores either kind of model")
    check_token_ids(tokens, model)
    check_integer(batch_size, "batch_size")
    check_draws(num_samples, "num_samples", "each draw is a forward pass of every block_size window of the text")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None, got {described(generator)}")
    generator = generator if generator is not None else torch.Generator().manual_seed(0)
    device = next(model.parameters()).device
    windows = tokens.long().split(model.block_size)  # side by side: the last may be shorter
    # The mask count m is stratified twice (a Latin square, docs/decisions.md): draw s of every window falls in the
    # s-th of num_samples equal parts of [0, 1), and within that part the windows take one stratum each, in a random
    # order. Each draw's m is still uniform, so each window's estimate stays unbiased, and the draws together cover
    # 1..L evenly, where strata within a window alone left each window's few m to chance.
    num_windows = len(windows)
    num_jobs = num_windows * num_samples
    order = [torch.randperm(num_windows, generator=generator).tolist() for _ in range(num_samples)]
    jobs = [(w, s * num_windows + order[s][i]) for i, w in enumerate(windows) for s in range(num_samples)]
    total_nats = 0.0
    with evaluating(model):
        for group in batches_by_length(jobs, lambda job: job[0].numel(), batch_size):
            x0 = torch.stack([w for w, _ in group]).to(device)  # (b, n)
            n = x0.size(1)
            group_strata = torch.tensor([s for _, s in group], dtype=torch.float64)
            u = (group_strata + torch.rand(len(group), generator=generator, dtype=torch.float64)) / num_jobs
            num_masked = (u * n).floor().long().clamp(0, n - 1) + 1  # (b,) m in 1..n
            is_masked = random_subset_mask(len(group), n, num_masked, generator).to(device)  # (b, n)
            logits = model(torch.where(is_masked, model.mask_id, x0))
            ce = F.cross_entropy(logits.reshape(-1, logits.size(-1)), x0.reshape(-1), reduction="none")
            ce = (ce.view_as(x0) * is_masked).sum(dim=1).double().cpu()  # (b,)
            # window NELBO = n * mean over masked; averaged over the num_samples draws
            total_nats += (ce / num_masked * n).sum().item() / num_samples
    return ElboResult(total_nats / tokens.numel(), tokens.numel())


@torch.no_grad()
def exact_nll(
    model: nn.Module,
    tokens: torch.Tensor,
    order: str = "left_to_right",
    batch_size: int = 64,
    progress: bool = False,
) -> float:
    """Exact negative log-likelihood in nats per char of a 1-D `tokens`: `reveal_nll` on block_size windows side by
    side, `batch_size` windows a batch (docs/decisions.md, Likelihood estimators). `progress`: a tqdm bar."""
    device = next(model.parameters()).device
    bar = None
    if progress:  # tqdm comes with the train extra; the package itself does not need it
        from tqdm.auto import tqdm

        bar = tqdm(total=tokens.numel(), desc=f"exact NLL ({order})", unit="char")
    total_nats = 0.0
    with evaluating(model):
        for batch in batches_by_length(tokens.long().split(model.block_size), torch.Tensor.numel, batch_size):
            x0 = torch.stack(batch).to(device)  # (b, n)
            total_nats += reveal_nll(model, x0, order, bar).double().sum().item()
    if bar is not None:
        bar.close()
    return total_nats / tokens.numel()


@torch.no_grad()
def reveal_nll(model: nn.Module, x0: torch.Tensor, order: str, bar: Any = None) -> torch.Tensor:
    """-log p of each character of the windows `x0` (b, n), revealed one a forward pass from an all-mask canvas in
    `order`; (b, n) nats, on x0's device. `bar`: a progress bar to update.

    The denoiser defines a proper distribution for any rule that picks the next position from what is already
    revealed: p(x) = prod_k p(x_{s_k} | x_{s_1..s_{k-1}}). "left_to_right" picks the leftmost mask; "confidence" the
    mask whose most likely character is the most probable (never looking at the hidden truth).
    """
    b, n = x0.shape
    device = x0.device
    canvas = torch.full_like(x0, model.mask_id)
    rows = torch.arange(b, device=device)
    nats = torch.zeros(b, n, device=device)
    for k in range(n):
        log_probs = model(canvas).float().log_softmax(-1)
        if order == "left_to_right":
            position = torch.full((b,), k, device=device)
        else:
            confidence = log_probs.max(dim=-1).values.masked_fill(canvas != model.mask_id, float("-inf"))
            position = confidence.argmax(dim=-1)  # (b,)
        truth = x0[rows, position]
        nats[rows, position] = -log_probs[rows, position, truth]
        canvas[rows, position] = truth
        if bar is not None:
            bar.update(b)
    return nats


@torch.no_grad()
def surprise_steps(
    model: nn.Module, tokens: torch.Tensor, batch_size: int = 32, context: int | None = None, fast: bool = False
) -> Iterator[torch.Tensor]:
    """-log p, in nats, of each character of a 1-D `tokens` of any length given those before it, left to right:
    yields the (n,) nats so far (NaN where not scored yet) after each forward pass, which scores `batch_size`
    characters at once. Within the model's context this is `exact_nll`'s left-to-right chain (the same canvases:
    the characters before, then masks), batched; past it each character is read in a window of block_size that
    holds at least `context` characters before it (default block_size // 2). `fast`: the passes run where the
    sampler's do (an MDLM's `denoise`, its bf16 copy where faster: docs/benchmarks.md, Score), not on exact fp32."""
    context = model.block_size // 2 if context is None else context
    device = next(model.parameters()).device
    tokens = tokens.long().to(device)
    nats = torch.full((tokens.numel(),), float("nan"), device=device)
    forward = predictor(model) if fast else model
    with evaluating(model):
        for start, first, end in score_windows(tokens.numel(), model.block_size, context):
            window = tokens[start:end]
            for low in range(first, end, batch_size):
                positions = torch.arange(low, min(low + batch_size, end), device=device)  # (b,) absolute
                relative = positions - start
                canvas = window.expand(len(positions), -1).clone()  # (b, L) the characters before each, then masks
                canvas[torch.arange(window.numel(), device=device)[None, :] >= relative[:, None]] = model.mask_id
                log_probs = forward(canvas).float().log_softmax(dim=-1)  # (b, L, V)
                rows = torch.arange(len(positions), device=device)
                nats[positions] = -log_probs[rows, relative, tokens[positions]]
                yield nats.clone()


@torch.no_grad()
def char_nll(model: nn.Module, tokens: torch.Tensor, order: str = "left_to_right") -> torch.Tensor:
    """-log p, in nats, of each character of a 1-D `tokens` of at most block_size, under `exact_nll`'s chain rule
    (its mean is `exact_nll`): how surprised the model is by each character given those revealed before it."""
    device = next(model.parameters()).device
    with evaluating(model):
        return reveal_nll(model, tokens.long()[None].to(device), order)[0].cpu()


@torch.no_grad()
def accuracy_by_mask_ratio(
    model: nn.Module,
    tokens: torch.Tensor,
    ratios: tuple[float, ...] = MASK_RATIOS,
    num_windows: int = 64,
    seed: int = 0,
) -> list[tuple[float, float]]:
    """Share of masked characters the model's argmax gets right, for each mask ratio, on validation windows."""
    refuse_one_sided(model, "accuracy by mask ratio")
    check_token_ids(tokens, model)
    check_draws(num_windows, "num_windows", "each window is a forward pass per mask ratio")
    check_seed(seed)
    if not isinstance(ratios, (tuple, list)) or not ratios:
        empty = "an empty " if isinstance(ratios, (tuple, list)) else ""
        raise ValueError(
            f"ratios must be a non-empty tuple or list of mask ratios in (0, 1], got {empty}{type(ratios).__name__}"
        )
    bad = [r for r in ratios if not (is_number(r) and 0 < r <= 1)]
    if bad:
        raise ValueError(f"mask ratios must be numbers in (0, 1], got {described(bad[0])}")
    generator, tokens = torch.Generator().manual_seed(seed), tokens.long()
    L = min(model.block_size, tokens.numel())
    starts = torch.randint(0, tokens.numel() - L + 1, (num_windows,), generator=generator)
    windows = torch.stack([tokens[s : s + L] for s in starts.tolist()])  # (N, L)
    device = next(model.parameters()).device
    results = []
    with evaluating(model):
        for ratio in ratios:
            num_masked = max(1, round(ratio * L))
            is_masked = random_subset_mask(num_windows, L, torch.tensor([num_masked]), generator)
            noisy = torch.where(is_masked, model.mask_id, windows)
            predictions = model(noisy.to(device)).argmax(dim=-1).cpu()
            correct = (predictions == windows) & is_masked
            results.append((ratio, correct.sum().item() / is_masked.sum().item()))
    return results
