"""Exponential moving average of the weights, for evaluation and export (as MDLM and most diffusion models do)."""

from __future__ import annotations

import torch
import torch.nn as nn


class EMA:
    """Shadow copy of a model's parameters, updated after every optimizer step. The decay ramps up as (1 + n) / (10 + n)
    to `decay` (diffusers' EMAModel warmup), so a short run's average is not its random initial weights'."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"EMA decay must be in (0, 1), got {decay}")
        self.decay = decay
        self.num_updates = 0
        self.names = [name for name, _ in model.named_parameters()]  # tied weights appear once
        self.shadow = [p.detach().clone().float() for _, p in model.named_parameters()]

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """shadow <- decay * shadow + (1 - decay) * parameters."""
        self.num_updates += 1
        decay = min(self.decay, (1 + self.num_updates) / (10 + self.num_updates))
        params = [p.detach().float() for p in model.parameters()]
        torch._foreach_lerp_(self.shadow, params, 1.0 - decay)

    def state_dict(self) -> dict:
        shadow = dict(zip(self.names, self.shadow, strict=True))
        return {"decay": self.decay, "num_updates": self.num_updates, "shadow": shadow}

    def load_state_dict(self, state: dict) -> None:
        if sorted(state["shadow"]) != sorted(self.names):
            raise ValueError("the checkpoint's EMA weights do not match the model's parameters")
        self.decay, self.num_updates = state["decay"], state["num_updates"]
        # checkpoints load on the CPU: the averages go back to the device of the parameters they follow
        self.shadow = [
            state["shadow"][name].to(old.device, torch.float32)
            for name, old in zip(self.names, self.shadow, strict=True)
        ]

    def weights(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """The model's state_dict with every parameter replaced by its average (buffers as they are)."""
        averaged = dict(zip(self.names, self.shadow, strict=True))
        state = model.state_dict()
        params = dict(model.named_parameters(remove_duplicate=False))
        for name in state:
            if name in params:
                # a tied alias (lm_head.weight) shares the shadow of the parameter it is tied to
                source = next(n for n in self.names if params[n] is params[name])
                state[name] = averaged[source].to(state[name].dtype)
        return state
