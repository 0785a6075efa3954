"""The kinds of model this package trains, and everything one kind does differently from another.

A masked diffusion model (MDLM) and its autoregressive twin are the same network (mdlm_hf/model.py); only the
attention mask differs (`causal`, mdlm_hf/layers.py). Everything else that differs lives here, one `Objective` each:
the training loss, the score checkpoints are chosen by, the exact likelihood, the sampler core that writes, which
sampler options it takes, and the card's wording. The rest of the code asks `objective_of(model)` once and uses
what its entry holds.

A third kind (say, block diffusion) is one more entry in OBJECTIVES: its loss, its writer, its likelihood.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields

import torch
import torch.nn as nn

from mdlm_hf import autoregressive, diffusion
from mdlm_hf.card import TWIN_CARD_TEMPLATE, TWIN_TAGS
from mdlm_hf.checks import described
from mdlm_hf.sampling.loop import write_by_denoising
from mdlm_hf.sampling.options import STUDIED_OPTIONS, SamplerOptions


@dataclass(frozen=True)
class Objective:
    """One kind of model: what it is trained on, how it is scored, and how it writes."""

    name: str  # training's --objective, and what metrics.json records
    causal: bool  # its network's attention mask: each position sees those before it only
    title: str  # what the card and the command lines call it
    fills_blanks: bool  # whether it can fill masks with text after them (infill, rewrite, a reveal chain)
    score: str  # the validation score checkpoints are chosen by, as history and metrics keys name it
    score_label: str  # that score as a line prints it
    nll_orders: tuple[str, ...]  # the orders its exact likelihood can be taken in
    logit_shift: int  # its logits at position i are of the character at i + logit_shift
    # loss(model, tokens (B, T), generator, weighting, t_min, stream_share) -> the training loss, nats per character
    loss: Callable[..., torch.Tensor]
    # validation_nats(model, tokens (n,), num_samples, generator) -> the score, nats per character
    validation_nats: Callable[[nn.Module, torch.Tensor, int, torch.Generator], float]
    # char_nats(model, tokens (n <= block_size,), order) -> (n,) -log p of each character under the exact chain rule
    char_nats: Callable[[nn.Module, torch.Tensor, str], torch.Tensor]
    # exact_nll(model, tokens (n,), order, batch_size, progress) -> nats per character
    exact_nll: Callable[[nn.Module, torch.Tensor, str, int, bool], float]
    # surprise_steps(model, tokens (n,), batch_size, context, fast) -> the (n,) nats so far, pass by pass
    surprise_steps: Callable[[nn.Module, torch.Tensor, int, int | None, bool], Iterator[torch.Tensor]]
    writer: Callable[..., Iterator]  # the sampler core: (model, canvas, options, generator, lexicon, casts)
    default_options: Callable[[], SamplerOptions]  # what a run starts from
    accepted_options: tuple[str, ...]  # the options a run may change from default_options()
    recorded_options: tuple[str, ...]  # the defaults a card records beside its samples
    card_template: str | None  # None: the model class's own (mdlm_hf/model_card.md)
    card_tags: tuple[str, ...] | None  # None: the model class's own


def _diffusion_validation(
    model: nn.Module, tokens: torch.Tensor, num_samples: int, generator: torch.Generator
) -> float:
    """The negative ELBO, nats per character (`mdlm_hf.diffusion.elbo`)."""
    return diffusion.elbo(model, tokens, num_samples, generator).nats_per_char


def _twin_loss(model: nn.Module, tokens: torch.Tensor, generator: torch.Generator, *_: object) -> torch.Tensor:
    """The next character's cross-entropy: it draws no masks, so the generator and the mask options go unused."""
    return autoregressive.autoregressive_loss(model, tokens)


def _twin_validation(model: nn.Module, tokens: torch.Tensor, num_samples: int, generator: torch.Generator) -> float:
    """The exact NLL, nats per character, which the diffusion model's NELBO bounds: it draws no masks."""
    return autoregressive.autoregressive_nll(model, tokens)


