"""Character-level tokenizer with a [MASK] id that sits after the vocabulary."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

MASK_GLYPH = "█"  # how a masked position is drawn when decoding a partially denoised canvas


class CharTokenizer:
    """Maps each character of `vocab` to its index; the mask id is `len(vocab)`."""

    def __init__(self, vocab: str) -> None:
        if not isinstance(vocab, str) or not vocab:
            raise ValueError("vocab must be a non-empty string of distinct characters")
        if MASK_GLYPH in vocab:
            raise ValueError(f"vocab must not hold {MASK_GLYPH!r}: it draws a masked position when decoding")
        if len(set(vocab)) != len(vocab):
            duplicates = sorted({c for c in vocab if vocab.count(c) > 1})
            raise ValueError(f"vocab has repeated characters: {', '.join(map(repr, duplicates))}")
        self.vocab = vocab
        self.char_to_id = {c: i for i, c in enumerate(vocab)}
        self.mask_id = len(vocab)

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        """Builds the vocabulary from every distinct character of `text`, sorted."""
        if not text:
            raise ValueError("cannot build a vocabulary from empty text")
        return cls("".join(sorted(set(text))))

    @property
    def vocab_size(self) -> int:
        """Number of ids including [MASK]."""
        return len(self.vocab) + 1

    def unknown_chars(self, text: str) -> list[str]:
        """Characters of `text` outside the vocabulary, in order of first appearance."""
        return list(dict.fromkeys(c for c in text if c not in self.char_to_id))

    def encode(self, text: str) -> list[int]:
        """Text to ids; raises ValueError naming every character outside the vocabulary."""
        unknown = self.unknown_chars(text)
        if unknown:
            raise ValueError(
                f"text has {len(unknown)} character(s) outside the model's vocabulary: " + ", ".join(map(repr, unknown))
            )
        return [self.char_to_id[c] for c in text]

    def decode(self, ids: Iterable[int] | int, mask_glyph: str = MASK_GLYPH) -> str:
        """Ids (or one id) to text; [MASK] becomes `mask_glyph`."""
        if isinstance(ids, int) or (isinstance(ids, torch.Tensor) and ids.dim() == 0):
            ids = [int(ids)]  # a streamer decodes a single id too (transformers' TextStreamer at a line's end)
        out = []
        for i in ids:
            i = int(i)
            if i == self.mask_id:
                out.append(mask_glyph)
            elif 0 <= i < self.mask_id:
                out.append(self.vocab[i])
            else:
                raise ValueError(f"id {i} is outside [0, {self.mask_id}]")
        return "".join(out)

    def decode_batch(self, rows: Sequence[Iterable[int]], mask_glyph: str = MASK_GLYPH) -> list[str]:
        """Decodes each row of a (B, T) array of ids."""
        return [self.decode(row, mask_glyph) for row in rows]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharTokenizer) and other.vocab == self.vocab

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"
