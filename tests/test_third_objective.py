"""A third objective, defined in this file alone and registered at run time, goes all the way: training's command
line, the export, `MDLM.from_pretrained`, generate, evaluation and the app's loading. Nothing outside this file
names it: everything that offers a choice of objectives reads mdlm_hf.objectives.OBJECTIVES when it runs.

The toy is block diffusion: the window is cut into blocks of BLOCK characters, each position sees its own block and
those before it (a block-causal attention mask), and training masks characters of the window's last block only,
the blocks before it being their clean context.
"""

import json
import math
from dataclasses import fields

import pytest
import torch
import torch.nn.functional as F

from mdlm_hf import MDLM, SamplerOptions, diffusion
from mdlm_hf.inference import evaluating
from mdlm_hf.objectives import OBJECTIVES, Objective, objective_of, register_objective
from mdlm_hf.sampling.loop import write_by_denoising
from mdlm_hf.sampling.options import STUDIED_OPTIONS
from tests.training_helpers import run
from training import evaluate, export, train

BLOCK = 8  # characters a block; TINY_ARGS' windows of 32 are four blocks

CARD = """---
{{ card_data }}
---

# {{ title | default("mdlm_hf: a toy block diffusion model", true) }}

{% if evaluation is defined -%}
Validation NLL of the last block: **{{ "%.4f" | format(evaluation.block_nll) }} nats/char**.
{% endif -%}
{% if training is defined -%}
Recipe: {{ training.recipe }}
{% endif %}
"""


def block_causal(T: int, device: torch.device) -> torch.Tensor:
    """(T, T) bool: row i sees the columns of its own block and of the blocks before it."""
    blocks = torch.arange(T, device=device) // BLOCK
    return blocks[None, :] <= blocks[:, None]


def block_loss(
    model: torch.nn.Module,
    tokens: torch.Tensor,
    generator: torch.Generator,
    weighting: str = "uniform",
    t_min: float = 1e-3,
) -> torch.Tensor:
    """Cross-entropy at the masks of each window's last block, each of its characters masked with probability t ~
    U[t_min, 1) and the last always, in nats per masked character; the weighting is the diffusion loss's, unread
    here."""
    B, T = tokens.shape
    start = (T - 1) // BLOCK * BLOCK  # the last block's first position
    t = t_min + (1 - t_min) * torch.rand(B, 1, generator=generator)
    is_masked = torch.zeros(B, T, dtype=torch.bool)
    is_masked[:, start:] = torch.rand(B, T - start, generator=generator) < t
    is_masked[:, -1] = True
    is_masked = is_masked.to(tokens.device)
    logits = model(torch.where(is_masked, getattr(model, "module", model).mask_id, tokens))  # (B, T, V)
    nats = F.cross_entropy(logits.transpose(1, 2), tokens, reduction="none")  # (B, T)
    return (nats * is_masked).sum() / is_masked.sum()


