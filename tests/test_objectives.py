"""mdlm_hf/objectives.py: each kind of model's entry, and the one place that asks which kind a model is."""

import ast
import dataclasses
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
    register_objective,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
# where the code that asks which kind a model is may live: the objectives, and the layers and network that apply the
# attention mask a pass is given
ASKS_THE_KIND = ("mdlm_hf/objectives.py", "mdlm_hf/layers.py", "mdlm_hf/network.py")
# the product and training; lab/'s research scripts read the two shipped models by name, and are not scanned
SCANNED = ("mdlm_hf/", "mdlm_space/", "training/", "app.py")


def tiny(objective: str) -> MDLM:
    torch.manual_seed(0)
    return MDLM("abc \n", n_layer=1, n_head=2, n_embd=16, block_size=32, objective=objective).eval()


def names_causal(node: ast.AST) -> bool:
    """Whether an expression reads a causal mask: a name or attribute holding "causal", or getattr's string."""
    return any(
        (isinstance(n, ast.Name) and "causal" in n.id)
        or (isinstance(n, ast.Attribute) and "causal" in n.attr)
        or (isinstance(n, ast.Constant) and n.value == "causal")
        for n in ast.walk(node)
    )


def names_a_kind(node: ast.Compare) -> bool:
    """Whether a comparison asks which objective something is: `is DIFFUSION`, `== "ar"`, `objective.name ==`."""
    sides = [node.left, *node.comparators]
    entries = any(isinstance(n, ast.Name) and n.id in ("DIFFUSION", "AUTOREGRESSIVE") for n in sides)
    names = any(isinstance(n, ast.Constant) and n.value in OBJECTIVES for n in sides)
    name_of = any(isinstance(n, ast.Attribute) and n.attr == "name" and "objective" in ast.unparse(n) for n in sides)
    return entries or names or (name_of and any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops))


