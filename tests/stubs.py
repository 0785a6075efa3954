"""Stand-ins for MDLM that predict fixed distributions, for tests of the sampler and the likelihoods."""

import torch
from torch import nn


class StubModel(nn.Module):
    """What the sampler and the likelihood functions read of a model (mask_id, vocab_size, block_size, a
    parameter for the device); subclasses give `forward(tokens) -> logits (B, T, V)`."""

    def __init__(self, vocab_size: int, block_size: int = 64) -> None:
        super().__init__()
        self.mask_id, self.vocab_size, self.block_size = vocab_size - 1, vocab_size, block_size
        self.anchor = nn.Parameter(torch.zeros(()))  # the sampler looks up the device of a parameter

    def logits_from(self, probs: torch.Tensor) -> torch.Tensor:
        """Log-probabilities (B, T, V) with [MASK] impossible, kept in the autograd graph of `anchor`."""
        logits = probs.log() + 0 * self.anchor
        logits[..., self.mask_id] = float("-inf")
        return logits
