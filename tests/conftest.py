import socket
import urllib.parse

import httpx
import pytest
import torch
from gradio_client import Client, utils

from mdlm_hf import MDLM, CharTokenizer

TINY_TEXT = "".join(
    f"{word} {i % 7}\n" for i, word in enumerate(["to be or not", "that is the question", "whether tis nobler"] * 40)
)


def free_port() -> int:
    """A loopback port no one listens on now, for a server a test starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def tiny_text() -> str:
    return TINY_TEXT


@pytest.fixture
def tiny_model() -> MDLM:
    """A randomly initialised two-layer model; enough to exercise every code path."""
    torch.manual_seed(0)
    return MDLM(CharTokenizer.from_text(TINY_TEXT).vocab, n_layer=2, n_head=2, n_embd=32, block_size=64).eval()


class PageClient(Client):
    """A gradio client that also reaches the page's own events (`/generate_page`, ...: undocumented, so the API
    page and MCP list only the text-and-numbers endpoints) by their parameters' names."""

    def _get_api_info(self) -> dict:
        url = urllib.parse.urljoin(self.src_prefixed, utils.RAW_API_INFO_URL)
        params = {"all_endpoints": "true"}  # merged with the url's own query
        response = httpx.get(url, params=params, headers=self.headers, cookies=self.cookies, **self.httpx_kwargs)
        response.raise_for_status()
        return response.json()
