"""The fast inference path: a bfloat16 copy of the weights for the sampler, used where timing finds it faster (about
2.4x on CPUs with bf16 units, docs/benchmarks.md "Forward pass"; slower on CPUs without them). The choice is made
once per process, device, thread count and model shape; the copy is rebuilt whenever the fp32 weights change. Only
`MDLM.denoise` takes this path: `forward`, training and ELBO evaluation are always exact.
"""

from __future__ import annotations

import copy
import statistics
import time

import torch
import torch.nn as nn

from mdlm_hf.network import KVCache
from mdlm_hf.objectives import objective_of

# bf16 must win by this margin: a tie is noise, and fp32 is exact
REQUIRED_SPEEDUP = 1.1
TIMING_ROUNDS = 5  # interleaved fp32/bf16 passes; the first round warms up and is not counted
# the timing stops after the first measured round once it has taken this long: under load (a server's first
# visitors) its rounds took 9-45 s, and the first sampling call waited for them
TIMING_BUDGET_S = 1.0
_decisions: dict[tuple, bool] = {}  # (device, threads, model shape) -> bf16 is faster


def weights_key(model: nn.Module) -> tuple:
    """Changes whenever a parameter is replaced or modified in place through autograd's view of it (`_version`
    counts those writes; writes through `.data` go uncounted). Inference tensors keep no version: for them only a
    replacement counts."""
    return tuple((p.device, p.data_ptr(), None if p.is_inference() else p._version) for p in model.parameters())


def shape_key(model: nn.Module) -> tuple:
    """What decides the speed of a pass: where it runs, on how many threads, and the model's shape."""
    device, dtype = next(model.parameters()).device, next(model.parameters()).dtype
    shapes = tuple(tuple(p.shape) for p in model.parameters())
    kind = objective_of(model).name  # a twin's passes are one position each: another workload
    return (str(device), str(dtype), torch.get_num_threads(), model.block_size, shapes, kind)


DECODE_TIMED = 32  # an autoregressive twin's timing: this many one-position passes with a key-value cache


def _time_pass(model: nn.Module, tokens: torch.Tensor) -> float:
    """Seconds of the work the sampler asks of `model`: one full-length pass, or for an autoregressive twin
    DECODE_TIMED one-position passes after the first, each reading its key-value cache (bf16 wins the first on
    CPUs with bf16 units and loses the second: 1.6 s against 1.2 s for 256 characters, AMD EPYC, 2 threads)."""
    if tokens.is_cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    if objective_of(model).uses_kv_cache:
        cache = KVCache(model.n_layer)
        for position in range(DECODE_TIMED):
            model(tokens[:, position : position + 1], cache)
    else:
        model(tokens)
    if tokens.is_cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - start


@torch.no_grad()
def bf16_is_faster(exact: nn.Module, fast: nn.Module) -> bool:
    """Times one full-length pass of each, interleaved so that a busy machine slows both alike."""
    device = next(exact.parameters()).device
    tokens = torch.full((1, exact.block_size), exact.mask_id, device=device)
    seconds: dict[str, list[float]] = {"exact": [], "fast": []}
    started = time.perf_counter()
    for round_ in range(TIMING_ROUNDS):
        seconds["exact"].append(_time_pass(exact, tokens))
        seconds["fast"].append(_time_pass(fast, tokens))
        if round_ >= 1 and time.perf_counter() - started > TIMING_BUDGET_S:
            break
    exact_s, fast_s = (statistics.median(s[1:]) for s in (seconds["exact"], seconds["fast"]))
    return fast_s * REQUIRED_SPEEDUP < exact_s


class FastPath:
    """Runs a model's passes on a bf16 copy of its weights when that is faster here, else on the model itself."""

    def __init__(self) -> None:
        self.copy: nn.Module | None = None  # the bf16 copy, or None when fp32 is faster
        self.key: tuple | None = None  # weights_key of the model the copy was made from

    def runner(self, model: nn.Module) -> nn.Module:
        """What runs `model`'s passes here: its bf16 copy (remade when the weights change) if faster, else itself."""
        key = weights_key(model)
        if key != self.key:
            self.copy = self._make_copy(model)
            self.key = key
        return model if self.copy is None else self.copy

    def _make_copy(self, model: nn.Module) -> nn.Module | None:
        # the model holds this FastPath: the copy gets a fresh one instead of a copy of this one's old copy
        decision = shape_key(model)
        if _decisions.get(decision) is False:
            return None  # fp32 won here before: no copy to make
        bf16 = copy.deepcopy(model, memo={id(self): FastPath()}).to(torch.bfloat16).eval()
        bf16.requires_grad_(False)
        if decision not in _decisions:
            _decisions[decision] = bf16_is_faster(model, bf16)
        return bf16 if _decisions[decision] else None
