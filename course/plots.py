"""Plotting helpers the labs share: labelled probability bars, and little else."""
from __future__ import annotations

import torch

from ._checks import check_int


def _labels(vocab, n):
    if vocab is None:
        return [str(i) for i in range(n)]
    return [repr(v)[1:-1] or "''" for v in vocab]  # show "\n" as \n, not a line break


def prob_bars(probs, vocab=None, *, ax=None, title=None, highlight=None, top=None):
    """Bar chart of a 1-D probability vector with token labels.

    probs: (V,) tensor or list.  vocab: token strings (len V) or None.
    highlight: token ids drawn in a second colour (e.g. the tokens top-p keeps).
    top: show only the `top` most likely tokens, most likely first.
    Returns the matplotlib Axes.
    """
    import matplotlib.pyplot as plt

    p = torch.as_tensor(probs, dtype=torch.float32).detach().cpu()
    if p.dim() != 1:
        raise ValueError(f"`probs` must be 1-D (one distribution), got shape {tuple(p.shape)}.")
    if vocab is not None and len(vocab) != p.numel():
        raise ValueError(f"`vocab` must have {p.numel()} entries to label `probs`, got {len(vocab)}.")
    ids = list(range(p.numel()))
    if top is not None:
        check_int("top", top, 1)
        ids = torch.argsort(p, descending=True, stable=True)[:top].tolist()
    labels = _labels(vocab, p.numel())
    keep = set(highlight or [])
    colors = ["tab:orange" if i in keep else "tab:blue" for i in ids]
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4, 0.45 * len(ids)), 2.6))
    ax.bar(range(len(ids)), [float(p[i]) for i in ids], color=colors)
    ax.set_xticks(range(len(ids)))
    ax.set_xticklabels([labels[i] for i in ids], rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("probability")
    ax.set_ylim(0, max(1e-9, float(p.max())) * 1.15)
    if title:
        ax.set_title(title)
    return ax


def line(xs, ys, *, xlabel, ylabel, title=None, ax=None, label=None, logx=False):
    """One labelled line, for curves such as entropy against temperature."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 2.8))
    ax.plot(list(xs), list(ys), marker="o", markersize=3, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log")
    if title:
        ax.set_title(title)
    if label:
        ax.legend()
    return ax
