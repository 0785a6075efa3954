import pytest
import torch

from mdlm_hf import MDLM, CharTokenizer

TINY_TEXT = "".join(
    f"{word} {i % 7}\n" for i, word in enumerate(["to be or not", "that is the question", "whether tis nobler"] * 40)
)


@pytest.fixture
def tiny_text() -> str:
    return TINY_TEXT


@pytest.fixture
def tiny_model() -> MDLM:
    """A randomly initialised two-layer model; enough to exercise every code path."""
    torch.manual_seed(0)
    return MDLM(CharTokenizer.from_text(TINY_TEXT).vocab, n_layer=2, n_head=2, n_embd=32, block_size=64).eval()
