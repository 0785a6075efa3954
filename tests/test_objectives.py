"""mdlm_hf/objectives.py: each kind of model's entry, and the one place that asks which kind a model is."""

import ast
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
import torch

from mdlm_hf import MDLM, SamplerOptions, sample
from mdlm_hf.objectives import (
    AUTOREGRESSIVE,
    DIFFUSION,
    OBJECTIVES,
    check_twin,
    objective_for_config,
    objective_named,
    objective_of,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
# outside the objectives and the attention mask (the network's own, with its key-value cache)
ALLOWED_ELSEWHERE = 5


def tiny(causal: bool) -> MDLM:
    torch.manual_seed(0)
    return MDLM("abc \n", n_layer=1, n_head=2, n_embd=16, block_size=32, causal=causal).eval()


def names_causal(node: ast.AST) -> bool:
    """Whether an expression reads `causal`: a name, an attribute, or getattr's string."""
    return any(
        (isinstance(n, ast.Name) and n.id == "causal")
        or (isinstance(n, ast.Attribute) and n.attr == "causal")
        or (isinstance(n, ast.Constant) and n.value == "causal")
        for n in ast.walk(node)
    )


def causal_branches(files: list[str] | None = None) -> list[str]:
    """The conditions (if, elif, while, a conditional expression) that read `causal`, outside objectives.py and
    layers.py, as "file:line"."""
    if files is None:
        listed = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO_ROOT, capture_output=True, text=True).stdout
        files = [name for name in listed.split() if (REPO_ROOT / name).exists()]
    found = []
    for name in files:
        if name.startswith("tests/") or name in ("mdlm_hf/objectives.py", "mdlm_hf/layers.py"):
            continue
        tree = ast.parse((REPO_ROOT / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.If, ast.IfExp, ast.While)) and names_causal(node.test):
                found.append(f"{name}:{node.lineno}")
    return found


def test_few_branches_on_causal_outside_the_objectives():
    found = causal_branches()
    assert len(found) <= ALLOWED_ELSEWHERE, "\n".join(found)


def test_the_branch_finder_sees_a_branch(tmp_path, monkeypatch):
    source = 'if model.causal:\n    pass\nx = "ar" if getattr(m, "causal") else "d"\ncausal: bool = False\n'
    (tmp_path / "branches.py").write_text(source + '"""a causal model"""\n')
    monkeypatch.setattr(sys.modules[__name__], "REPO_ROOT", tmp_path)
    assert causal_branches(["branches.py"]) == ["branches.py:1", "branches.py:3"]


def test_each_model_knows_its_objective():
    assert objective_of(tiny(False)) is DIFFUSION and objective_of(tiny(True)) is AUTOREGRESSIVE
    wrapped = torch.nn.Module()
    wrapped.module = tiny(True)  # as DistributedDataParallel holds it
    assert objective_of(wrapped) is AUTOREGRESSIVE
    assert objective_for_config({"vocab": "ab"}) is DIFFUSION  # saved before the twin
    assert objective_for_config({"causal": True}) is AUTOREGRESSIVE
    assert {name: objective_named(name) for name in OBJECTIVES} == OBJECTIVES
    with pytest.raises(ValueError, match=r"objective must be one of \('diffusion', 'ar'\), got 'gpt'"):
        objective_named("gpt")


def test_every_entry_fills_every_field():
    for objective in OBJECTIVES.values():
        for f in fields(objective):
            value = getattr(objective, f.name)
            assert value is not None or f.name in ("card_template", "card_tags"), (objective.name, f.name)
        assert set(objective.accepted_options) <= {f.name for f in fields(SamplerOptions)}
        assert set(objective.recorded_options) <= {f.name for f in fields(SamplerOptions)}


@pytest.mark.parametrize("objective", OBJECTIVES.values(), ids=list(OBJECTIVES))
def test_the_writer_takes_the_options_its_entry_accepts_and_no_other(objective):
    """An option outside `accepted_options` changed from the defaults is refused by the writer in one line; one
    inside is taken."""
    model = tiny(objective.causal)
    canvas = torch.tensor([model.tokenizer.encode("ab")[0]] + [model.mask_id] * 7)
    defaults = objective.default_options().replace(real_words=False, keep_cast=False)
    changed = {"temperature": 0.5, "num_steps": 4}
    for name, value in changed.items():
        options = defaults.replace(**{name: value})
        if name in objective.accepted_options:
            assert list(sample(model, canvas, options, seed=0))[-1].done
        else:
            with pytest.raises(ValueError, match=name):
                list(sample(model, canvas, options, seed=0))


@pytest.mark.parametrize("objective", OBJECTIVES.values(), ids=list(OBJECTIVES))
def test_the_loss_and_the_validation_score_are_of_one_scale(objective):
    """An untrained model's loss and validation score are both near log(V) nats per character."""
    model = tiny(objective.causal)
    tokens = torch.randint(0, model.mask_id, (2, 32), generator=torch.Generator().manual_seed(0))
    loss = objective.loss(model, tokens, torch.Generator().manual_seed(0), "elbo", 1e-3, 0.0).item()
    score = objective.validation_nats(model, tokens.reshape(-1), 2, torch.Generator().manual_seed(0))
    log_v = torch.log(torch.tensor(float(model.mask_id))).item()
    assert abs(loss - log_v) < 0.5 and abs(score - log_v) < 0.5


def test_a_twin_checks_as_the_twin_and_not_as_the_model():
    model, twin = tiny(False), tiny(True)
    check_twin(model, twin)
    check_twin(model, None)
    with pytest.raises(ValueError, match="must be a diffusion model"):
        check_twin(twin, None)
    with pytest.raises(ValueError, match="must be an autoregressive model"):
        check_twin(model, tiny(False))
