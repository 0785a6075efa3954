"""The denoiser: a bidirectional transformer that predicts the clean character at every position.

The model stacks mdlm_hf/layers.py's blocks (rotary attention, MLP) and is also a `PyTorchModelHubMixin`, so
`save_pretrained` / `from_pretrained` / `push_to_hub` just work. Its text methods (generate, complete, infill,
stream) are thin wrappers over mdlm_hf.pipeline, rewrite over mdlm_hf.rewriting.

With `causal=True` the same network is the autoregressive twin (mdlm_hf/autoregressive.py): each position sees
only those before it and predicts the next character, and a `KVCache` keeps the keys and values of what it has read.
What else differs between the two kinds lives in mdlm_hf/objectives.py; saving and loading weights in mdlm_hf/hub.py.
"""

from __future__ import annotations

import inspect
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
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
from mdlm_hf.inference import check_token_ids
from mdlm_hf.kv_cache import KVCache
from mdlm_hf.layers import Block, RotaryEmbedding, TimeEmbedding, make_norm, mlp_hidden
from mdlm_hf.objectives import objective_of
from mdlm_hf.sampling.options import SamplerOptions
from mdlm_hf.sampling.state import SamplerState
from mdlm_hf.tokenizer import CharTokenizer

MLP_KINDS = ("gelu", "relu2", "swiglu")
NORM_KINDS = ("layernorm", "rmsnorm")
# bounds on a config, so a malformed or hostile config.json is refused before anything is allocated
CONFIG_LIMITS = {"n_layer": 64, "n_head": 8192, "n_embd": 8192, "block_size": 65536}
CASTS_FILE = "casts.json"  # beside the weights: each play's speakers (training/casts.py writes it)
WORD_LIST_FILE = "words.txt"  # beside the weights: the training text's words (training/export.py writes it)
MAX_VALUES = 2**30  # parameters and position tables together: 4 GiB in fp32