def block_validation(
    model: torch.nn.Module, tokens: torch.Tensor, num_samples: int, generator: torch.Generator
) -> float:
    """The loss over the split's whole windows, `num_samples` mask draws each, in nats per masked character."""
    L = model.block_size
    windows = tokens[: tokens.numel() // L * L].view(-1, L).to(next(model.parameters()).device)
    with torch.no_grad(), evaluating(model):
        return sum(block_loss(model, windows, generator).item() for _ in range(num_samples)) / num_samples


BLOCKS = Objective(
    name="blocks",
    title="a toy block diffusion model",
    is_causal=False,
    attn_mask=block_causal,
    # within its block a mask reads the text on both sides of it, which is what the app's Infill asks of its model
    fills_blanks=True,
    uses_kv_cache=False,
    score="block_nll",
    score_label="block NLL",
    # the reveal chain left to right is the chain rule for it too: a position never sees a later block
    nll_orders=("left_to_right",),
    loss=block_loss,
    validation_nats=block_validation,
    char_nats=diffusion.char_nll,
    exact_nll=diffusion.exact_nll,
    surprise_steps=diffusion.surprise_steps,
    writer=write_by_denoising,
    default_options=SamplerOptions,
    accepted_options=tuple(f.name for f in fields(SamplerOptions)),
    recorded_options=STUDIED_OPTIONS,
    settings=("t_min", "eval_samples"),
    card_template=CARD,
    card_tags=("block-diffusion", "character-level"),
)


@pytest.fixture
def blocks():
    register_objective(BLOCKS)
    yield BLOCKS
    del OBJECTIVES[BLOCKS.name]


def test_training_refuses_the_objective_until_it_is_registered(blocks, capsys):
    del OBJECTIVES[BLOCKS.name]
    with pytest.raises(SystemExit):
        train.parse_args(["--objective", "blocks"])
    assert "invalid choice: 'blocks'" in capsys.readouterr().err
    register_objective(BLOCKS)
    assert train.parse_args(["--objective", "blocks"])[0].objective == "blocks"
    with pytest.raises(SystemExit):  # the diffusion loss's weighting is not its
        train.parse_args(["--objective", "blocks", "--loss-weighting", "elbo"])
    assert "--loss-weighting is not an option of --objective blocks" in capsys.readouterr().err


def test_a_third_objective_trains_exports_loads_writes_evaluates_and_serves(blocks, text_file, tmp_path):
    summary = run(text_file, tmp_path / "run", "--objective", "blocks", "--max-steps", "20", "--t-min", "0.2")
    assert summary["finished"] and objective_of(summary["model"]) is BLOCKS
    history = torch.load(tmp_path / "run" / "ckpt.pt", weights_only=False)["history"]["val"]
    assert history[-1]["nelbo"] < history[0]["nelbo"] < math.log(summary["model"].mask_id) + 0.5  # it learns

    export.main(
        ["--run-dir", str(tmp_path / "run"), "--export-dir", str(tmp_path / "export"), "--data", str(text_file)]
    )
    assert json.loads((tmp_path / "export" / "config.json").read_text())["objective"] == "blocks"
    metrics = json.loads((tmp_path / "export" / "metrics.json").read_text())
    card = (tmp_path / "export" / "README.md").read_text()
    assert f"**{metrics['val_block_nll_nats_per_char']:.4f} nats/char**" in card and "- block-diffusion" in card
    assert "t_min=0.2" in card and "loss_weighting" not in card  # its own settings, not the diffusion loss's
    assert "accuracy_by_mask_ratio" not in metrics and list(metrics["exact_nll_nats_per_char"]) == ["left_to_right"]

    model = MDLM.from_pretrained(tmp_path / "export")
    assert model.objective is BLOCKS
    tokens = torch.randint(0, model.mask_id, (1, 2 * BLOCK), generator=torch.Generator().manual_seed(0))
    later, earlier = tokens.clone(), tokens.clone()
    later[0, -1] = (later[0, -1] + 1) % model.mask_id
    earlier[0, 0] = (earlier[0, 0] + 1) % model.mask_id
    with torch.no_grad():
        logits = model(tokens)
        assert torch.equal(model(later)[0, :BLOCK], logits[0, :BLOCK])  # the first block never sees the second
        assert not torch.allclose(model(earlier)[0, BLOCK:], logits[0, BLOCK:])  # the second sees the first
    text = model.generate(length=40, seed=0, num_steps=8)
    assert len(text) == 40 and not model.tokenizer.unknown_chars(text)

    report = evaluate.main(["--model", str(tmp_path / "export"), "--data", str(text_file), "--nll-chars", "64"])
    assert report["val_block_nll_nats_per_char"] == pytest.approx(metrics["val_block_nll_nats_per_char"], abs=0.05)
    assert report["exact_nll_chars"] == 64 and len(report["samples"]) == 3

    import app
    from mdlm_space import loading

    served, known_words = loading.load_model(tmp_path / "export")
    assert served.objective is BLOCKS and known_words
    demo = app.build_demo(served, known_words, loading.load_demo_metadata(tmp_path / "export"))
    assert demo.title.startswith("mdlm_hf: ")