def _twin_char_nats(model: nn.Module, tokens: torch.Tensor, order: str) -> torch.Tensor:
    return autoregressive.char_nats(model, tokens)


def _twin_exact_nll(model: nn.Module, tokens: torch.Tensor, order: str, batch_size: int, progress: bool) -> float:
    return autoregressive.autoregressive_nll(model, tokens, 0, batch_size)  # one pass a window: no progress to show


def _twin_surprise_steps(
    model: nn.Module, tokens: torch.Tensor, batch_size: int, context: int | None, fast: bool
) -> Iterator[torch.Tensor]:
    """One pass reads a whole window, so a single step scores every character."""
    yield autoregressive.char_nats(model, tokens, model.block_size // 2 if context is None else context, batch_size)


DIFFUSION = Objective(
    name="diffusion",
    causal=False,
    title="a masked diffusion language model",
    fills_blanks=True,
    score="nelbo",
    score_label="NELBO",
    nll_orders=diffusion.NLL_ORDERS,
    logit_shift=0,
    loss=diffusion.diffusion_loss,
    validation_nats=_diffusion_validation,
    char_nats=diffusion.char_nll,
    exact_nll=diffusion.exact_nll,
    surprise_steps=diffusion.surprise_steps,
    writer=write_by_denoising,
    default_options=SamplerOptions,
    accepted_options=tuple(f.name for f in fields(SamplerOptions)),
    recorded_options=STUDIED_OPTIONS,
    card_template=None,
    card_tags=None,
)

AUTOREGRESSIVE = Objective(
    name="ar",
    causal=True,
    title="the autoregressive twin of a masked diffusion language model",
    fills_blanks=False,
    score="nll",
    score_label="NLL",
    nll_orders=("left_to_right",),
    logit_shift=1,
    loss=_twin_loss,
    validation_nats=_twin_validation,
    char_nats=_twin_char_nats,
    exact_nll=_twin_exact_nll,
    surprise_steps=_twin_surprise_steps,
    writer=autoregressive.write_left_to_right,
    default_options=autoregressive.left_to_right_defaults,
    accepted_options=("order", *autoregressive.DRAWS),
    recorded_options=("order", "temperature"),
    card_template=TWIN_CARD_TEMPLATE,
    card_tags=tuple(TWIN_TAGS),
)

OBJECTIVES = {objective.name: objective for objective in (DIFFUSION, AUTOREGRESSIVE)}


def objective_of(model: nn.Module) -> Objective:
    """The objective `model` was built for (through DistributedDataParallel's .module too)."""
    return objective_for_config({"causal": getattr(getattr(model, "module", model), "causal", False)})


def objective_for_config(config: dict) -> Objective:
    """The objective of a saved model's config.json (one from before the twin has no "causal": diffusion)."""
    causal = bool(config.get("causal", False))
    return next(objective for objective in OBJECTIVES.values() if objective.causal == causal)


def objective_named(name: object) -> Objective:
    """The objective training's --objective names, or a ValueError listing them."""
    if name not in OBJECTIVES:
        raise ValueError(f"objective must be one of {tuple(OBJECTIVES)}, got {described(name)}")
    return OBJECTIVES[name]


def check_twin(model: nn.Module, twin: nn.Module | None) -> None:
    """A ValueError unless `model` is a diffusion model and `twin` None or an autoregressive model with its
    characters, so that both write on one canvas (the app's Compare, the benchmarks)."""
    if objective_of(model) is not DIFFUSION:
        raise ValueError("the app's model must be a diffusion model; pass an autoregressive one as --twin")
    if twin is None:
        return
    if objective_of(twin) is not AUTOREGRESSIVE:
        raise ValueError("the twin must be an autoregressive model (MDLM with causal=True, training --objective ar)")
    if twin.tokenizer.vocab != model.tokenizer.vocab:
        raise ValueError("the twin knows other characters than the model: train both on the same text")
