"""The model card and demo.json of an export (training/card.py): the run's own text, hardware and examples."""

import ast
import dataclasses
import hashlib
import json
import re
from pathlib import Path

import torch

import training.card
import training.processes
from mdlm_hf import MDLM, CharTokenizer
from tests.training_helpers import run
from training import export, run_options


class RecordingApi:
    """huggingface_hub.HfApi, offline: records the uploads."""

    uploads = []

    def __init__(self, token=None):
        pass

    def create_repo(self, repo_id, **kwargs):
        pass

    def upload_folder(self, folder_path, repo_id, **kwargs):
        self.uploads.append((repo_id, (Path(folder_path) / "README.md").read_text()))
        return f"https://huggingface.co/{repo_id}/commit/abc"


def usage_code(card: str) -> str:
    return card.split("## Usage\n\n```python\n", 1)[1].split("```", 1)[0]


def test_the_card_describes_the_runs_own_text_and_its_example_runs(text_file, tmp_path, monkeypatch, capsys):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", RecordingApi)
    export_dir = tmp_path / "export"
    terms = ["--dataset-name", "Tiny verses", "--license", "cc-by-4.0", "--language", "en"]
    pushed = ["--export-dir", str(export_dir), "--push-to-hub", "me/tiny-verses", *terms]
    run(text_file, tmp_path / "run", "--max-steps", "3", *pushed)
    card = (export_dir / "README.md").read_text()
    assert RecordingApi.uploads[-1] == ("me/tiny-verses", card)
    for shakespeare in ("Shakespeare", "ROMEO", "nanoGPT", "To be, or not to be", "million characters"):
        assert shakespeare not in card, shakespeare
    assert "# mdlm_hf: a masked diffusion language model of Tiny verses, character by character" in card
    assert 'MDLM.from_pretrained("me/tiny-verses")' in card and "path/or/repo-id" not in card
    assert f"- data: Tiny verses, {len(text_file.read_text()):,} characters" in card
    metrics = json.loads((export_dir / "metrics.json").read_text())
    assert f"**{metrics['val_nelbo_nats_per_char']:.4f} nats/char**" in card and "| exact NLL, " in card
    assert "- recipe: n_layer=1" in card  # the card's metric rows and recipe are kept
    front = huggingface_hub.ModelCard.load(export_dir / "README.md").data
    assert (front.license, front.language, front.datasets) == ("cc-by-4.0", "en", None)
    (result,) = front.eval_results
    assert (result.dataset_name, result.metric_type) == ("Tiny verses", "nelbo") and front.model_name == "tiny-verses"
    assert result.metric_value == round(metrics["val_nelbo_nats_per_char"], 4)
    # the usage example's prompt and infill template come from the text, and the example runs as written
    code = usage_code(card)
    calls = {
        n.func.attr: n.args
        for n in ast.walk(ast.parse(code))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args
    }
    prompt, template = (ast.literal_eval(calls[name][0]) for name in ("complete", "infill"))
    text = text_file.read_text()
    assert prompt and prompt.rstrip("\n") in text and re.search(re.escape(template).replace("_", "\\S"), text)
    exec(code.replace('"me/tiny-verses"', repr(str(export_dir))), {})
    assert prompt in capsys.readouterr().out

    # no terms given: none stated; the card names the data file
    export.export_run(tmp_path / "run", tmp_path / "plain", text_file, weights_dtype="float32")
    plain = (tmp_path / "plain" / "README.md").read_text()
    front = huggingface_hub.ModelCard.load(tmp_path / "plain" / "README.md").data
    assert front.license is None and front.language is None and front.datasets is None
    assert "language model of text, character by character" in plain and "- license:" not in plain
    assert 'MDLM.from_pretrained("path/or/repo-id")' in plain
    # pushed later: the card names the repo
    export.push_to_hub(tmp_path / "plain", "me/later")
    assert 'MDLM.from_pretrained("me/later")' in (tmp_path / "plain" / "README.md").read_text()
    assert 'MDLM.from_pretrained("me/later")' in RecordingApi.uploads[-1][1]
    assert {"dataset_name", "license", "language"} <= set(run_options.RESUMABLE_CHANGES)


