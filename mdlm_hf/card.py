"""The model cards `MDLM.save_pretrained` writes as README.md: Jinja templates of huggingface_hub's ModelCard.
training/card.py fills their sections (evaluation, training, samples...) and the usage example's values; without
them a card has no sections and the example is the TinyShakespeare one.
"""

from pathlib import Path

REPO_URL = None  # the package has no public source repository yet: the card names it without a link

MODEL_CARD_TEMPLATE = (Path(__file__).resolve().parent / "model_card.md").read_text(encoding="utf-8")
# an autoregressive twin's card (MDLM(objective="ar")): the same values, its exact NLL where the diffusion model's has
# the NELBO, and no infill line
TWIN_CARD_TEMPLATE = (Path(__file__).resolve().parent / "twin_card.md").read_text(encoding="utf-8")
TWIN_TAGS = ["autoregressive", "character-level", "mdlm"]
