"""Training flags (training/flags.py's table, training/run_options.py): refused before any work, the defaults, the
table the parser, checks, resume rules, card and settings are read from, and a resume's own."""

import dataclasses
import re
import subprocess
import sys

import pytest

from lab import gpu_job
from mdlm_hf.objectives import OBJECTIVES
from tests.conftest import REPO_ROOT
from tests.training_helpers import TINY_ARGS, run
from training import card, export, run_options, train
from training.flags import CARD_FLAGS, FLAGS, FLAGS_BY_NAME, RunSettings, check_license


def test_a_new_run_refuses_an_out_dir_that_holds_a_run(text_file, tmp_path):
    # a second run without --resume overwrote the first's checkpoint, best weights and history, and said nothing
    run(text_file, tmp_path / "run", "--max-steps", "3")
    before = {name: (tmp_path / "run" / name).read_bytes() for name in ("ckpt.pt", "best.pt", "history.json")}
    with pytest.raises(ValueError) as refused:
        run(text_file, tmp_path / "run", "--max-steps", "2", "--n-embd", "64")
    assert str(refused.value) == (
        f"--out-dir {tmp_path / 'run'} already holds a run (ckpt.pt): pass --resume to continue it, or give another "
        "--out-dir"
    )
    assert {name: (tmp_path / "run" / name).read_bytes() for name in before} == before


def test_a_new_run_refuses_a_folder_of_a_users_files_and_reuses_its_own(text_file, tmp_path):
    # formerly: --out-dir of a user's folder deleted its .draft.tmp and replaced its train.bin and history.json
    mine = tmp_path / "mine"
    mine.mkdir()
    files = {".draft.tmp": b"notes", "train.bin": b"my data", "history.json": b"{}"}
    for name, data in files.items():
        (mine / name).write_bytes(data)
    with pytest.raises(ValueError, match=r"holds files a training run did not make \(\.draft\.tmp, history\.json"):
        run(text_file, mine, "--max-steps", "2")
    assert {name: (mine / name).read_bytes() for name in files} == files
    killed = tmp_path / "killed"  # a run killed before its first checkpoint: its own folder, used again
    run(text_file, killed, "--max-steps", "2")
    (killed / "ckpt.pt").unlink()
    assert run(text_file, killed, "--max-steps", "3")["step"] == 3


def test_bad_arguments_give_clear_errors(tmp_path, text_file):
    with pytest.raises(ValueError, match="does not exist"):
        run(tmp_path / "missing.txt", tmp_path / "a", "--max-steps", "2")
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    with pytest.raises(ValueError, match="is empty"):
        run(empty, tmp_path / "b", "--max-steps", "2")
    short = tmp_path / "short.txt"
    short.write_text("just a few words")
    with pytest.raises(ValueError, match="too short for --block-size"):
        run(short, tmp_path / "c", "--max-steps", "2")
    with pytest.raises(ValueError, match="no checkpoint"):
        run(text_file, tmp_path / "d", "--resume")
    with pytest.raises(SystemExit):
        run(text_file, tmp_path / "e", "--batch-size", "0")
    result = subprocess.run(
        [sys.executable, "-m", "training.train", "--data", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert result.returncode != 0 and result.stderr.strip().splitlines()[-1].startswith("error: training text")


def test_missing_data_offline_is_one_line(tmp_path, monkeypatch):
    import urllib.request

    def offline(*args, **kwargs):
        raise OSError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(train, "DEFAULT_DATA_CACHE", tmp_path / "cache" / "tinyshakespeare.txt")
    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(SystemExit) as stopped:
        train.cli(["--out-dir", str(tmp_path / "run"), *TINY_ARGS])
    message = str(stopped.value)
    assert message.startswith("error: could not download TinyShakespeare") and "pass --data PATH" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--eval-chars", "0"], "--eval-chars must be >= 1"),
        (["--eval-samples", "0"], "--eval-samples must be >= 1"),
        (["--max-minutes", "-1"], "--max-minutes must be a number >= 0"),
        (["--save-minutes", "nan"], "--save-minutes must be a number >= 0"),
        (["--weight-decay", "-0.1"], "--weight-decay must be a number >= 0"),
        (["--warmup-steps", "-1"], "--warmup-steps must be >= 0"),
        (["--muon-weight-decay", "-1"], "--muon-weight-decay must be a number >= 0"),
        (["--lr", "0.001", "--min-lr", "0.01"], "--min-lr 0.01 is above --lr 0.001"),
        (["--max-steps", "50", "--warmup-steps", "100"], "--max-steps 50 is below --warmup-steps 100"),
        (["--lr", "0"], "--lr must be a number > 0"),
        (["--muon-lr", "-0.02"], "--muon-lr must be a number > 0"),
        (["--muon-momentum", "1"], "--muon-momentum must be in \\[0, 1\\)"),
        (["--threads", "-1"], "--threads must be from 0 \\(torch's default\\) to"),
        # torch crashed the process (a segmentation fault) on 100,000 threads, leaving token files behind
        (["--threads", "100000"], "--threads must be from 0 \\(torch's default\\) to [0-9]+, got 100000"),
        (["--device", "bogus"], "--device 'bogus' is not a device"),
        # "" trained from scratch (--init-from), wrote the run into the working directory (--out-dir), or skipped
        # the export and the push without a word
        (["--init-from", ""], "--init-from is empty: give a path"),
        (["--out-dir", " "], "--out-dir is empty: give a path"),
        (["--export-dir", ""], "--export-dir is empty: give a path"),
        (["--export-dir", "x", "--push-to-hub", ""], "--push-to-hub '' is not a Hub repo id"),
        (["--init-from", "somewhere", "--n-layer", "2"], "--init-from takes the model's shape .* drop --n-layer"),
        # formerly a hang in the fp32/bf16 timing, or an allocator's traceback under a memory limit
        (["--batch-size", "1000000000"], "--batch-size 1000000000 of --block-size 256 is 256,000,000,000 characters"),
    ],
)
def test_bad_flags_are_refused_before_any_work(flags, words, capsys):
    with pytest.raises(SystemExit):
        train.parse_args(flags)
    last_line = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.search(f"error: {words}", last_line), last_line


