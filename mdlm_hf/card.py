"""The model card that `MDLM.save_pretrained` writes as README.md (a Jinja template of huggingface_hub's ModelCard).

training/export.py fills `title`, `details` and the usage example's values from the run: `repo_id`, `prompt` and
`infill` (Python string literals drawn from the training text; an empty one leaves its line out),
`generate_length` and `complete_length` (what fits the model's block_size). Without them the example is the
TinyShakespeare one. `card_data` (the front matter) and `repo_url` come from `MDLM.generate_model_card`.
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
print(model.generate(length={{ generate_length | default(256, true) }}, num_steps=64, seed=0))
{% if prompt is not defined -%}
print(model.complete("ROMEO:\\n", length=200, num_steps=64))
{% elif prompt -%}
print(model.complete({{ prompt }}, length={{ complete_length | default(200, true) }}, num_steps=64))
{% endif -%}
{% if infill -%}
print(model.infill({{ infill }}))
{% elif infill is not defined -%}
print(model.infill("To be, or not to be, ________ is the question:"))
{% endif -%}
```

{{ details | default("", true) }}
"""
