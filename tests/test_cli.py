import subprocess
import sys


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "mdlm_hf", *args], capture_output=True, text=True, timeout=120)


def test_cli_generates_and_infills(tiny_model, tmp_path):
    tiny_model.save_pretrained(tmp_path)
    result = run_cli("--model", str(tmp_path), "--prompt", "to be", "--length", "20", "--steps", "4", "--seed", "0")
    assert result.returncode == 0, result.stderr
    text = result.stdout.rstrip("\n")
    assert text.startswith("to be") and len(text) == 25
    result = run_cli(
        "--model", str(tmp_path), "--template", "to __ or not", "--steps", "2", "--order-temperature", "0.5"
    )
    assert result.returncode == 0 and result.stdout.startswith("to ") and result.stdout.rstrip("\n").endswith(" or not")
    result = run_cli("--model", str(tmp_path), "--template", "to __ or not", "--steps", "2", "--show-steps")
    assert result.returncode == 0 and result.stdout.count("--- step") == 3


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
    result = run_cli("--model", str(tmp_path), "--length", "500")
    assert result.returncode == 1 and "the model takes 64" in result.stderr
