import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import safetensors
import safetensors.torch
import torch

from mdlm_hf import MDLM
from mdlm_hf.hub import CHECKSUM_KEY, tensors_digest
from mdlm_hf.layers import RMSNorm
from mdlm_hf.tokenizer import CharTokenizer

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_logits_shape_and_mask_never_predicted(tiny_model):
    tokens = torch.randint(0, tiny_model.vocab_size, (3, 40))
    logits = tiny_model(tokens)
    assert logits.shape == (3, 40, tiny_model.vocab_size)
    assert torch.isinf(logits[..., tiny_model.mask_id]).all()
    assert torch.isfinite(logits[..., : tiny_model.mask_id]).all()


def test_attention_is_bidirectional(tiny_model):
    tokens = torch.randint(0, tiny_model.mask_id, (1, 20))
    changed = tokens.clone()
    changed[0, -1] = (changed[0, -1] + 1) % tiny_model.mask_id
    # a change at the last position must reach the first one (no causal mask)
    assert not torch.allclose(tiny_model(tokens)[0, 0], tiny_model(changed)[0, 0])


def test_too_long_canvas_is_refused(tiny_model):
    with pytest.raises(ValueError, match="block_size"):
        tiny_model(torch.zeros(1, tiny_model.block_size + 1, dtype=torch.long))


def test_save_and_load_round_trip(tiny_model, tmp_path):
    tiny_model.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "config.json", "model.safetensors"]
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["vocab"] == tiny_model.tokenizer.vocab and config["n_layer"] == 2
    loaded = MDLM.from_pretrained(tmp_path)
    tokens = torch.randint(0, tiny_model.vocab_size, (2, 30))
    assert torch.equal(loaded(tokens), tiny_model(tokens))
    assert loaded.tokenizer == tiny_model.tokenizer
    assert loaded.lm_head.weight is loaded.token_embedding.weight  # the tie survives loading
    card = (tmp_path / "README.md").read_text()
    assert "library_name: mdlm_hf" in card and "from_pretrained" in card
    assert 'model.complete("ROMEO:\\n", length=200' in card  # a Python string a reader can paste as it is


def test_mismatched_config_is_refused(tiny_model, tmp_path):
    tiny_model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["n_embd"] = 64
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="do not match config.json.*wrong shape"):
        MDLM.from_pretrained(tmp_path)
    config["n_embd"], config["n_layer"] = 32, 3
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="missing.*blocks.2"):
        MDLM.from_pretrained(tmp_path)


def test_corrupt_files_give_clear_errors(tiny_model, tmp_path):
    tiny_model.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ValueError, match="not a readable safetensors file"):
        MDLM.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        MDLM.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="no 'vocab'"):
        MDLM.from_pretrained(tmp_path)
    (tmp_path / "config.json").unlink()
    with pytest.raises(ValueError, match="config.json is missing"):
        MDLM.from_pretrained(tmp_path)


@pytest.mark.parametrize("kwargs", [dict(n_embd=30, n_head=4), dict(position_encoding="alibi"), dict(dropout=1.5)])
def test_bad_config_is_refused(kwargs):
    with pytest.raises(ValueError):
        MDLM("abc", **{"n_layer": 1, "n_head": 2, "n_embd": 32, **kwargs})


SHIPPED_EARLIER_KEYS = {
    "norm": "rmsnorm",
    "mlp": "relu2",
    "position_encoding": "rope",
    "time_conditioning": False,
    "qk_norm": True,
}