def check_config(
    vocab: object,
    n_layer: object,
    n_head: object,
    n_embd: object,
    block_size: object,
    dropout: object,
    position_encoding: object,
    time_conditioning: object,
    norm: object,
    mlp: object,
    qk_norm: object,
    causal: object = False,
) -> None:
    """Raises ValueError naming the first field of an MDLM config of the wrong type or outside its bounds."""
    if not isinstance(vocab, str) or not vocab:
        raise ValueError(f"vocab must be a non-empty string of distinct characters, got {type(vocab).__name__}")
    for name, value in (("n_layer", n_layer), ("n_head", n_head), ("n_embd", n_embd), ("block_size", block_size)):
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= CONFIG_LIMITS[name]:
            raise ValueError(f"{name} must be an integer in [1, {CONFIG_LIMITS[name]}], got {described(value)}")
    if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be a number in [0, 1), got {described(dropout)}")
    for name, value, choices in (
        ("position_encoding", position_encoding, ("rope", "learned")),
        ("norm", norm, NORM_KINDS),
        ("mlp", mlp, MLP_KINDS),
    ):
        if not isinstance(value, str) or value not in choices:
            raise ValueError(f"{name} must be one of {choices}, got {described(value)}")
    for name, value in (("time_conditioning", time_conditioning), ("qk_norm", qk_norm), ("causal", causal)):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {described(value)}")
    if causal and time_conditioning:
        raise ValueError("time_conditioning is for a diffusion model's mask ratio; a causal model reads no masks")
    if n_embd % n_head != 0 or (n_embd // n_head) % 2 != 0:
        raise ValueError(f"n_embd ({n_embd}) must split into n_head ({n_head}) heads of even size")
    hidden = mlp_hidden(n_embd, mlp)
    per_block = 4 * n_embd * n_embd + (3 if mlp == "swiglu" else 2) * hidden * n_embd
    tables = (len(vocab) + 1) * n_embd + block_size * (n_embd if position_encoding == "learned" else n_embd // n_head)
    values = n_layer * per_block + tables + (n_embd * n_embd if time_conditioning else 0)
    if values > MAX_VALUES:
        raise ValueError(
            f"n_layer {n_layer}, n_embd {n_embd}, block_size {block_size} and a vocab of {len(vocab)} describe "
            f"about {values:,} weights, more than the {MAX_VALUES:,} an mdlm_hf model may have"
        )


class MDLM(
    nn.Module,
    PyTorchModelHubMixin,
    library_name="mdlm_hf",
    repo_url=REPO_URL,
    pipeline_tag="text-generation",
    tags=["masked-diffusion", "diffusion-language-model", "character-level", "mdlm"],
    model_card_template=MODEL_CARD_TEMPLATE,
):
    """Bidirectional transformer denoiser p(x_0 | x_t) over characters, with [MASK] as the last id (or, with
    `causal`, the same network as a left-to-right model p(x_i | x_<i): the autoregressive twin).

    Every `__init__` argument is JSON-safe and is written to `config.json` by `save_pretrained`:
      vocab              the characters the model knows, in id order; [MASK] is id len(vocab)
      n_layer, n_head    depth and number of attention heads
      n_embd             width of the residual stream
      block_size         longest canvas the model accepts
      dropout            dropout in attention and MLP (0 for the small-data, short-training regime)
      position_encoding  "rope" (rotary, relative) or "learned" (absolute table, as in GPT-2)
      time_conditioning  feed the mask ratio t to the network; off by default as in MDLM, since the
                         number of masks already tells the model the noise level, and then an
                         unchanged canvas gives unchanged logits (which lets the sampler skip passes)
      norm               "layernorm" (GPT-2) or "rmsnorm" (no mean, no bias: cheaper, as in LLaMA)
      mlp                "gelu", "relu2" (squared ReLU) or "swiglu", all at about 8*C^2 parameters
      qk_norm            RMS-normalise queries and keys per head before RoPE
      causal             the autoregressive twin: each position sees those before it and predicts the next
                         character; its input starts with [MASK] as the "nothing read yet" token, so a window
                         of block_size scores block_size characters (mdlm_hf/autoregressive.py). False: the
                         bidirectional denoiser, [MASK] marking the characters to predict
    norm, mlp, qk_norm and causal default to the first shipped model's choices: older config.json files load as saved.
    A config of the wrong types or beyond CONFIG_LIMITS / MAX_VALUES is a ValueError naming the field.

    The model card's front matter names no license: the weights' terms are their trainer's, and an export
    states them (training/export.py --license).
    """

    def __init__(
        self,
        vocab: str,
        n_layer: int = 6,
        n_head: int = 6,
        n_embd: int = 384,
        block_size: int = 256,
        dropout: float = 0.0,
        position_encoding: str = "rope",
        time_conditioning: bool = False,
        norm: str = "layernorm",
        mlp: str = "gelu",
        qk_norm: bool = False,
        causal: bool = False,
    ) -> None:
        super().__init__()
        check_config(
            vocab,
            n_layer,
            n_head,
            n_embd,
            block_size,
            dropout,
            position_encoding,
            time_conditioning,
            norm,
            mlp,
            qk_norm,
            causal,
        )
        self.tokenizer = CharTokenizer(vocab)
        self.mask_id = self.tokenizer.mask_id
        self.vocab_size = self.tokenizer.vocab_size
        self.block_size = block_size
        self.time_conditioning = time_conditioning
        self.causal = causal

        rotary = RotaryEmbedding(n_embd // n_head, block_size) if position_encoding == "rope" else None
        self.token_embedding = nn.Embedding(self.vocab_size, n_embd)
        self.position_embedding = nn.Embedding(block_size, n_embd) if position_encoding == "learned" else None
        self.time_embedding = TimeEmbedding(n_embd) if time_conditioning else None
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            [Block(n_embd, n_head, dropout, rotary, norm, mlp, qk_norm, causal) for _ in range(n_layer)]
        )
        self.ln_f = make_norm(norm, n_embd)
        self.lm_head = nn.Linear(n_embd, self.vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight  # weight tying
        self.n_layer = n_layer
        self.apply(self._init_weights)
        self._fast_path = FastPath()  # a plain attribute: the bf16 copy stays out of state_dict
        self.fast = False  # from_pretrained turns it on

    @property
    def fast(self) -> bool:
        """Whether the sampler (`denoise`) runs on bf16 weights where they are faster here (see mdlm_hf.fast)."""
        return self._fast

    @fast.setter
    def fast(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise ValueError(f"fast must be True or False, got {described(value)}")
        self._fast = value

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            # GPT-2: residual projections scaled down so the residual stream's variance stays put with depth
            std = 0.02 / math.sqrt(2 * self.n_layer) if getattr(module, "is_residual_projection", False) else 0.02
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_parameters(self) -> int:
        """Number of distinct parameters (tied weights counted once)."""
        return sum(p.numel() for p in self.parameters())

    def forward(
        self, tokens: torch.Tensor, t: torch.Tensor | None = None, cache: KVCache | None = None
    ) -> torch.Tensor:
        """Logits (B, T, V) of x_0 given the noisy canvas `tokens` (B, T); [MASK] gets -inf. A causal model: of the
        character after each position, given `tokens` (after what `cache` holds, which this pass extends)."""
        # type, rank and device, not the ids: reading them back would stall a GPU at every training step
        check_token_ids(tokens, self, "tokens", dims=(2,), masks=True, values=False, same_device=True)
        B, T = tokens.shape
        start = 0
        if cache is not None:
            if not self.causal:
                raise ValueError("a KVCache is for a causal model: a diffusion model's positions all see each other")
            start = cache.length
            if start and T > 1:
                raise ValueError("after a cached prefix a causal model reads one position a pass")
        if start + T > self.block_size:
            raise ValueError(f"canvas length {start + T} exceeds the model's block_size {self.block_size}")
        x = self.token_embedding(tokens)  # (B, T, C)
        if self.position_embedding is not None:
            x = x + self.position_embedding(torch.arange(start, start + T, device=tokens.device))  # (T, C) broadcast
        if self.time_embedding is not None:
            if t is None:
                raise ValueError("this model is time-conditioned: pass the mask ratio t of shape (B,)")
            x = x + self.time_embedding(t)[:, None, :]  # (B, 1, C) broadcast over positions
        x = self.dropout(x)
        for i, block in enumerate(self.blocks):
            x = block(x, None if cache is None else cache.layers[i])
        logits = self.lm_head(self.ln_f(x)).float()  # (B, T, V)
        # the clean text never contains [MASK] (a causal model's start token), so the model can never predict it
        logits[..., self.mask_id] = float("-inf")
        return logits

    def denoise(
        self, tokens: torch.Tensor, t: torch.Tensor | None = None, cache: KVCache | None = None
    ) -> torch.Tensor:
        """The sampler's forward: logits (B, T, V) from the fast path when `fast` is on, else `forward` (exact)."""
        runner = self if not self.fast or self.training or torch.is_grad_enabled() else self._fast_path.runner(self)
        return runner(tokens, t) if cache is None else runner(tokens, t, cache)

    @property
    def denoise_dtype(self) -> torch.dtype:
        """The weights' dtype that `denoise` runs on in eval mode: bfloat16 where the fast path chose its copy (asking
        may make the copy and time it, as the first sampling pass would)."""
        if not self.fast:
            return self.lm_head.weight.dtype
        with torch.no_grad():
            return self._fast_path.runner(self).lm_head.weight.dtype

    # --- text: thin wrappers over mdlm_hf.pipeline (the one sampler core, with the study's recommended options
    # unless `options` or single options by name say otherwise) ---

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
        objective = objective_of(self)
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
        if not isinstance(fast, bool):
            raise ValueError(f"fast must be True or False, got {described(fast)}")
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
        """The words.txt its export wrote beside the weights it was loaded from (the training text's words, which
        real_words keeps to; from a Hub repo, downloaded when first asked), or None where there is none."""
        return self.export_file(WORD_LIST_FILE)

    def casts_file(self) -> Path | None:
        """The casts.json its export wrote beside the weights it was loaded from (each play's speakers, which
        keep_cast keeps to; from a Hub repo, downloaded when first asked), or None where there is none."""
        return self.export_file(CASTS_FILE)

    def export_file(self, name: str) -> Path | None:
        """The file `name` its export wrote beside the weights it was loaded from, or None where there is none."""
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
    """The keys a config.json may hold: MDLM's arguments."""
    return set(inspect.signature(MDLM.__init__).parameters) - {"self"}
