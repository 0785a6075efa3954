"""The model card that `MDLM.save_pretrained` writes as README.md (a Jinja template of huggingface_hub's ModelCard).

training/export.py fills `title` and `details`; `card_data` and `repo_url` come from the MDLM class.
"""

REPO_URL = "https://github.com/mdlm-hf/mdlm_hf"

MODEL_CARD_TEMPLATE = """---
{{ card_data }}
---

# {{ title | default("mdlm_hf character-level masked diffusion language model", true) }}

A character-level **masked diffusion language model** (MDLM, absorbing-state diffusion) made with
[mdlm_hf]({{ repo_url }}). Every character is masked independently with probability t; a
bidirectional transformer learns to put the masked characters back. Generation starts from an all-mask
canvas and reveals characters over a few denoising steps, in any order; prompting and infilling are
the same operation with some positions fixed.

{{ summary | default("", true) }}

## Usage

```python
from mdlm_hf import MDLM

model = MDLM.from_pretrained("{{ repo_id | default("path/or/repo-id", true) }}")
print(model.generate(length=256, num_steps=64, seed=0))
print(model.complete("ROMEO:\\n", length=200, num_steps=64))
print(model.infill("To be, or not to be, ________ is the question:"))
```

{{ details | default("", true) }}
"""