def test_tinyshakespeare_alone_gets_the_shakespeare_card(text_file, tmp_path, monkeypatch):
    import huggingface_hub

    run(text_file, tmp_path / "run", "--max-steps", "2", "--block-size", "64")  # the infill example fits
    monkeypatch.setattr(training.card, "TINYSHAKESPEARE_MD5", hashlib.md5(text_file.read_bytes()).hexdigest())
    export.export_run(tmp_path / "run", tmp_path / "export", text_file, weights_dtype="float32")
    card = (tmp_path / "export" / "README.md").read_text()
    assert "# mdlm_hf: a masked diffusion language model of Shakespeare, character by character" in card
    assert 'model.complete("ROMEO:\\n", length=' in card and "To be, or not to be, ________" in card
    assert "nanoGPT's autoregressive character model reaches 1.47 nats/char" in card
    assert "million characters of Shakespeare" in card
    front = huggingface_hub.ModelCard.load(tmp_path / "export" / "README.md").data
    assert (front.license, front.language, front.datasets) == ("mit", "en", ["karpathy/tiny_shakespeare"])
    assert front.eval_results[0].dataset_type == "karpathy/tiny_shakespeare"
    export.export_run(tmp_path / "run", tmp_path / "other", text_file, weights_dtype="float32", license="apache-2.0")
    assert huggingface_hub.ModelCard.load(tmp_path / "other" / "README.md").data.license == "apache-2.0"


