"""Figures shared by the app and the training scripts (matplotlib is imported only when one is drawn)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def accuracy_figure(results: list[tuple[float, float]], title: str = "Denoising accuracy vs mask ratio") -> Figure:
    """Accuracy at masked positions against the mask ratio, as in the seed notebooks' figure."""
    import matplotlib

    matplotlib.use("Agg")  # files and web pages only; no display on a server
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot([r for r, _ in results], [a for _, a in results], marker="o", color="#0e7c66")
    ax.set(xlabel="mask ratio t", ylabel="accuracy at masked positions", ylim=(0, 1), title=title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    plt.close(fig)  # the figure lives on for savefig / gr.Plot; pyplot forgets it
    return fig
