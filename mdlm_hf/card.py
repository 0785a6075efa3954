"""The model card that `MDLM.save_pretrained` writes as README.md: model_card.md, a Jinja template of huggingface_hub's
ModelCard, read here.

training/card.py (for training/export.py) fills `title`, the sections a trained run has (`evaluation`, `training`,
`reference`, `recipe_notes`, `samples`: every figure from metrics.json or the run; without them the card has none)
and the usage example's values: `repo_id`, `prompt` and `infill` (Python string literals drawn from the training
text; an empty one leaves its line out), `generate_length` and `complete_length` (what fits the model's block_size).
Without them the example is the TinyShakespeare one. `card_data` (the front matter) and `repo_url` come from
`MDLM.generate_model_card`.
"""

from pathlib import Path

REPO_URL = None  # the package has no public source repository yet: the card names it without a link

MODEL_CARD_TEMPLATE = (Path(__file__).resolve().parent / "model_card.md").read_text(encoding="utf-8")
# an autoregressive twin's card (MDLM(objective="ar")): the same values, its exact NLL where the diffusion model's has
# the NELBO, and no infill line
TWIN_CARD_TEMPLATE = (Path(__file__).resolve().parent / "twin_card.md").read_text(encoding="utf-8")
TWIN_TAGS = ["autoregressive", "character-level", "mdlm"]
