"""The sampling study's figures: quality against steps, speed and diversity."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from mdlm_hf.plots import finished, pyplot

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# the study's quality metrics, as its steps figure shows them
STEP_METRICS = ("valid_word_rate", "judge_perplexity", "char_entropy_bits")


def label_colours(labels: list[str]) -> dict[str, Any]:
    """One colour per setting label, the same in every study figure."""
    return dict(zip(labels, pyplot().get_cmap("tab20").colors, strict=False))


# what the study's quality figures can put on their x axis: a row's key -> (axis label, in titles)
X_AXES = {"num_steps": ("denoising steps", "steps"), "forward_passes": ("forward passes per text", "forward passes")}


def quality_vs_steps_figure(
    curves: list[tuple[str, float, list[dict]]], reference: dict, colours: dict, x: str = "num_steps"
) -> Figure:
    """Valid words, judge perplexity and character entropy against steps (or `x`, another key of X_AXES): one curve
    per (label, temperature, rows), solid at temperature 1.0, dashed otherwise; black lines: real text."""
    xlabel, in_title = X_AXES[x]
    fig, axes = pyplot().subplots(1, 3, figsize=(17, 6))
    for label, temperature, rows in curves:
        style = "-" if temperature == 1.0 else "--"
        for ax, metric in zip(axes, STEP_METRICS, strict=True):
            xs, values = [r.get(x, r["num_steps"]) for r in rows], [r[metric] for r in rows]
            ax.plot(xs, values, style, color=colours[label], marker="o", label=f"{label}, T={temperature}")
    for ax, metric in zip(axes, STEP_METRICS, strict=True):
        ax.axhline(reference[metric], color="k", lw=0.8, label="real text")
        ax.grid(alpha=0.3)
    axes[2].axhspan(0.95 * reference["char_entropy_bits"], reference["char_entropy_bits"], color="k", alpha=0.08)
    axes[0].set(xscale="log", xlabel=xlabel, ylabel="valid-word rate", title=f"Valid words vs {in_title}")
    axes[1].set(
        xscale="log",
        xlabel=xlabel,
        yscale="log",
        ylabel="judge perplexity (lower is better)",
        title=f"Judge perplexity vs {in_title}",
    )
    axes[2].set(
        xscale="log",
        xlabel=xlabel,
        ylabel="character entropy, bits (shaded: within 5 % of real)",
        title=f"Diversity vs {in_title}",
    )
    handles, names = axes[1].get_legend_handles_labels()
    columns = 4 if max(map(len, names)) < 60 else 2  # long labels (many options on) need the width
    fig.legend(handles, names, loc="lower center", ncol=columns, fontsize=8, frameon=False)
    legend_height = min(0.5, 0.035 * math.ceil(len(names) / columns) + 0.06)  # of the figure, below the plots
    return finished(fig, rect=(0, legend_height, 1, 1))


def quality_vs_speed_figure(groups: dict[str, list[dict]], extras: list[dict], colours: dict) -> Figure:
    """Valid words against chars/s: one colour per label's rows, black crosses for the threshold / block rows."""
    fig, ax = pyplot().subplots(figsize=(6.5, 4.5))
    for label, rows in groups.items():
        speed, words = [r["chars_per_s"] for r in rows], [r["valid_word_rate"] for r in rows]
        ax.scatter(speed, words, label=label, s=18, color=colours[label])
    speed, words = [r["chars_per_s"] for r in extras], [r["valid_word_rate"] for r in extras]
    ax.scatter(speed, words, marker="x", c="k", label="threshold / blocks")
    ax.set(
        xscale="log", xlabel="chars/s (batch of samples, this CPU)", ylabel="valid-word rate", title="Quality vs speed"
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return finished(fig)


def words_vs_diversity_figure(points: list[tuple[str, dict]], reference: dict, colours: dict, num_steps: int) -> Figure:
    """Valid words against character entropy (÷ real text's) for each (label, row) at one step count, with the
    target region."""
    fig, ax = pyplot().subplots(figsize=(13, 6))
    ax.fill_between([0.95, 1.05], 0.85, 1.0, color="g", alpha=0.1, label="targets: >= 0.85 valid words, entropy +-5 %")
    ax.axhline(reference["valid_word_rate"], color="k", lw=0.8, label="real text")
    markers = "osD^vPX"
    for i, (label, row) in enumerate(points):
        x, y = row["char_entropy_bits"] / reference["char_entropy_bits"], row["valid_word_rate"]
        marker = markers[i % len(markers)]
        ax.scatter([x], [y], color=colours[label], marker=marker, s=45, zorder=3, label=label)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.set(
        xlabel="character entropy / real text's",
        ylabel="valid-word rate",
        title=f"Words against diversity at {num_steps} steps, temperature 1.0 (32 x 256 chars each)",
        xlim=(0.82, 1.06),
    )
    ax.grid(alpha=0.3)
    return finished(fig)