def test_the_defaults_are_the_cpu_recipe():
    args, _ = train.parse_args([])
    recipe = dict(optimizer="muon", muon_lr=0.02, lr=2e-3, ema=0.999)
    recipe.update(zero_init_residual=True, loss_weighting="uniform", warmup_steps=200, n_embd=256, n_layer=6)
    recipe.update(n_head=4, block_size=256, max_steps=1500)
    assert {k: getattr(args, k) for k in recipe} == recipe
    assert args.batch_size * args.block_size == 8192  # 1,500 steps: about 30 minutes at 5-8k tokens/s on 2 cores
    args, explicit = train.parse_args(["--no-zero-init-residual"])
    assert not args.zero_init_residual and "zero_init_residual" in explicit


def test_a_model_shape_that_cannot_be_built_is_refused_before_reading_the_text(text_file, tmp_path):
    with pytest.raises(SystemExit):
        run(text_file, tmp_path / "run", "--n-embd", "30", "--n-head", "4")
    assert not (tmp_path / "run" / "train.bin").exists()


def test_an_unwritable_out_or_export_dir_is_one_line_before_any_work(text_file, tmp_path, monkeypatch):
    # a directory that cannot be made or written gave a traceback (mkdir's)
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("not a directory")
    with pytest.raises(ValueError, match=f"--out-dir {in_the_way / 'run'} is not a directory this program can write"):
        run(text_file, in_the_way / "run", "--max-steps", "2")
    with pytest.raises(ValueError, match=f"--export-dir's parent {in_the_way} is not a directory this program can"):
        run(text_file, tmp_path / "run", "--max-steps", "2", "--export-dir", str(in_the_way / "export"))
    assert not (tmp_path / "run").exists()  # refused before training: nothing written

    def read_only(*args, **kwargs):  # a read-only file system (root ignores chmod, so it is simulated)
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr("tempfile.TemporaryFile", read_only)
    with pytest.raises(ValueError, match="--out-dir .* is not a directory this program can write to \\(Read-only"):
        run(text_file, tmp_path / "ro", "--max-steps", "2")
    result = subprocess.run(
        [sys.executable, "-m", "training.train", "--data", str(text_file), "--out-dir", str(in_the_way / "run")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().startswith(f"error: --out-dir {in_the_way / 'run'} is not a directory")


def test_a_license_that_is_no_hub_identifier_is_refused_with_the_nearest(capsys, text_file, tmp_path):
    # --license was written into the card's front matter unchecked
    with pytest.raises(SystemExit):
        train.parse_args(["--data", str(text_file), "--license", "MIT"])
    assert "'MIT' is not a Hub license identifier; did you mean mit?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        export.main(["--run-dir", str(tmp_path), "--export-dir", str(tmp_path / "e"), "--license", "cc-by-4"])
    assert "'cc-by-4' is not a Hub license identifier; did you mean cc-by-4.0" in capsys.readouterr().err
    for good in ("mit", "cc-by-sa-4.0", "other"):
        args, _ = train.parse_args(["--data", str(text_file), "--license", good])
        assert args.license == good
    with pytest.raises(ValueError, match="'GPL' is not a Hub license identifier"):
        check_license("GPL")


def test_a_resume_takes_the_threads_of_its_own_machine():
    # a run saved on a machine with many CPUs was refused on a smaller one for a flag the user never typed
    from training.run_options import flag_problem, resumed_args

    args, explicit = train.parse_args(["--resume", "--out-dir", "somewhere"])
    merged = resumed_args(args, explicit, {"threads": 100_000, "batch_size": 7})
    assert merged.threads == 0 and merged.batch_size == 7 and flag_problem(merged) is None
    args, explicit = train.parse_args(["--resume", "--out-dir", "somewhere", "--threads", "1"])
    assert resumed_args(args, explicit, {"threads": 100_000}).threads == 1


def test_new_data_without_resume_is_refused_as_private_without_push_is(capsys):
    for flags, words in [(["--new-data"], "--new-data needs --resume"), (["--private"], "--private needs --push")]:
        with pytest.raises(SystemExit):
            train.parse_args(flags)
        assert f"error: {words}" in capsys.readouterr().err.strip().splitlines()[-1]


def test_the_parser_has_the_tables_flags_in_its_order_with_its_defaults(capsys):
    # a flag was named in up to five places (its add_argument, its check, the resume's tuples, the card's keys)
    defaults = {f.name: f.default for f in FLAGS}
    assert vars(run_options.build_parser().parse_args([])) == defaults
    with pytest.raises(SystemExit):
        train.parse_args(["--help"])
    listed = capsys.readouterr().out.split("\noptions:\n")[1]
    at = [re.search(f"\n  {f.option}[ ,\n]", listed) for f in FLAGS]
    assert all(at) and [m.start() for m in at] == sorted(m.start() for m in at)  # --help's order is the table's
    for f in FLAGS:
        assert f.help is None or " ".join(f.help.split()[:3]) in " ".join(listed.split()), f.name
        assert f.default is None or f.check is None or f.check.test(f.default), f"{f.option}'s default fails its check"
        assert f.choices is None or f.default in f.choices, f.name
    exported = vars(export.build_parser().parse_args(["--run-dir", "r", "--export-dir", "e", "--data", "d"]))
    assert {f.name: exported[f.name] for f in CARD_FLAGS} == {f.name: f.default for f in CARD_FLAGS}  # the export's


@pytest.mark.parametrize("flag", [f for f in FLAGS if f.check is not None], ids=lambda f: f.option)
def test_every_checked_flag_refuses_a_bad_value_in_one_line_naming_it(flag, capsys):
    with pytest.raises(SystemExit):
        train.parse_args([flag.option, flag.check.bad])
    last_line = capsys.readouterr().err.strip().splitlines()[-1]
    assert last_line.partition(": error: ")[2].startswith(f"{flag.option} "), last_line
    assert flag.check.refusal is not None or f"{flag.option} must be {flag.check.words}, got " in last_line


def test_the_resume_rules_the_shape_and_the_cards_recipe_come_from_the_table():
    named = {key: tuple(f.name for f in FLAGS if getattr(f, key)) for key in ("resumable", "machine", "shape")}
    assert run_options.RESUMABLE_CHANGES == named["resumable"] and run_options.MACHINE_FLAGS == named["machine"]
    assert run_options.SHAPE_FLAGS == gpu_job.SHAPE_FLAGS == train.SHAPE_FLAGS == named["shape"]
    assert run_options.OBJECTIVE_SETTINGS == {f.name: f.default for f in FLAGS if f.objective_setting}
    assert sorted(card.RECIPE_KEYS) == sorted(f.name for f in FLAGS if f.recipe)
    # the card names the shape and the optimisation, then the objective and what only some objectives read
    last = card.RECIPE_KEYS.index("objective")
    assert all(f.objective_setting for f in FLAGS if f.name in card.RECIPE_KEYS[last + 1 :])
    assert not any(FLAGS_BY_NAME[name].objective_setting for name in card.RECIPE_KEYS[:last])
    # each such flag is read by some objective, and an objective names only such flags
    read = {name for objective in OBJECTIVES.values() for name in objective.settings}
    assert read == set(run_options.OBJECTIVE_SETTINGS)
    # a resume takes a machine's flag from its own command line, so a resume may change it; never the shape
    assert set(named["machine"]) <= set(named["resumable"]) and not set(named["shape"]) & set(named["resumable"])


def test_the_settings_carry_every_flag_and_a_resume_of_an_older_checkpoint():
    assert [field.name for field in dataclasses.fields(RunSettings)] == [f.name for f in FLAGS]
    assert dataclasses.asdict(RunSettings()) == {f.name: f.default for f in FLAGS}
    settings, explicit = train.parse_args(["--lr", "0.004", "--data", "a.txt", "b.txt", "--no-zero-init-residual"])
    assert isinstance(settings, RunSettings) and explicit == {"lr", "data", "zero_init_residual"}
    assert settings.data == ["a.txt", "b.txt"] and settings.zero_init_residual is False
    assert settings.min_lr == pytest.approx(0.0004)  # lr / 10 where not given
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.lr = 1.0
    # a checkpoint's args from before --save-minutes, with a flag this version no longer has
    resume, explicit = train.parse_args(["--resume", "--out-dir", "somewhere"])
    saved = {f.name: f.default for f in FLAGS if f.name != "save_minutes"} | {"lr": 0.001, "gone_flag": 1}
    merged = run_options.resumed_args(resume, explicit, saved)
    assert isinstance(merged, RunSettings) and merged.lr == 0.001 and merged.save_minutes == 10 and merged.resume
    assert "gone_flag" not in dataclasses.asdict(merged)