@pytest.mark.parametrize("causal", [False, True])
def test_an_earlier_config_at_the_values_this_version_builds_loads_as_saved(tiny_model, tmp_path, causal):
    # the shipped config.json files hold these keys, and "causal" where this version writes "objective"
    torch.manual_seed(0)
    model = MDLM(tiny_model.tokenizer.vocab, n_layer=2, n_head=2, n_embd=32, block_size=64, causal=causal).eval()
    model.save_pretrained(tmp_path / "now")
    config = json.loads((tmp_path / "now" / "config.json").read_text())
    assert config == {
        "vocab": tiny_model.tokenizer.vocab,
        "n_layer": 2,
        "n_head": 2,
        "n_embd": 32,
        "block_size": 64,
        "dropout": 0.0,
        "objective": "ar" if causal else "diffusion",
    }
    earlier = {k: v for k, v in config.items() if k != "objective"} | SHIPPED_EARLIER_KEYS | {"causal": causal}
    (tmp_path / "now" / "config.json").write_text(json.dumps(earlier))
    loaded = MDLM.from_pretrained(tmp_path / "now")
    tokens = torch.randint(0, model.mask_id, (2, 16))
    assert torch.equal(loaded(tokens), model(tokens)) and loaded.objective is model.objective
    loaded.save_pretrained(tmp_path / "again")  # saved again: this version's keys
    assert json.loads((tmp_path / "again" / "config.json").read_text()) == config


@pytest.mark.parametrize(
    "key, value, supported",
    [
        ("norm", "layernorm", '"rmsnorm": this version of mdlm_hf builds RMSNorm only'),
        ("mlp", "gelu", '"relu2": this version of mdlm_hf builds ReLU\\^2 MLPs only'),
        ("mlp", "swiglu", '"relu2"'),
        ("position_encoding", "learned", '"rope": this version of mdlm_hf builds rotary positions only'),
        ("time_conditioning", True, "false: this version of mdlm_hf builds no time embedding"),
        ("qk_norm", False, "true: this version of mdlm_hf builds attention with RMS-normalised queries and keys"),
        ("qk_norm", 1, "true"),
    ],
)
def test_a_config_of_a_knob_this_version_does_not_build_is_refused_in_one_line(
    tiny_model, tmp_path, key, value, supported
):
    tiny_model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, **SHIPPED_EARLIER_KEYS, key: value}))
    with pytest.raises(ValueError, match=f"^{key} must be {supported}") as error:
        MDLM.from_pretrained(tmp_path)
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match=f"^{key} must be"):
        MDLM("abc", n_layer=1, n_head=2, n_embd=32, **{key: value})


def test_the_constructors_defaults_are_trainings():
    from training.flags import FLAGS_BY_NAME

    torch.manual_seed(0)
    model = MDLM("abc")
    for name in ("n_layer", "n_head", "n_embd", "block_size", "dropout", "objective"):
        assert model._hub_mixin_config[name] == FLAGS_BY_NAME[name].default, name
    assert isinstance(model.blocks[0].ln_1, RMSNorm) and isinstance(model.blocks[0].attn.q_norm, RMSNorm)


def test_the_network_imports_only_torch_and_its_layers():
    # beside the standard library: the network reads alone, whatever objective or loading is built on it
    for name, allowed in (("network", {"torch", "mdlm_hf.layers"}), ("layers", {"torch"})):
        tree = ast.parse((REPO_ROOT / "mdlm_hf" / f"{name}.py").read_text(encoding="utf-8"))
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        top = {module: module.split(".")[0] for module in imported}
        outside = {m for m, root in top.items() if root not in sys.stdlib_module_names and root != "torch"} - allowed
        assert not outside, (name, outside)
        assert "torch" in top.values()


def test_the_package_needs_neither_matplotlib_nor_gradio():
    code = "import sys, mdlm_hf, mdlm_hf.plots; assert not {'matplotlib', 'gradio'} & set(sys.modules), sys.modules"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).returncode == 0


@pytest.mark.parametrize(
    "field, value",
    [
        ("n_layer", "6"),
        ("n_head", 4.0),
        ("dropout", None),
        ("n_embd", -32),
        ("block_size", 0),
        ("n_layer", 1000000),  # refused before anything is allocated
        ("n_embd", 10**6),
        ("qk_norm", "yes"),
        ("mlp", 3),
    ],
)
def test_config_fields_of_the_wrong_type_or_size_are_refused_by_name(tiny_model, tmp_path, field, value):
    tiny_model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config[field] = value
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=f"^{field} must be"):
        MDLM.from_pretrained(tmp_path)


def test_a_config_too_large_in_total_is_refused():
    # every field within its bounds, the whole beyond what a character model may allocate
    with pytest.raises(ValueError, match="describe about .* weights, more than"):
        MDLM("abc", n_layer=64, n_head=64, n_embd=8192, block_size=256)


