"""MDLM: the model a user loads, saves and writes with: the network (network.py), its objective's entry
(objectives.py), Hub loading and saving (hub.py, through `PyTorchModelHubMixin`), and the text methods (thin
wrappers over pipeline.py and rewriting.py).
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import ModelCard, ModelCardData, PyTorchModelHubMixin, hf_hub_download

from mdlm_hf import pipeline, rewriting
from mdlm_hf.card import MODEL_CARD_TEMPLATE, REPO_URL
from mdlm_hf.checks import described
from mdlm_hf.data import file_in_folder
from mdlm_hf.devices import check_map_location
from mdlm_hf.fast import FastPath
from mdlm_hf.hub import (
    check_config_keys,
    check_local_checkpoint,
    load_weights,
    meant_as_folder,
    missing_folder,
    save_weights,
)
from mdlm_hf.inference import check_flag, check_token_ids
from mdlm_hf.network import KVCache, Network, NetworkConfig
from mdlm_hf.objectives import Objective, objective_for_config, objective_named
from mdlm_hf.sampling.options import SamplerOptions
from mdlm_hf.sampling.state import SamplerState
from mdlm_hf.tokenizer import CharTokenizer

# bounds on a config, so a malformed or hostile config.json is refused before anything is allocated
CONFIG_LIMITS = {"n_layer": 64, "n_head": 8192, "n_embd": 8192, "block_size": 65536}
CASTS_FILE = "casts.json"  # beside the weights: each play's speakers (training/casts.py writes it)
WORD_LIST_FILE = "words.txt"  # beside the weights: the training text's words (training/export.py writes it)
MAX_VALUES = 2**30  # parameters and position tables together: 4 GiB in fp32
# keys earlier versions wrote to config.json, each at the one value this version builds, and what that is; a config
# holding another value is refused (a model trained with it would load into the wrong network). Earlier configs'
# "causal" names their objective (mdlm_hf.objectives.objective_for_config)
EARLIER_KEYS = {
    "position_encoding": ("rope", "rotary positions only"),
    "norm": ("rmsnorm", "RMSNorm only"),
    "mlp": ("relu2", "ReLU^2 MLPs only"),
    "qk_norm": (True, "attention with RMS-normalised queries and keys only"),
    "time_conditioning": (False, "no time embedding (the number of masks tells the noise level)"),
}


def check_config(
    vocab: object,
    n_layer: object = 6,
    n_head: object = 4,
    n_embd: object = 256,
    block_size: object = 256,
    dropout: object = 0.0,
    objective: object = None,
    causal: object = None,
    **earlier: object,
) -> None:
    """Raises ValueError naming the first field of an MDLM config of the wrong type or outside its bounds, or an
    earlier version's key set to what this version no longer builds (`causal`: an earlier config's objective)."""
    if not isinstance(vocab, str) or not vocab:
        raise ValueError(f"vocab must be a non-empty string of distinct characters, got {type(vocab).__name__}")
    for name, value in (("n_layer", n_layer), ("n_head", n_head), ("n_embd", n_embd), ("block_size", block_size)):
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= CONFIG_LIMITS[name]:
            raise ValueError(f"{name} must be an integer in [1, {CONFIG_LIMITS[name]}], got {described(value)}")
    if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be a number in [0, 1), got {described(dropout)}")
    for name, value in earlier.items():
        if name not in EARLIER_KEYS:
            raise TypeError(f"MDLM() got an unexpected keyword argument {name!r}")
        kept, what = EARLIER_KEYS[name]
        if type(value) is not type(kept) or value != kept:  # 1 is no true, and 1.0 no "rope"
            raise ValueError(
                f"{name} must be {json.dumps(kept)}: this version of mdlm_hf builds {what}, got {described(value)}"
            )
    objective_for_config({"objective": objective, "causal": causal})
    if n_embd % n_head != 0 or (n_embd // n_head) % 2 != 0:
        raise ValueError(f"n_embd ({n_embd}) must split into n_head ({n_head}) heads of even size")
    # per block: attention's 4 C x C matrices and the MLP's two 4C x C; then the embedding and the rotary tables
    values = n_layer * 12 * n_embd * n_embd + (len(vocab) + 1) * n_embd + block_size * (n_embd // n_head)
    if values > MAX_VALUES:
        raise ValueError(
            f"n_layer {n_layer}, n_embd {n_embd}, block_size {block_size} and a vocab of {len(vocab)} describe "
            f"about {values:,} weights, more than the {MAX_VALUES:,} an mdlm_hf model may have"
        )


class MDLM(
    Network,
    PyTorchModelHubMixin,
    library_name="mdlm_hf",
    repo_url=REPO_URL,
    pipeline_tag="text-generation",
    tags=["masked-diffusion", "diffusion-language-model", "character-level", "mdlm"],
    model_card_template=MODEL_CARD_TEMPLATE,
):
    """The network over characters, with [MASK] as the last id, trained for one objective: by default the masked
    diffusion model's denoiser p(x_0 | x_t); with objective="ar" its autoregressive twin p(x_i | x_<i).

    Every `__init__` argument is written to `config.json`: `vocab`, the characters in id order ([MASK] is id
    len(vocab)); the network's shape (mdlm_hf.network.NetworkConfig); and `objective`, a name in
    mdlm_hf.objectives.OBJECTIVES (None: "diffusion"). `earlier`: an earlier version's keys (EARLIER_KEYS, "causal"),
    so its config.json loads as saved. The card names no license: an export states the weights' terms.
    """

    def __init__(
        self,
        vocab: str,
        n_layer: int = 6,
        n_head: int = 4,
        n_embd: int = 256,
        block_size: int = 256,
        dropout: float = 0.0,
        objective: str | None = None,
        **earlier: Any,
    ) -> None:
        check_config(vocab, n_layer, n_head, n_embd, block_size, dropout, objective, **earlier)
        tokenizer = CharTokenizer(vocab)
        super().__init__(NetworkConfig(tokenizer.vocab_size, block_size, n_layer, n_head, n_embd, dropout))
        self.tokenizer = tokenizer
        self.mask_id = self.tokenizer.mask_id
        self.vocab_size = self.tokenizer.vocab_size
        self.objective_name = objective_for_config({"objective": objective, "causal": earlier.get("causal")}).name
        # what save_pretrained writes: this version's keys, whatever an earlier config.json held
        shape = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, block_size=block_size, dropout=dropout)
        self._hub_mixin_config = {"vocab": vocab, **shape, "objective": self.objective_name}
        self._fast_path = FastPath()  # a plain attribute: the bf16 copy stays out of state_dict
        self.fast = False  # from_pretrained turns it on

    @property
    def objective(self) -> Objective:
        """Its objective's entry in mdlm_hf.objectives.OBJECTIVES, looked up when asked."""
        return objective_named(self.objective_name)

    @property
    def fast(self) -> bool:
        """Whether the sampler (`denoise`) runs on bf16 weights where they are faster here (see mdlm_hf.fast)."""
        return self._fast

    @fast.setter
    def fast(self, value: bool) -> None:
        check_flag(value, "fast")
        self._fast = value

    def forward(self, tokens: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Logits (B, T, V), fp32, of what its objective predicts from `tokens` (B, T) under the attention mask its
        objective names: for a diffusion model x_0 given the noisy canvas (the noise level read from the masks
        themselves), for the twin the character after each position (after what `cache` holds, which this pass
        extends). [MASK] gets -inf."""
        # type, rank and device, not the ids: reading them back would stall a GPU at every training step
        check_token_ids(tokens, self, "tokens", dims=(2,), masks=True, values=False, same_device=True)
        objective = self.objective
        attn_mask = None if objective.attn_mask is None else objective.attn_mask(tokens.size(1), tokens.device)
        logits = super().forward(tokens, cache, is_causal=objective.is_causal, attn_mask=attn_mask).float()
        # the clean text never contains [MASK] (the twin's start token), so the model can never predict it
        logits[..., self.mask_id] = float("-inf")
        return logits

    def denoise(self, tokens: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """The sampler's forward: logits (B, T, V) from the fast path when `fast` is on, else `forward` (exact)."""
        runner = self if not self.fast or self.training or torch.is_grad_enabled() else self._fast_path.runner(self)
        return runner(tokens) if cache is None else runner(tokens, cache)

    @property
    def denoise_dtype(self) -> torch.dtype:
        """The weights' dtype that `denoise` runs on in eval mode: bfloat16 where the fast path chose its copy (asking
        may make the copy and time it, as the first sampling pass would)."""
        if not self.fast:
            return self.lm_head.weight.dtype
        with torch.no_grad():
            return self._fast_path.runner(self).lm_head.weight.dtype

    # --- text: thin wrappers over mdlm_hf.pipeline and mdlm_hf.rewriting ---

    def stream(
        self, template: str, blank: str = "_", options: SamplerOptions | None = None, **overrides: Any
    ) -> Iterator[SamplerState]:
        """Yields every intermediate `SamplerState` while filling the `blank` characters of `template`."""
        return pipeline.stream(self, template, blank, options, **overrides)

    def infill(self, template: str, blank: str = "_", options: SamplerOptions | None = None, **overrides: Any) -> str:
        """Fills every `blank` character of `template`; other characters stay exactly as given."""
        return pipeline.infill(self, template, blank, options, **overrides)

    def complete(self, prompt: str, length: int, options: SamplerOptions | None = None, **overrides: Any) -> str:
        """Prompt followed by `length` generated characters."""
        return pipeline.complete(self, prompt, length, options, **overrides)

    def generate(self, length: int | None = None, options: SamplerOptions | None = None, **overrides: Any) -> str:
        """Generates `length` characters (default: block_size) from an all-mask canvas."""
        return pipeline.generate(self, length, options, **overrides)

    def rewrite(self, text: str, start: int, end: int, options: SamplerOptions | None = None, **overrides: Any) -> str:
        """`text` with `text[start:end]` masked and written again, reading both sides (mdlm_hf.rewriting)."""
        return rewriting.rewrite(self, text, start, end, options, **overrides)

    def _save_pretrained(self, save_directory: Path) -> None:
        # the mixin's writer, with the checksum of the tensors that loading checks (`save_weights`)
        save_weights(self, Path(save_directory) / "model.safetensors")

    def generate_model_card(self, *args: Any, card_data: dict | None = None, **kwargs: Any) -> ModelCard:
        """The card `save_pretrained` writes: the class's front matter (library, pipeline, tags) with the fields of
        `card_data` over it (license, language, datasets, model_name and eval_results: what a training run knows),
        and the template (mdlm_hf.card; an autoregressive twin's own, with its tags) filled with `kwargs`."""
        info = self._hub_mixin_info
        objective = self.objective
        tags = {"tags": list(objective.card_tags)} if objective.card_tags else {}
        data = ModelCardData(**{**info.model_card_data.to_dict(), **tags, **(card_data or {})})
        return ModelCard.from_template(
            card_data=data,
            template_str=objective.card_template or info.model_card_template,
            repo_url=info.repo_url,
            paper_url=info.paper_url,
            docs_url=info.docs_url,
            **kwargs,
        )

    # --- loading: strict, safetensors only, with errors that say what is wrong ---

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | Path, *, fast: bool = True, **kwargs: Any) -> MDLM:
        """Loads config.json + model.safetensors from a local directory or a Hub repo id.

        `fast` (default) samples on bf16 weights where this machine runs them faster (mdlm_hf.fast);
        `fast=False` samples with the exact fp32 model. `forward` is exact either way.
        """
        check_flag(fast, "fast")
        if not isinstance(pretrained_model_name_or_path, (str, os.PathLike)):
            raise ValueError(
                "pass a local directory or a Hub repo id as a string or path, "
                f"got {described(pretrained_model_name_or_path)}"
            )
        if kwargs.get("strict", True) is not True:
            raise ValueError(
                "strict must be True: weights that do not match config.json are refused, never half loaded"
            )
        if not str(pretrained_model_name_or_path).strip():
            raise ValueError("the model name is empty: pass a local directory or a Hub repo id")
        path = Path(pretrained_model_name_or_path).expanduser()
        if path.is_dir():
            check_local_checkpoint(path, config_keys())
            pretrained_model_name_or_path = path
        elif path.exists():
            raise ValueError(f"{path} is a file; pass the directory that holds config.json and model.safetensors")
        elif meant_as_folder(str(pretrained_model_name_or_path)):  # the Hub would retry for half a minute, then fail
            raise ValueError(missing_folder(path))
        try:
            model = super().from_pretrained(pretrained_model_name_or_path, **kwargs)
        except RecursionError:  # the Hub repo's config.json, read by the mixin
            raise ValueError(
                f"{pretrained_model_name_or_path}'s config.json is nested too deeply to be a config"
            ) from None
        model.fast = fast
        return model

    @classmethod
    def _from_pretrained(
        cls,
        *,
        model_id: str,
        revision: str | None,
        cache_dir: str | Path | None,
        force_download: bool,
        local_files_only: bool,
        token: str | bool | None,
        map_location: str = "cpu",
        strict: bool = True,
        **model_kwargs: Any,
    ) -> MDLM:
        # replaces the mixin's, which prints, loads non-strictly by default and falls back to a pickle
        check_map_location(map_location)
        model_file = os.path.join(model_id, "model.safetensors")
        if not os.path.isdir(model_id):
            download = dict(revision=revision, cache_dir=cache_dir, force_download=force_download, token=token)
            model_file = hf_hub_download(model_id, "model.safetensors", local_files_only=local_files_only, **download)
            config_file = hf_hub_download(model_id, "config.json", local_files_only=local_files_only, **download)
            config = json.loads(Path(config_file).read_text(encoding="utf-8"))
            check_config_keys(config, f"{model_id}'s config.json", config_keys())
            hub = dict(download, local_files_only=local_files_only)
        model = load_weights(cls(**model_kwargs), model_file, map_location)
        model.loaded_from = (model_id, None if os.path.isdir(model_id) else hub)
        return model

    # where it came from: (folder or Hub repo id, the Hub download's arguments or None), for what its export wrote
    # beside its weights; None for a model built here
    loaded_from: tuple[str, dict | None] | None = None

    def word_list_file(self) -> Path | None:
        """The words.txt (the training text's words, which real_words keeps to) beside its weights, or None."""
        return self.export_file(WORD_LIST_FILE)

    def casts_file(self) -> Path | None:
        """The casts.json (each play's speakers, which keep_cast keeps to) beside its weights, or None."""
        return self.export_file(CASTS_FILE)

    def export_file(self, name: str) -> Path | None:
        """The file `name` its export wrote beside the weights it was loaded from (from a Hub repo, downloaded when
        first asked), or None where there is none."""
        if self.loaded_from is None:
            return None
        source, hub = self.loaded_from
        if hub is None:
            return file_in_folder(source, name)
        found = self.__dict__.setdefault("_hub_files", {})  # asked once: every default run reads them
        if name not in found:
            try:
                found[name] = Path(hf_hub_download(source, name, **hub))
            except Exception:  # an older export without one, or the Hub out of reach: the caller says what to pass
                found[name] = None
        return found[name]


def config_keys() -> set[str]:
    """The keys a config.json may hold: MDLM's named arguments, and those an earlier version wrote."""
    parameters = inspect.signature(MDLM.__init__).parameters.values()
    named = {p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD} - {"self"}
    return named | set(EARLIER_KEYS) | {"causal"}
