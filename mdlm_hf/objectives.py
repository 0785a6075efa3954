"""The kinds of model this package trains, a masked diffusion model and its autoregressive twin: one `Objective` each
in OBJECTIVES, holding all that differs between them (the attention mask, loss, score, exact likelihood, writer,
options and card). The rest of the code asks `objective_of(model)` and uses its entry, never which entry it is;
another kind is one more entry, added by `register_objective`.
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


def no_figures(model: nn.Module, tokens: torch.Tensor, num_samples: int, seed: int) -> dict:
    """An objective's report beyond its score, exact NLL and samples: nothing more."""
    return {}


@dataclass(frozen=True)
class Objective:
    """One kind of model: the mask its network reads under, what it is trained on, how it is scored and how it
    writes."""

    name: str  # config.json's "objective", training's --objective, and what metrics.json records
    title: str  # what the card and the command lines call it
    is_causal: bool  # its network's attention: each position sees those up to its own (SDPA's is_causal)
    fills_blanks: bool  # whether it can fill masks with text after them (infill, rewrite, a reveal chain)
    uses_kv_cache: bool  # its writer reads one position a pass after a key-value cache (the fast path times that)
    score: str  # the validation score checkpoints are chosen by, as history and metrics keys name it
    score_label: str  # that score as a line prints it
    nll_orders: tuple[str, ...]  # the orders its exact likelihood can be taken in
    # loss(model, tokens (B, T), generator, weighting, t_min) -> the training loss, nats per character
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
    # or, where neither every position nor is_causal says it: attn_mask(T, device) -> (T, T) bool, True where row i
    # may see column j
    attn_mask: Callable[[int, torch.device], torch.Tensor] | None = None
    # training's settings (training/flags.py) its loss and score read besides the batch: a run of another objective
    # leaves them at their defaults, and the card's recipe names them only for a run of this one
    settings: tuple[str, ...] = ()
    # figures(model, tokens (n,) of the validation split, num_samples, seed) -> what its report (metrics.json, the
    # card) holds besides the score, the exact NLL and the samples
    figures: Callable[[nn.Module, torch.Tensor, int, int], dict] = no_figures
    card_template: str | None = None  # None: the model class's own (mdlm_hf/model_card.md)
    card_tags: tuple[str, ...] | None = None  # None: the model class's own


def _diffusion_validation(
    model: nn.Module, tokens: torch.Tensor, num_samples: int, generator: torch.Generator
) -> float:
    """The negative ELBO, nats per character (`mdlm_hf.diffusion.elbo`)."""
    return diffusion.elbo(model, tokens, num_samples, generator).nats_per_char


def _diffusion_figures(model: nn.Module, tokens: torch.Tensor, num_samples: int, seed: int) -> dict:
    """The ELBO's mask draws per window, and masked-token accuracy by mask ratio."""
    accuracy = diffusion.accuracy_by_mask_ratio(model, tokens, seed=seed)
    return {"elbo_mask_samples_per_window": num_samples, "accuracy_by_mask_ratio": accuracy}


def _twin_exact_nll(model: nn.Module, tokens: torch.Tensor, order: str, batch_size: int, progress: bool) -> float:
    return autoregressive.autoregressive_nll(model, tokens, batch_size)  # one pass a window: no progress to show