def test_the_card_names_the_hardware_the_run_trained_on(text_file, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    assert training.processes.hardware_description(torch.device("cuda", 1)) == "NVIDIA H200"
    assert training.processes.hardware_description(torch.device("cuda"), processes=8) == "8 x NVIDIA H200"
    assert training.processes.hardware_description(torch.device("mps")) == "an Apple GPU (mps)"
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    cpu = training.processes.hardware_description(torch.device("cpu"))
    assert cpu.endswith(", 1 thread") and training.processes.hardware_description(torch.device("cpu"), 2).endswith(
        ", 2 threads in 2 processes"
    )
    run(text_file, tmp_path / "run", "--max-steps", "2", "--block-size", "64")
    checkpoint = torch.load(tmp_path / "run" / "ckpt.pt", weights_only=True)
    assert checkpoint["hardware"] == cpu  # --threads 1, one process
    # trained on a GPU, resumed on this CPU, exported here: the card names both machines and nothing else
    checkpoint["hardware"], checkpoint["wall_time"] = "NVIDIA H200", 290.0
    torch.save(checkpoint, tmp_path / "run" / "ckpt.pt")
    run(text_file, tmp_path / "run", "--max-steps", "3", "--block-size", "64", "--resume")
    assert torch.load(tmp_path / "run" / "ckpt.pt", weights_only=True)["hardware"] == f"NVIDIA H200, then {cpu}"
    monkeypatch.setattr(training.card, "TINYSHAKESPEARE_MD5", hashlib.md5(text_file.read_bytes()).hexdigest())
    export.export_run(tmp_path / "run", tmp_path / "export", text_file, weights_dtype="float32")
    card = (tmp_path / "export" / "README.md").read_text()
    minutes = torch.load(tmp_path / "run" / "ckpt.pt", weights_only=True)["wall_time"] / 60
    assert f"- wall time: {minutes:.1f} minutes on NVIDIA H200, then {cpu}" in card
    assert f"trained for {minutes:.1f} minutes:" in card and "on a CPU" not in card
    # a checkpoint from before the field: the card does not guess
    checkpoint = torch.load(tmp_path / "run" / "ckpt.pt", weights_only=True)
    del checkpoint["hardware"]
    torch.save(checkpoint, tmp_path / "run" / "ckpt.pt")
    export.export_run(tmp_path / "run", tmp_path / "old", text_file, weights_dtype="float32")
    assert "minutes on an unrecorded machine" in (tmp_path / "old" / "README.md").read_text()
    assert (
        training.processes.joined_hardware(None, cpu) == cpu
        and training.processes.joined_hardware(f"A, then {cpu}", cpu) == f"A, then {cpu}"
    )


def test_usage_examples_come_from_the_validation_text():
    text = "the cut line\nFirst Citizen:\nBefore we proceed any further, hear me speak.\nAll:\nSpeak, speak.\n"
    model = MDLM(CharTokenizer.from_text(text).vocab, n_layer=1, n_head=2, n_embd=16, block_size=64)
    assert training.card.usage_examples(model, text) == (
        "First Citizen:\n",
        "Before we proceed any ________ hear me speak.",
    )
    prose = "cut\nIt was a bright cold day in April, and the clocks were striking thirteen.\n"
    model = MDLM(CharTokenizer.from_text(prose).vocab, n_layer=1, n_head=2, n_embd=16, block_size=256)
    assert training.card.usage_examples(model, prose) == (
        "It was a bright cold day in April, and",
        "It was a bright cold day in ______ and the clocks were striking thirteen.",
    )


def test_demo_metadata_gives_the_app_text_the_model_writes(tmp_path):
    from mdlm_space.texts import demo_texts

    text = "the cut line\nFirst Citizen:\nBefore we proceed any further, hear me speak.\nAll:\nSpeak, speak.\n"
    model = MDLM(CharTokenizer.from_text(text).vocab, n_layer=1, n_head=2, n_embd=16, block_size=64)
    data = training.card.describe_training_data(model, text, text, name="Plays")
    metadata = training.card.demo_metadata(model, data, text)
    assert metadata == {
        "prompt": "First Citizen:\n",
        "examples": ["Before we proceed any ________ hear me speak."],
        "subject": "Plays",
        "sample": "First Citizen:\nBefore we proceed any further, hear me speak.\nAll:\nSpeak, speak.",
        "sample_name": "the validation text of Plays (unseen in training)",
    }
    texts = demo_texts(model, metadata)
    assert (texts.subject, texts.prompt, texts.examples) == ("Plays", "First Citizen:\n", tuple(metadata["examples"]))
    assert texts.sample == metadata["sample"] and texts.sample_name == metadata["sample_name"]
    shakespeare = dataclasses.replace(data, tinyshakespeare=True)
    assert training.card.demo_metadata(model, shakespeare, text) == {"subject": "Shakespeare"}


def test_text_that_joined_the_training_split_only_is_named_apart_from_the_validation_text():
    text = "the cut line\nFirst Citizen:\nBefore we proceed any further, hear me speak.\nAll:\nSpeak, speak.\n"
    model = MDLM(CharTokenizer.from_text(text).vocab, n_layer=1, n_head=2, n_embd=16, block_size=64)
    extra = dict(extra_chars=500, extra_name="more_plays", split_name="plays")
    data = training.card.describe_training_data(model, text, text, "Plays and more", **extra)
    assert (
        training.card.demo_metadata(model, data, text)["sample_name"]
        == "the validation text of plays (unseen in training)"
    )
    facts = training.card.training_facts(model, {}, {}, data)
    assert (facts["validation_name"], facts["extra_chars"], facts["extra_name"]) == ("plays", 500, "more_plays")
    assert facts["size_words"] == f"{2 * len(text) + 500:,} characters"  # what it read: the split text and the rest
    shakespeare = dataclasses.replace(data, tinyshakespeare=True)
    assert training.card.validation_name(shakespeare) == "TinyShakespeare"
    evaluation = {"val_chars": 10, "nelbo": 1.5, "nelbo_bits": 2.2, "mask_draws": 1, "exact_nll": [], "accuracy": []}
    card = model.generate_model_card(title="t", training=facts, evaluation=evaluation, validation_percent=10)
    assert "and 500 characters of more_plays in the training split only" in str(card)
    assert "](None)" not in str(card) and "github.com/mdlm-hf" not in str(card)  # no link to a repository


def test_the_card_is_a_template_with_no_figure_written_by_hand():
    # the card was a 143-line f-string; its figures come from metrics.json, the run or the config
    from mdlm_hf.card import MODEL_CARD_TEMPLATE

    text = re.sub(r"\{\{.*?\}\}|\{%.*?%\}", "", MODEL_CARD_TEMPLATE, flags=re.S)  # the template's own words
    text = text.replace("seed=0", "")  # the usage example's seed is code, not a figure
    assert re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", text) == []
    assert "evaluation.nelbo" in MODEL_CARD_TEMPLATE and "num_steps=64" not in MODEL_CARD_TEMPLATE