def test_non_finite_weights_are_refused_at_load(tiny_model, tmp_path):
    import safetensors.torch

    tiny_model.save_pretrained(tmp_path)
    weights = safetensors.torch.load_file(tmp_path / "model.safetensors")
    weights["blocks.1.mlp.fc.weight"][0, 0] = float("nan")
    safetensors.torch.save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match="model.safetensors holds non-finite values in blocks.1.mlp.fc.weight"):
        MDLM.from_pretrained(tmp_path)


def test_the_card_front_matter_comes_from_the_caller_not_the_class(tiny_model, tmp_path):
    from huggingface_hub import ModelCard

    tiny_model.save_pretrained(tmp_path / "plain")
    plain = ModelCard.load(tmp_path / "plain" / "README.md").data
    assert plain.license is None and plain.library_name == "mdlm_hf"  # the weights' terms are their trainer's
    terms = {"license": "cc-by-4.0", "language": "fr", "datasets": ["me/poems"]}
    usage = {"repo_id": "me/poems-char", "prompt": '"Il était\\n"', "infill": "", "complete_length": 20}
    tiny_model.save_pretrained(tmp_path / "run", model_card_kwargs={"card_data": terms, **usage})
    card = ModelCard.load(tmp_path / "run" / "README.md")
    assert {k: getattr(card.data, k) for k in terms} == terms and card.data.pipeline_tag == "text-generation"
    assert 'MDLM.from_pretrained("me/poems-char")' in card.text
    assert 'model.complete("Il était\\n", length=20)' in card.text and "model.infill" not in card.text


@pytest.fixture
def bf16_chosen(monkeypatch):
    """The fast path as on a CPU with bf16 units, whatever this machine's timing says."""
    import mdlm_hf.fast

    monkeypatch.setattr(mdlm_hf.fast, "bf16_is_faster", lambda exact, fast: True)
    monkeypatch.setattr(mdlm_hf.fast, "_decisions", {})


def test_from_pretrained_samples_fast_by_default_and_fast_false_is_exact(tiny_model, tmp_path):
    tiny_model.save_pretrained(tmp_path / "m")
    assert MDLM.from_pretrained(tmp_path / "m").fast is True
    assert MDLM.from_pretrained(tmp_path / "m", fast=False).fast is False
    assert tiny_model.fast is False  # a model built for training is exact
    with pytest.raises(ValueError, match="fast must be True or False"):
        MDLM.from_pretrained(tmp_path / "m", fast="yes")


def test_fast_path_logits_agree_with_the_exact_model(tiny_model, bf16_chosen):
    tokens = torch.randint(0, tiny_model.mask_id + 1, (2, 40), generator=torch.Generator().manual_seed(0))
    tiny_model.fast = True
    with torch.no_grad():
        exact, fast = tiny_model(tokens), tiny_model.denoise(tokens)
    assert tiny_model._fast_path.copy.lm_head.weight.dtype == torch.bfloat16
    # bf16 keeps 8 significant bits (relative rounding 2**-9 per operation); through two layers the predicted
    # probabilities move by well under 1 % (the shipped model: docs/benchmarks.md, "Forward pass")
    difference = (fast.softmax(-1) - exact.softmax(-1)).abs().max()
    assert 0 < difference < 0.01
    assert torch.equal(fast.isinf(), exact.isinf())  # [MASK] is still never predicted


