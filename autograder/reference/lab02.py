"""Reference for lab02 (choosing among candidates): course.sampling under the lab's names,
and transformers' warpers, which the judges of `*_transformers` cases compute with.

The course's functions are themselves tested against transformers in tests/test_sampling.py.
"""
from __future__ import annotations

import torch

from course import sampling as S

top_k_filter = S.top_k_filter
top_p_filter = S.top_p_filter
sample_token = S.sample_token
check_logits = S.check_logits


def filter_logits(logits, *, temperature=1.0, top_k=None, top_p=1.0):
    return S.filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p)


def transformers_pipeline(logits: torch.Tensor, *, temperature=1.0, top_k=None, top_p=1.0) -> torch.Tensor:
    """transformers' LogitsProcessorList([Temperature, TopK, TopP]) on (V,) or (B, V) logits."""
    from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    procs = LogitsProcessorList()
    if temperature != 1.0:
        procs.append(TemperatureLogitsWarper(float(temperature)))
    if top_k is not None:
        procs.append(TopKLogitsWarper(int(top_k)))
    if top_p < 1.0:
        procs.append(TopPLogitsWarper(float(top_p)))
    x = logits if logits.dim() == 2 else logits[None]
    out = procs(None, x.clone())
    return out if logits.dim() == 2 else out[0]


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> tuple[float, int, float]:
    """Pearson's statistic, its degrees of freedom (bins - 1), and P(chi2_df >= statistic)."""
    counts, probs = counts.double(), probs.double()
    expected = probs * counts.sum()
    stat = float(((counts - expected) ** 2 / expected).sum())
    df = probs.numel() - 1
    p_value = float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64),
                                            torch.tensor(stat / 2, dtype=torch.float64)))
    return stat, df, p_value