def _twin_surprise_steps(
    model: nn.Module, tokens: torch.Tensor, batch_size: int, context: int | None, fast: bool
) -> Iterator[torch.Tensor]:
    """One pass reads a whole window, so a single step scores every character."""
    yield autoregressive.char_nats(model, tokens, model.block_size // 2 if context is None else context, batch_size)


DIFFUSION = Objective(
    name="diffusion",
    title="a masked diffusion language model",
    is_causal=False,
    fills_blanks=True,
    uses_kv_cache=False,
    score="nelbo",
    score_label="NELBO",
    nll_orders=diffusion.NLL_ORDERS,
    loss=diffusion.diffusion_loss,
    validation_nats=_diffusion_validation,
    char_nats=diffusion.char_nll,
    exact_nll=diffusion.exact_nll,
    surprise_steps=diffusion.surprise_steps,
    writer=write_by_denoising,
    default_options=SamplerOptions,
    accepted_options=tuple(f.name for f in fields(SamplerOptions)),
    recorded_options=STUDIED_OPTIONS,
    settings=("loss_weighting", "t_min", "eval_samples"),
    figures=_diffusion_figures,
)

AUTOREGRESSIVE = Objective(
    name="ar",
    title="the autoregressive twin of a masked diffusion language model",
    is_causal=True,
    fills_blanks=False,
    uses_kv_cache=True,
    score="nll",
    score_label="NLL",
    nll_orders=("left_to_right",),
    # it draws no masks: the generator and the mask options go unused, and its score is the exact NLL
    loss=lambda model, tokens, *_: autoregressive.autoregressive_loss(model, tokens),
    validation_nats=lambda model, tokens, *_: autoregressive.autoregressive_nll(model, tokens),
    char_nats=lambda model, tokens, order: autoregressive.char_nats(model, tokens),
    exact_nll=_twin_exact_nll,
    surprise_steps=_twin_surprise_steps,
    writer=autoregressive.write_left_to_right,
    default_options=autoregressive.left_to_right_defaults,
    accepted_options=("order", *autoregressive.DRAWS),
    recorded_options=("order", "temperature"),
    card_template=TWIN_CARD_TEMPLATE,
    card_tags=tuple(TWIN_TAGS),
)

# every objective this process knows, by name: read when a choice is offered (training's --objective, a config.json)
OBJECTIVES: dict[str, Objective] = {}


def register_objective(objective: Objective) -> Objective:
    """Adds `objective` to OBJECTIVES, so training, evaluation, export, loading and the app take it; a ValueError
    where another entry has its name."""
    if not isinstance(objective, Objective):
        raise ValueError(f"register an Objective, got {described(objective)}")
    if OBJECTIVES.get(objective.name, objective) is not objective:
        raise ValueError(f"an objective named {objective.name!r} is registered already")
    OBJECTIVES[objective.name] = objective
    return objective


register_objective(DIFFUSION)
register_objective(AUTOREGRESSIVE)


def objective_of(model: nn.Module) -> Objective:
    """The objective `model` was built for (through DistributedDataParallel's .module too); a stand-in that names
    none (the tests') is read as a diffusion model."""
    return getattr(getattr(model, "module", model), "objective", DIFFUSION)


def objective_for_config(config: dict) -> Objective:
    """The objective a model's config names: its "objective", or, in a config.json saved before that key, its
    "causal" attention (true: the twin; absent too, saved before the twin: the diffusion model)."""
    named, causal = config.get("objective"), config.get("causal")
    if causal is None:
        return objective_named(DIFFUSION.name if named is None else named)
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be true or false, got {described(causal)}")
    by_mask = AUTOREGRESSIVE if causal else DIFFUSION
    if named is not None and named != by_mask.name:
        raise ValueError(
            f"causal {str(causal).lower()} is objective {by_mask.name!r}, but objective is {described(named)}"
        )
    return by_mask


def objective_named(name: object) -> Objective:
    """The objective of this name in OBJECTIVES, or a ValueError listing them."""
    if not isinstance(name, str) or name not in OBJECTIVES:
        raise ValueError(f"objective must be one of {tuple(OBJECTIVES)}, got {described(name)}")
    return OBJECTIVES[name]


def check_twin(model: nn.Module, twin: nn.Module | None) -> None:
    """A ValueError unless `model` fills blanks (the app infills and rewrites with it) and `twin` is None or a model
    that writes left to right only, with its characters, so that both write on one canvas (the app's Compare, the
    benchmarks)."""
    if not objective_of(model).fills_blanks:
        raise ValueError("the app's model must be one that fills blanks, a diffusion model; pass this one as --twin")
    if twin is None:
        return
    if objective_of(twin).fills_blanks:
        raise ValueError(
            "the twin must be a model that writes left to right (training --objective ar), not one that fills blanks"
        )
    if twin.tokenizer.vocab != model.tokenizer.vocab:
        raise ValueError("the twin knows other characters than the model: train both on the same text")
