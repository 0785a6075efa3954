import subprocess
import sys

import pytest

from mdlm_hf import MDLM
from mdlm_hf.__main__ import main
from mdlm_hf.sampling.options import OPTION_SPECS


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "mdlm_hf", *args], capture_output=True, text=True, timeout=120)


def test_cli_generates_and_infills(tiny_model, tmp_path):
    tiny_model.save_pretrained(tmp_path)
    result = run_cli("--model", str(tmp_path), "--prompt", "to be", "--length", "20", "--steps", "4", "--seed", "0")
    assert result.returncode == 0, result.stderr
    text = result.stdout.rstrip("\n")
    assert text.startswith("to be") and len(text) == 25
    result = run_cli(
        "--model",
        str(tmp_path),
        "--template",
        "to __ or not",
        "--steps",
        "2",
        "--order",
        "entropy",
        "--order-temperature",
        "0.5",
    )
    assert result.returncode == 0 and result.stdout.startswith("to ") and result.stdout.rstrip("\n").endswith(" or not")
    result = run_cli("--model", str(tmp_path), "--template", "to __ or not", "--steps", "2", "--show-steps")
    assert result.returncode == 0 and result.stdout.count("--- step") == 3


@pytest.mark.slow  # several seconds: CI runs it
def test_cli_errors_are_one_line(tiny_model, tmp_path):
    tiny_model.save_pretrained(tmp_path)
    result = run_cli("--model", str(tmp_path / "missing"))
    assert (
        result.returncode == 1
        and result.stderr.strip() == f"error: model directory {tmp_path / 'missing'} does not exist"
    )
    result = run_cli("--model", str(tmp_path), "--prompt", "Zé", "--length", "3")
    assert result.returncode == 1 and "outside the model's vocabulary: 'Z', 'é'" in result.stderr
    result = run_cli("--model", str(tmp_path), "--length", "5", "--order-temperature", "-1")
    assert result.returncode == 1 and "order_temperature must be a finite number >= 0" in result.stderr
    result = run_cli("--model", str(tmp_path), "--length", "5", "--remask-ratio", "1")
    assert result.returncode == 1 and "remask_ratio must be a number in [0, 1)" in result.stderr
    result = run_cli("--model", str(tmp_path), "--length", "20000")
    assert result.returncode == 1 and "length must be an integer from 1 to 16,384, got 20000" in result.stderr
    result = run_cli("--model", str(tmp_path), "--prompt", "to be", "--length", "16384")
    assert result.returncode == 1 and "from 1 to 16,379 after a prompt of 5, got 16384" in result.stderr


def test_every_sampler_option_is_a_flag_with_its_default(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for name in OPTION_SPECS:
        assert "--" + name.replace("_", "-") in help_text
    assert "--num-steps NUM_STEPS, --steps NUM_STEPS Denoising steps; default 32" in help_text


def test_flags_take_the_off_values_the_app_shows(tiny_model, tmp_path, capsys):
    tiny_model.save_pretrained(tmp_path)
    common = ["--model", str(tmp_path), "--length", "12", "--steps", "3", "--seed", "0", "--exact"]
    main([*common, "--block-length", "0", "--top-p", "1"])  # 0 and 1 switch these options off
    off = MDLM.from_pretrained(tmp_path, fast=False).generate(12, num_steps=3, seed=0, block_length=None, top_p=None)
    assert capsys.readouterr().out == off + "\n" and len(off) == 12


def test_length_below_one_is_refused_before_loading(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--model", str(tmp_path / "never-loaded"), "--length", "0"])
    assert "--length must be >= 1" in capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--length", "50"], ["--end-at", "line"]])
def test_a_prompts_flags_with_a_template_are_refused_not_ignored(tmp_path, capsys, flags):
    # they were silently ignored: the template's blanks set the length and the end
    with pytest.raises(SystemExit):
        main(["--model", str(tmp_path / "never-loaded"), "--template", "to __ or not", *flags])
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .endswith(f"{flags[0]} applies to a prompt; a --template's blanks say what is written and where it ends")
    )


def test_the_default_model_is_named_when_missing(tmp_path, monkeypatch, capsys):
    import mdlm_hf.__main__ as cli

    monkeypatch.setattr(cli, "DEFAULT_MODEL", tmp_path / "pretrained" / "mdlm-shakespeare-char")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        main(["--length", "5"])
    assert str(tmp_path / "pretrained" / "mdlm-shakespeare-char") in str(stopped.value)


def test_the_cli_samples_fast_unless_exact(tiny_model, tmp_path, monkeypatch, capsys):
    from mdlm_hf.model import MDLM

    tiny_model.save_pretrained(tmp_path)
    loaded = []
    original = MDLM.from_pretrained.__func__
    monkeypatch.setattr(
        MDLM, "from_pretrained", classmethod(lambda cls, *a, **k: loaded.append(original(cls, *a, **k)) or loaded[-1])
    )
    common = ["--model", str(tmp_path), "--length", "8", "--steps", "2", "--seed", "0"]
    main(common)
    main([*common, "--exact"])
    assert [model.fast for model in loaded] == [True, False]


def test_the_cli_writes_past_the_context_and_ends_where_asked(tiny_model, tmp_path):
    tiny_model.save_pretrained(tmp_path)
    prompt = "to be or not to be that is the question\n" * 2  # 80 characters: more than a window's context
    result = run_cli("--model", str(tmp_path), "--prompt", prompt, "--length", "150", "--seed", "0", "--exact")
    text = result.stdout[:-1]  # print's newline
    assert result.returncode == 0 and text.startswith(prompt) and len(text) == 230
    assert "note: the prompt has 80 characters and the model reads 64 at a time: its last 16" in result.stderr
    result = run_cli(
        "--model", str(tmp_path), "--prompt", prompt, "--length", "150", "--seed", "0", "--exact", "--end-at", "line"
    )
    assert result.returncode == 0 and text.startswith(result.stdout[:-1]) and len(result.stdout[:-1]) <= 230


def test_an_empty_model_name_is_named_not_replaced_by_the_default():
    # formerly: --model "" loaded the shipped model (the empty string read as "not given")
    result = run_cli("--model", "", "--length", "5")
    assert result.returncode == 1 and result.stderr.strip() == (
        "error: the model name is empty: pass a local directory or a Hub repo id"
    )