def kind_branches(files: list[str] | None = None) -> list[str]:
    """The conditions (if, elif, while, a conditional expression) that read a causal mask, and the comparisons that
    ask which objective something is, outside ASKS_THE_KIND, as "file:line"."""
    if files is None:
        listed = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO_ROOT, capture_output=True, text=True).stdout
        files = [name for name in listed.split() if name.startswith(SCANNED) and (REPO_ROOT / name).exists()]
    found = []
    for name in files:
        if name in ASKS_THE_KIND:
            continue
        tree = ast.parse((REPO_ROOT / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            branch = isinstance(node, (ast.If, ast.IfExp, ast.While)) and names_causal(node.test)
            if branch or (isinstance(node, ast.Compare) and names_a_kind(node)):
                found.append(f"{name}:{node.lineno}")
    return sorted(set(found), key=lambda where: (where.split(":")[0], int(where.split(":")[1])))


def test_no_code_outside_the_objectives_asks_which_kind_a_model_is():
    assert kind_branches() == []


def test_the_branch_finder_sees_a_branch(tmp_path, monkeypatch):
    source = (
        'if model.causal:\n    pass\nx = "ar" if getattr(m, "causal") else "d"\ncausal: bool = False\n'
        "y = objective_of(m) is AUTOREGRESSIVE\nif args.objective == 'ar':\n    pass\n"
        "z = objective.name != kind\nw = 1 if is_causal else 0\nv = objective.fills_blanks and f.name == 'x'\n"
    )
    (tmp_path / "branches.py").write_text(source + '"""a causal model"""\n')
    monkeypatch.setattr(sys.modules[__name__], "REPO_ROOT", tmp_path)
    assert kind_branches(["branches.py"]) == [f"branches.py:{line}" for line in (1, 3, 5, 6, 8, 9)]


def test_each_model_knows_its_objective():
    assert objective_of(tiny("diffusion")) is DIFFUSION and objective_of(tiny("ar")) is AUTOREGRESSIVE
    assert objective_of(MDLM("ab", n_layer=1, n_head=2, n_embd=16, causal=True)) is AUTOREGRESSIVE  # earlier spelling
    wrapped = torch.nn.Module()
    wrapped.module = tiny("ar")  # as DistributedDataParallel holds it
    assert objective_of(wrapped) is AUTOREGRESSIVE
    assert objective_for_config({"vocab": "ab"}) is DIFFUSION  # saved before the twin
    assert objective_for_config({"causal": True}) is AUTOREGRESSIVE  # saved before "objective"
    assert objective_for_config({"objective": "ar"}) is AUTOREGRESSIVE
    assert {name: objective_named(name) for name in OBJECTIVES} == OBJECTIVES
    with pytest.raises(ValueError, match=r"objective must be one of \('diffusion', 'ar'\), got 'gpt'"):
        objective_named("gpt")
    with pytest.raises(ValueError, match=r"^objective must be one of .*, got list$"):
        MDLM("ab", objective=["ar"])
    with pytest.raises(ValueError, match="^causal true is objective 'ar', but objective is 'diffusion'$"):
        objective_for_config({"causal": True, "objective": "diffusion"})
    with pytest.raises(ValueError, match="^causal must be true or false, got 'yes'$"):
        MDLM("ab", causal="yes")


def test_an_objective_is_registered_once_by_its_name():
    with pytest.raises(ValueError, match="an objective named 'ar' is registered already"):
        register_objective(dataclasses.replace(AUTOREGRESSIVE, title="another"))
    assert register_objective(AUTOREGRESSIVE) is AUTOREGRESSIVE and OBJECTIVES["ar"] is AUTOREGRESSIVE
    with pytest.raises(ValueError, match="register an Objective, got 'ar'"):
        register_objective("ar")


def test_the_attention_mask_is_the_objectives(monkeypatch):
    """The network runs under the mask its entry names: a change at the last position reaches the first under
    the diffusion model's, never under the twin's, and under a mask of an entry's own as that mask says."""
    tokens = torch.randint(0, 4, (1, 8), generator=torch.Generator().manual_seed(0))
    changed = tokens.clone()
    changed[0, -1] = (changed[0, -1] + 1) % 4
    reaches = {}
    for name in OBJECTIVES:
        model = tiny(name)
        reaches[name] = not torch.allclose(model(tokens)[0, 0], model(changed)[0, 0])
    assert reaches == {"diffusion": True, "ar": False}
    model = tiny("diffusion")
    sees_only_itself = dataclasses.replace(DIFFUSION, attn_mask=lambda T, device: torch.eye(T, dtype=torch.bool))
    monkeypatch.setitem(OBJECTIVES, "diffusion", sees_only_itself)
    alone = model(tokens)
    assert torch.equal(alone[0, :-1], model(changed)[0, :-1]) and not torch.equal(alone[0, -1], model(changed)[0, -1])


def test_every_entry_fills_every_field():
    for objective in OBJECTIVES.values():
        for f in fields(objective):
            value = getattr(objective, f.name)
            assert value is not None or f.name in ("attn_mask", "card_template", "card_tags"), (objective.name, f.name)
        assert set(objective.accepted_options) <= {f.name for f in fields(SamplerOptions)}
        assert set(objective.recorded_options) <= {f.name for f in fields(SamplerOptions)}


@pytest.mark.parametrize("objective", OBJECTIVES.values(), ids=list(OBJECTIVES))
def test_the_writer_takes_the_options_its_entry_accepts_and_no_other(objective):
    """An option outside `accepted_options` changed from the defaults is refused by the writer in one line; one
    inside is taken."""
    model = tiny(objective.name)
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
    model = tiny(objective.name)
    tokens = torch.randint(0, model.mask_id, (2, 32), generator=torch.Generator().manual_seed(0))
    loss = objective.loss(model, tokens, torch.Generator().manual_seed(0), "elbo", 1e-3).item()
    score = objective.validation_nats(model, tokens.reshape(-1), 2, torch.Generator().manual_seed(0))
    log_v = torch.log(torch.tensor(float(model.mask_id))).item()
    assert abs(loss - log_v) < 0.5 and abs(score - log_v) < 0.5


def test_a_twin_checks_as_the_twin_and_not_as_the_model():
    model, twin = tiny("diffusion"), tiny("ar")
    check_twin(model, twin)
    check_twin(model, None)
    with pytest.raises(ValueError, match="the app's model must be one that fills blanks, a diffusion model"):
        check_twin(twin, None)
    with pytest.raises(ValueError, match="the twin must be a model that writes left to right"):
        check_twin(model, tiny("diffusion"))