def test_bf16_inference_on_a_cpu_runs_attention_as_plain_matmuls(tiny_model, bf16_chosen, monkeypatch):
    from mdlm_hf import layers as model_module

    q, k, v = torch.randn(3, 2, 4, 40, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert torch.allclose(model_module.plain_attention(q, k, v), expected, atol=1e-12)  # the same maths
    assert model_module.uses_plain_attention(q.bfloat16()) and not model_module.uses_plain_attention(q.float())
    # the sampler's canvas and the study's batch take the plain way; where the scores would not fit, the fused kernel
    assert model_module.uses_plain_attention(torch.zeros(1, 1, 1, 64, dtype=torch.bfloat16).expand(32, 4, 256, 64))
    assert not model_module.uses_plain_attention(torch.zeros(1, 1, 1, 64, dtype=torch.bfloat16).expand(64, 4, 1024, 64))
    fused_calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(
        model_module.F, "scaled_dot_product_attention", lambda *a, **kw: fused_calls.append(1) or sdpa(*a, **kw)
    )
    tokens = torch.randint(0, tiny_model.mask_id + 1, (2, 40), generator=torch.Generator().manual_seed(0))
    tiny_model.fast = True
    with torch.no_grad():
        tiny_model.denoise(tokens)  # the bf16 copy: plain matmuls
        assert fused_calls == []
        tiny_model(tokens)  # the exact fp32 model: the fused kernel, one call per layer
        assert len(fused_calls) == tiny_model.n_layer
    tiny_model.train()
    tiny_model.bfloat16()(tokens)  # training keeps the fused kernel (and its dropout) in any dtype
    assert len(fused_calls) == 2 * tiny_model.n_layer


def test_fast_path_is_off_when_slower_off_by_switch_and_under_autograd(tiny_model, bf16_chosen, monkeypatch):
    import mdlm_hf.fast

    tokens = torch.randint(0, tiny_model.mask_id + 1, (1, 30))
    with torch.no_grad():
        exact = tiny_model(tokens)
        assert torch.equal(tiny_model.denoise(tokens), exact)  # fast is off
        assert tiny_model.denoise_dtype == torch.float32
        tiny_model.fast = True
        assert not torch.equal(tiny_model.denoise(tokens), exact)
        assert tiny_model.denoise_dtype == torch.bfloat16
    assert torch.equal(tiny_model.denoise(tokens), tiny_model(tokens))  # gradients wanted: the exact model
    monkeypatch.setattr(mdlm_hf.fast, "bf16_is_faster", lambda exact, fast: False)
    monkeypatch.setattr(mdlm_hf.fast, "_decisions", {})
    tiny_model._fast_path.key = None
    with torch.no_grad():
        assert torch.equal(tiny_model.denoise(tokens), exact) and tiny_model._fast_path.copy is None
    assert tiny_model.denoise_dtype == torch.float32  # bf16 lost the timing here


def test_the_fast_path_works_under_inference_mode(tiny_model, tmp_path):
    tiny_model.save_pretrained(tmp_path / "m")
    with torch.inference_mode():
        model = MDLM.from_pretrained(tmp_path / "m")
        assert len(model.generate(length=10, num_steps=4, seed=0)) == 10


def test_the_fast_copy_follows_the_weights(tiny_model, bf16_chosen):
    tokens = torch.randint(0, tiny_model.mask_id + 1, (1, 30))
    tiny_model.fast = True
    with torch.no_grad():
        before = tiny_model.denoise(tokens)
        torch.manual_seed(1)
        other = MDLM(tiny_model.tokenizer.vocab, n_layer=2, n_head=2, n_embd=32, block_size=64)
        tiny_model.load_state_dict(other.state_dict())
        after, exact = tiny_model.denoise(tokens), tiny_model(tokens)
    assert not torch.allclose(before, after)
    assert (after.softmax(-1) - exact.softmax(-1)).abs().max() < 0.01
    assert "_fast_path" not in str(list(tiny_model.state_dict()))  # the copy is never saved


def test_the_sampler_runs_on_the_fast_path(tiny_model, bf16_chosen, monkeypatch):
    from mdlm_hf.fast import FastPath

    calls = []
    original = FastPath.runner
    monkeypatch.setattr(FastPath, "runner", lambda self, *args: calls.append(1) or original(self, *args))
    tiny_model.infill("to be __ not", num_steps=2, seed=0)
    assert not calls
    tiny_model.fast = True
    tiny_model.infill("to be __ not", num_steps=2, seed=0)
    assert len(calls) == 2  # two denoising passes
    tiny_model.infill("to be __ not", num_steps=2, seed=0, order="entropy", prior_weight=0.5)
    assert len(calls) == 5  # two more, and the character prior's


def test_unknown_config_keys_are_refused_by_name_locally_and_from_the_hub(tiny_model, tmp_path, monkeypatch):
    # formerly: a misspelt key ("n_layers") was dropped and the model built with the default
    tiny_model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "n_layers": 3}))
    with pytest.raises(ValueError, match="config.json has unknown keys 'n_layers'; MDLM takes"):
        MDLM.from_pretrained(tmp_path)

    def hub_download(repo_id, filename, **kwargs):  # the Hub, intercepted: this folder is the repo
        return str(tmp_path / filename)

    monkeypatch.setattr("mdlm_hf.model.hf_hub_download", hub_download)
    monkeypatch.setattr("huggingface_hub.hub_mixin.hf_hub_download", hub_download)
    with pytest.raises(ValueError, match="someone/mdlm's config.json has unknown keys 'n_layers'"):
        MDLM.from_pretrained("someone/mdlm")
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert MDLM.from_pretrained("someone/mdlm").tokenizer == tiny_model.tokenizer  # and the Hub path loads


