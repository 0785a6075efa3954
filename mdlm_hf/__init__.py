"""mdlm_hf: a small character-level masked diffusion language model.

The sampler in one function, to read first: mdlm_hf/sampling/reference.py; `sample()` is it with every option.
"""

from mdlm_hf.diffusion import ElboResult, diffusion_loss, elbo, mask_tokens, sample_times
from mdlm_hf.model import MDLM
from mdlm_hf.pipeline import complete, infill, sample
from mdlm_hf.rewriting import rewrite, span_bits_per_char, stream_rewrite
from mdlm_hf.sampling.options import ORDERS, READ_BETTER, SCHEDULES, SamplerOptions
from mdlm_hf.sampling.state import SamplerState
from mdlm_hf.tokenizer import MASK_GLYPH, CharTokenizer

__all__ = [
    "MDLM",
    "MASK_GLYPH",
    "ORDERS",
    "READ_BETTER",
    "SCHEDULES",
    "CharTokenizer",
    "ElboResult",
    "SamplerOptions",
    "SamplerState",
    "complete",
    "diffusion_loss",
    "elbo",
    "infill",
    "mask_tokens",
    "rewrite",
    "sample",
    "sample_times",
    "span_bits_per_char",
    "stream_rewrite",
]
