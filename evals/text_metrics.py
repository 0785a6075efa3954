"""The study's sample metrics: character entropy, distinct-n and a Kneser-Ney judge (moved here from the package,
which keeps what a user of the model needs).

The judge is a character n-gram model with interpolated Kneser-Ney smoothing, fit on the training
split only; its perplexity on generated text says how much that text looks like the training
distribution, independently of the diffusion model that wrote it.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable


def char_entropy(text: str) -> float:
    """Entropy of the character unigram distribution of `text`, in bits."""
    counts = Counter(text)
    total = sum(counts.values())
    return -sum(c / total * math.log2(c / total) for c in counts.values()) if total else 0.0


def distinct_n(text: str, n: int) -> float:
    """Share of distinct character n-grams among all n-grams of `text`."""
    grams = [text[i : i + n] for i in range(len(text) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


class KneserNeyJudge:
    """Character n-gram language model with interpolated Kneser-Ney smoothing (Chen & Goodman 1998).

    P(c | h) = max(N(h c) - D, 0) / N(h .) + D * types(h .) / N(h .) * P(c | h minus its first char)
    where N is the raw count at the top order and the continuation count (number of distinct characters
    seen before h c) below it; the recursion ends in a uniform distribution over the vocabulary, so
    every character has probability > 0 and each conditional sums to exactly 1.
    """

    def __init__(self, text: str, order: int = 5, discount: float = 0.75) -> None:
        if order < 1 or not text:
            raise ValueError("the judge needs order >= 1 and non-empty training text")
        if not 0 < discount < 1:
            raise ValueError("discount must be in (0, 1)")
        self.order, self.discount = order, discount
        self.vocab = sorted(set(text))
        top = order - 1
        # counts[k][context][char], context of length k
        self.counts: list[dict[str, Counter]] = [defaultdict(Counter) for _ in range(order)]
        for i in range(top, len(text)):
            self.counts[top][text[i - top : i]][text[i]] += 1
        for k in range(top):
            for gram in {text[i : i + k + 2] for i in range(len(text) - k - 1)}:  # distinct (k+2)-grams
                self.counts[k][gram[1:-1]][gram[-1]] += 1
        self.totals = [{h: sum(c.values()) for h, c in level.items()} for level in self.counts]
        self.types = [{h: len(c) for h, c in level.items()} for level in self.counts]

    def probability(self, char: str, history: str) -> float:
        """P(char | the last order-1 characters of history)."""
        history = history[len(history) - (self.order - 1) :] if self.order > 1 else ""
        p = 1.0 / len(self.vocab)
        for k in range(len(history) + 1):
            context = history[len(history) - k :]
            total = self.totals[k].get(context)
            if not total:
                break  # unseen context: the lower orders already hold the answer
            count = self.counts[k][context].get(char, 0)
            p = max(count - self.discount, 0.0) / total + self.discount * self.types[k][context] / total * p
        return p

    def log_likelihood(self, text: str) -> float:
        """Natural-log probability of `text`, each character conditioned on the ones before it."""
        return sum(math.log(self.probability(c, text[max(0, i - self.order + 1) : i])) for i, c in enumerate(text))

    def perplexity(self, texts: str | Iterable[str]) -> float:
        """Per-character perplexity of one text or of several together."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        num_chars = sum(len(t) for t in texts)
        if num_chars == 0:
            raise ValueError("perplexity of empty text")
        return math.exp(-sum(self.log_likelihood(t) for t in texts) / num_chars)