def test_strict_false_and_an_empty_name_are_refused(tiny_model, tmp_path):
    # formerly: strict=False was silently accepted; and "" was read as the current folder
    tiny_model.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="strict must be True"):
        MDLM.from_pretrained(tmp_path, strict=False)
    for empty in ("", "  "):
        with pytest.raises(ValueError, match="the model name is empty: pass a local directory or a Hub repo id"):
            MDLM.from_pretrained(empty)


def test_a_mistyped_local_folder_is_named_at_once_and_never_tried_on_the_hub(tiny_model, tmp_path, monkeypatch):
    def no_hub(*args, **kwargs):
        raise AssertionError("a local path was looked up on the Hub")

    monkeypatch.setattr("mdlm_hf.model.hf_hub_download", no_hub)
    monkeypatch.setattr("huggingface_hub.hub_mixin.hf_hub_download", no_hub)
    tiny_model.save_pretrained(tmp_path / "pretrained" / "mdlm-shakespeare-char")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        ValueError,
        match=r"^model directory pretrained/mdlm-shakespeare-chr does not exist; did you "
        r"mean pretrained/mdlm-shakespeare-char\?$",
    ):
        MDLM.from_pretrained("pretrained/mdlm-shakespeare-chr")  # its first folder is here: a local path
    for name in ("a/b/c", "no such folder", "user/na--me", "./mdlm", "pretrained/x/"):  # no Hub repo id
        with pytest.raises(ValueError, match=r"^model directory .* does not exist$"):
            MDLM.from_pretrained(name)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool])
def test_weights_of_an_integer_dtype_are_refused_naming_the_tensor(tiny_model, tmp_path, dtype):
    import safetensors.torch

    tiny_model.save_pretrained(tmp_path)
    weights = safetensors.torch.load_file(tmp_path / "model.safetensors")
    weights["blocks.1.mlp.fc.weight"] = (weights["blocks.1.mlp.fc.weight"] * 100).to(dtype)
    safetensors.torch.save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(
        ValueError, match=r"holds blocks\.1\.mlp\.fc\.weight as (I32|I64|BOOL): weights must be"
    ) as error:
        MDLM.from_pretrained(tmp_path)
    assert "\n" not in str(error.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_loading_onto_cuda_without_cuda_says_so_before_loading(tiny_model, tmp_path):
    tiny_model.save_pretrained(tmp_path)
    for where in ("cuda", "cuda:1", torch.device("cuda")):
        with pytest.raises(ValueError, match="^map_location=.*cuda.*: CUDA is not available here; load with"):
            MDLM.from_pretrained(tmp_path, map_location=where)
    for where in ("gpu", 1.5, "xla"):
        with pytest.raises(ValueError, match="^map_location must be a device mdlm_hf runs on"):
            MDLM.from_pretrained(tmp_path, map_location=where)
    assert MDLM.from_pretrained(tmp_path, map_location="cpu").tokenizer == tiny_model.tokenizer


def test_flipped_bytes_in_the_weights_and_a_deeply_nested_config_are_refused_in_one_line(tiny_model, tmp_path):
    # formerly: 1,000 flipped bytes loaded silently and wrote garbage; 100k nested brackets gave RecursionError
    tiny_model.save_pretrained(tmp_path)
    assert torch.equal(MDLM.from_pretrained(tmp_path).lm_head.weight, tiny_model.lm_head.weight)  # its checksum holds
    weights = tmp_path / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1000:] = bytes(255 - b for b in data[-1000:])  # in the tensors, past the header
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"model\.safetensors is damaged: its weights do not match the checksum"):
        MDLM.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="config.json is not a config: its JSON is nested too deeply"):
        MDLM.from_pretrained(tmp_path)


