"""The training curve of a run's history, for its export's card."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mdlm_hf.plots import finished, pyplot

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def training_curve_figure(history: dict, score: str = "NELBO") -> Figure:
    """Training loss and the validation `score` (the NELBO; an autoregressive twin's NLL) against tokens seen, from a
    run's history ({"train": [...], "val": [...]}, the score under the key "nelbo")."""
    fig, ax = pyplot().subplots(figsize=(7, 4))
    if history.get("train"):
        train = history["train"]
        ax.plot(
            [h["tokens"] / 1e6 for h in train], [h["loss"] for h in train], alpha=0.5, label="training loss (one batch)"
        )
    if history.get("val"):
        val = history["val"]
        ax.plot([h["tokens"] / 1e6 for h in val], [h["nelbo"] for h in val], marker="o", label=f"validation {score}")
        averaged = [h for h in val if "nelbo_ema" in h]  # runs with an EMA of the weights score both
        if averaged:
            tokens, nelbo = [h["tokens"] / 1e6 for h in averaged], [h["nelbo_ema"] for h in averaged]
            ax.plot(tokens, nelbo, marker=".", label=f"validation {score}, EMA weights")
    ax.set(xlabel="tokens seen (millions)", ylabel="nats per character", title="Training")
    ax.grid(alpha=0.3)
    ax.legend()
    return finished(fig)
