"""Optimizers and EMA (training/optimizers.py, ema.py): parameter groups, the average, its weights exported."""

import json

import pytest
import torch

import training.checkpoints
from mdlm_hf import MDLM
from tests.training_helpers import run
from training import export, train
from training.ema import EMA
from training.optimizers import build_optimizers, parameter_groups


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_optimizer_groups_cover_every_parameter_exactly_once(optimizer):
    model = MDLM("abcdef", n_layer=2, n_head=2, n_embd=32, block_size=16)
    groups = parameter_groups(model)
    assert groups["matrices"] and groups["embeddings"] and groups["vectors"]
    args, _ = train.parse_args(["--optimizer", optimizer])
    optimizers = build_optimizers(model, args)
    in_optimizers = [p for o in optimizers for g in o.param_groups for p in g["params"]]
    assert len(in_optimizers) == len({id(p) for p in in_optimizers}) == len(list(model.parameters()))
    assert {id(p) for p in in_optimizers} == {id(p) for p in model.parameters()}
    if optimizer == "muon":
        assert isinstance(optimizers[0], torch.optim.Muon)
        assert all(p.dim() == 2 for g in optimizers[0].param_groups for p in g["params"])


def test_ema_averages_and_ramps_up():
    model = torch.nn.Linear(2, 2, bias=False)
    ema = EMA(model, decay=0.9)
    with torch.no_grad():
        model.weight.fill_(1.0)
    before = ema.shadow[0].clone()
    ema.update(model)  # first update: decay min(0.9, 2/11)
    assert torch.allclose(ema.shadow[0], before + (1 - 2 / 11) * (1.0 - before))
    for _ in range(200):
        ema.update(model)
    assert torch.allclose(ema.shadow[0], torch.ones(2, 2), atol=1e-6)
    with pytest.raises(ValueError, match="decay"):
        EMA(model, decay=1.0)


def test_ema_weights_round_trip_through_checkpoint_and_export(text_file, tmp_path):
    settings = ["--max-steps", "10", "--ema", "0.9", "--optimizer", "muon"]
    straight = run(text_file, tmp_path / "straight", *settings)
    run(text_file, tmp_path / "split", *settings, "--stop-at-step", "4")
    resumed = run(text_file, tmp_path / "split", "--resume")  # the run's own settings: EMA and Muon included
    a = torch.load(tmp_path / "straight" / "ckpt.pt", weights_only=True)
    b = torch.load(tmp_path / "split" / "ckpt.pt", weights_only=True)
    assert a["ema"]["num_updates"] == b["ema"]["num_updates"] == 10
    for name, shadow in a["ema"]["shadow"].items():
        assert torch.equal(shadow, b["ema"]["shadow"][name]), name
    for name, weight in straight["model"].state_dict().items():
        assert torch.equal(weight, resumed["model"].state_dict()[name]), name
    assert not torch.equal(a["ema"]["shadow"]["blocks.0.mlp.fc.weight"], a["model"]["blocks.0.mlp.fc.weight"])
    history = json.loads((tmp_path / "split" / "history.json").read_text())
    assert all("nelbo_ema" in h for h in history["val"])
    # best.pt holds whichever of the two scored better at its step
    best = torch.load(tmp_path / "split" / "best.pt", weights_only=True)
    record = next(h for h in history["val"] if h["step"] == best["step"])
    assert best["val_nelbo"] == min(record["nelbo"], record["nelbo_ema"])
    assert best["weights"] == ("ema" if record["nelbo_ema"] < record["nelbo"] else "raw")

    # the export writes whatever best.pt holds; give it the averaged weights and read them back
    ema = EMA(straight["model"], 0.9)
    ema.load_state_dict(a["ema"])
    best = torch.load(tmp_path / "split" / "best.pt", weights_only=True)
    best.update(weights="ema", model=ema.weights(straight["model"]))
    training.checkpoints.save_checkpoint(tmp_path / "split" / "best.pt", best)
    export.export_run(tmp_path / "split", tmp_path / "export", text_file, weights_dtype="float32")
    loaded = MDLM.from_pretrained(tmp_path / "export")
    for name, shadow in a["ema"]["shadow"].items():
        assert torch.equal(loaded.state_dict()[name], shadow), name
    assert loaded.lm_head.weight is loaded.token_embedding.weight