@pytest.mark.parametrize("folder", ["mdlm-shakespeare-char", "mdlm-shakespeare-char-ar"])
def test_the_shipped_weights_carry_their_checksum_and_a_flip_in_the_middle_is_refused(folder, tmp_path):
    # formerly: the shipped files had no checksum, and 8 bytes XOR-ed at the file's midpoint loaded silently
    shutil.copytree(REPO_ROOT / "pretrained" / folder, tmp_path / folder)
    weights = tmp_path / folder / "model.safetensors"
    with safetensors.safe_open(str(weights), framework="pt") as stored:
        assert stored.metadata()[CHECKSUM_KEY] == tensors_digest(stored)
    data = bytearray(weights.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 8] = bytes(b ^ 0x5A for b in data[middle : middle + 8])
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"model\.safetensors is damaged"):
        MDLM.from_pretrained(tmp_path / folder)


def test_weights_without_a_checksum_load_with_a_one_line_warning_naming_the_file(tiny_model, tmp_path):
    tiny_model.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    safetensors.torch.save_model(tiny_model, str(weights), metadata={"format": "pt"})  # as another tool writes it
    with pytest.warns(UserWarning) as caught:
        loaded = MDLM.from_pretrained(tmp_path)
    (warning,) = [w for w in caught if "checksum" in str(w.message)]
    assert str(warning.message).startswith(f"{weights} carries no checksum") and "\n" not in str(warning.message)
    assert torch.equal(loaded.lm_head.weight, tiny_model.lm_head.weight)


def test_the_fp32_bf16_timing_stops_once_it_has_taken_its_budget(tiny_model, monkeypatch):
    # under load its five rounds took 9-45 s, and the first sampling call waited for them
    import mdlm_hf.fast

    calls = []

    def slow_pass(model, tokens):
        calls.append(model)
        return 1.5  # seconds, as the clock below says

    clock = iter(range(0, 1000))
    monkeypatch.setattr(mdlm_hf.fast, "_time_pass", slow_pass)
    monkeypatch.setattr(mdlm_hf.fast.time, "perf_counter", lambda: next(clock) * 1.5)
    mdlm_hf.fast.bf16_is_faster(tiny_model, tiny_model)
    assert len(calls) == 4  # the warm-up round and one measured round, not five


def test_a_model_folders_files_stay_in_it(tmp_path, tiny_text):
    # a words.txt linked to /etc/passwd was followed, and its words came out in the text
    from mdlm_space import loading
    from training.words import save_word_list

    torch.manual_seed(0)
    MDLM(CharTokenizer.from_text(tiny_text).vocab, n_layer=1, n_head=2, n_embd=16, block_size=32).save_pretrained(
        tmp_path / "model"
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    save_word_list(tiny_text, outside / "words.txt")
    (outside / "casts.json").write_text('{"plays": {"a": ["ROMEO"]}}')
    (outside / "demo.json").write_text("{}")
    for name in ("words.txt", "casts.json", "demo.json"):
        (tmp_path / "model" / name).symlink_to(outside / name)
    model = MDLM.from_pretrained(tmp_path / "model")
    for find in (model.word_list_file, model.casts_file, lambda: loading.load_demo_metadata(tmp_path / "model")):
        with pytest.raises(ValueError, match="outside the model's folder: refused"):
            find()
    with pytest.raises(ValueError, match="outside the model's folder"):
        model.generate(16, seed=0)
    (tmp_path / "model" / "words.txt").unlink()
    save_word_list(tiny_text, tmp_path / "model" / "words.txt")  # a file of its own is read as before
    assert model.word_list_file() == tmp_path / "model" / "words.txt"
