"""The accuracy-by-mask-ratio figure, which the app draws (How it works) and the export puts on the card, and the
helpers every figure shares (training's curve: training/plots.py). matplotlib
(the `plots` extra) is imported only when a figure is drawn, so the package works without it. Each function
returns a closed Figure, ready for `savefig` or `gr.Plot`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend: files and web pages only, no display on a server."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def finished(fig: Figure, **layout: Any) -> Figure:
    """Lays the figure out and lets pyplot forget it; it lives on for savefig / gr.Plot."""
    fig.tight_layout(**layout)
    pyplot().close(fig)
    return fig


def accuracy_figure(results: list[tuple[float, float]], title: str = "Denoising accuracy vs mask ratio") -> Figure:
    """Accuracy at masked positions against the mask ratio, as in the seed notebooks' figure."""
    fig, ax = pyplot().subplots(figsize=(6, 3.6))
    ax.plot([r for r, _ in results], [a for _, a in results], marker="o", color="#0e7c66")
    ax.set(xlabel="mask ratio t", ylabel="accuracy at masked positions", ylim=(0, 1), title=title)
    ax.grid(alpha=0.3)
    return finished(fig)
