"""What the sampler's tests share: the bare core's options, and a canvas with given characters and holes."""

import torch

from mdlm_hf.sampling.options import SamplerOptions

# the bare core, every option off, in a scored order (the default, streams order, has no use for a score, a
# schedule or counts): what most of the sampler's tests pin down
PLAIN = SamplerOptions.plain(order="entropy")


def canvas_with_holes(model, length=40, seed=0):
    generator = torch.Generator().manual_seed(seed)
    canvas = torch.randint(0, model.mask_id, (length,), generator=generator)
    holes = torch.rand(length, generator=generator) < 0.6
    return torch.where(holes, model.mask_id, canvas)
