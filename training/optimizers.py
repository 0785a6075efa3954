"""The optimizers of a run: AdamW for everything, or Muon for the blocks' matrices and AdamW for the rest; and their
learning-rate schedule."""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from training.flags import RunSettings


def parameter_groups(model: nn.Module) -> dict[str, list[torch.Tensor]]:
    """Each parameter exactly once: hidden matrices, embeddings (tied to the output head), and gains/biases. Muon's
    whole-matrix updates suit the blocks' linear maps; the embedding (a lookup table) and the vectors stay on AdamW
    (modded-nanoGPT's split)."""
    groups: dict[str, list[torch.Tensor]] = {"matrices": [], "embeddings": [], "vectors": []}
    for name, p in model.named_parameters():  # tied weights are yielded once
        if p.dim() < 2:
            groups["vectors"].append(p)
        elif name.startswith("blocks."):
            groups["matrices"].append(p)
        else:
            groups["embeddings"].append(p)
    return groups


def build_optimizers(model: nn.Module, args: RunSettings, fused: bool = False) -> list[torch.optim.Optimizer]:
    """AdamW (lr, weight decay on matrices and embeddings) or Muon + AdamW; every group keeps its peak lr."""
    groups = parameter_groups(model)
    adamw_groups = [
        {"params": groups["embeddings"], "weight_decay": args.weight_decay, "peak_lr": args.lr},
        {"params": groups["vectors"], "weight_decay": 0.0, "peak_lr": args.lr},
    ]
    optimizers: list[torch.optim.Optimizer] = []
    if args.optimizer == "muon":
        muon = torch.optim.Muon(
            groups["matrices"], lr=args.muon_lr, weight_decay=args.muon_weight_decay, momentum=args.muon_momentum
        )
        for group in muon.param_groups:
            group["peak_lr"] = args.muon_lr
        optimizers.append(muon)
    else:
        adamw_groups.insert(0, {"params": groups["matrices"], "weight_decay": args.weight_decay, "peak_lr": args.lr})
    adamw = torch.optim.AdamW(
        [g for g in adamw_groups if g["params"]], lr=args.lr, betas=(args.beta1, args.beta2), fused=fused
    )
    return [*optimizers, adamw]


def learning_rate(step: int, args: RunSettings) -> float:
    """Linear warmup, then cosine decay from lr to min_lr at max_steps."""
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    progress = min(1.0, (step - args.warmup_steps) / max(1, args.max_steps - args.warmup_steps))
    return args.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (args.lr - args.min_lr)


def set_learning_rates(optimizers: list[torch.optim.Optimizer], step: int, args: RunSettings) -> None:
    """Every group at the schedule's point of `step`: its own peak learning rate, scaled as the schedule scales lr."""
    factor = learning_rate(step, args) / args.lr
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            group["lr"] = group["peak_lr"] * factor
