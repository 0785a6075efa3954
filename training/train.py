"""Train a character-level masked diffusion language model.

    python -m training.train --data ../shared/data/tinyshakespeare.txt --out-dir runs/shakespeare
    torchrun --nproc_per_node 2 -m training.train --data input.txt     # data-parallel
    python -m training.train --out-dir runs/shakespeare --resume       # continue where it stopped

Reads top to bottom: arguments, data, model and optimizer (or a checkpoint), the loop, the export.
Checkpoints are written atomically, so killing the run at any moment keeps the last good one;
Ctrl-C (or SIGTERM) saves and exits cleanly.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import signal
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from mdlm_hf import MDLM, CharTokenizer, diffusion_loss, elbo
from mdlm_hf.data import atomic_write_bytes, download_tinyshakespeare, read_text, split_text
from mdlm_hf.diffusion import LOSS_WEIGHTINGS
from mdlm_hf.model import MLP_KINDS, NORM_KINDS
from training.ema import EMA
from training.optimizers import OPTIMIZERS, build_optimizers, set_learning_rates

DEFAULT_DATA_CACHE = Path.home() / ".cache" / "mdlm_hf" / "tinyshakespeare.txt"


# flags a resumed run may change; every other flag is the run's own and comes from its checkpoint
RESUMABLE_CHANGES = (
    "data",
    "out_dir",
    "resume",
    "max_steps",
    "stop_at_step",
    "max_minutes",
    "eval_interval",
    "log_interval",
    "export_dir",
    "push_to_hub",
    "threads",
    "device",
    "dtype",
)
_NOT_GIVEN = object()


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, set[str]]:
    """Command-line flags (every knob of the run is one of them) and the names of those given explicitly."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=str, default=None, help="UTF-8 text file (default: download TinyShakespeare)")
    p.add_argument("--out-dir", type=str, default="runs/default", help="checkpoints, history and export go here")
    p.add_argument("--resume", action="store_true", help="continue from OUT_DIR/ckpt.pt")
    # model
    p.add_argument("--n-layer", type=int, default=6)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=256)
    p.add_argument("--block-size", type=int, default=256, help="context length in characters")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--position-encoding", choices=["rope", "learned"], default="rope")
    p.add_argument("--time-conditioning", action="store_true")
    p.add_argument("--norm", choices=NORM_KINDS, default="layernorm")
    p.add_argument("--mlp", choices=MLP_KINDS, default="gelu")
    p.add_argument("--qk-norm", action="store_true", help="RMS-normalise queries and keys per head")
    p.add_argument("--zero-init-residual", action="store_true", help="residual projections start at zero")
    # optimisation
    p.add_argument("--batch-size", type=int, default=32, help="sequences per step per process")
    p.add_argument("--max-steps", type=int, default=2000)
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw", help="muon: Muon for the blocks' matrices")
    p.add_argument("--lr", type=float, default=2e-3, help="peak AdamW learning rate")
    p.add_argument("--min-lr", type=float, default=None, help="final AdamW learning rate (default lr / 10)")
    p.add_argument("--muon-lr", type=float, default=0.02, help="peak Muon learning rate (same schedule shape)")
    p.add_argument("--muon-momentum", type=float, default=0.95)
    p.add_argument("--muon-weight-decay", type=float, default=0.01, help="decoupled, scaled by the Muon lr")
    p.add_argument("--ema", type=float, default=0.0, help="EMA decay of the weights for eval and export; 0: off")
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.99)
    p.add_argument("--grad-clip", type=float, default=1.0, help="max gradient norm (0: off)")
    p.add_argument("--loss-weighting", choices=list(LOSS_WEIGHTINGS), default="elbo")
    p.add_argument("--t-min", type=float, default=1e-3, help="training mask ratios t are drawn from [t_min, 1)")
    p.add_argument(
        "--dtype",
        choices=["auto", "float32", "bfloat16"],
        default="auto",
        help="autocast dtype; auto = bfloat16 on GPU, and on CPU whichever a timed trial step finds faster",
    )
    p.add_argument("--device", type=str, default="auto", help="auto, cpu, cuda, cuda:1, ...")
    p.add_argument("--threads", type=int, default=0, help="CPU threads per process (0: torch's default)")
    p.add_argument("--seed", type=int, default=1337)
    # logging, evaluation, export
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--eval-interval", type=int, default=250)
    p.add_argument("--eval-chars", type=int, default=16384, help="validation characters per periodic evaluation")
    p.add_argument("--eval-samples", type=int, default=2, help="mask draws per validation window")
    p.add_argument("--max-minutes", type=float, default=0, help="stop (saving) after this wall time; 0: no limit")
    p.add_argument(
        "--stop-at-step",
        type=int,
        default=0,
        help="stop (saving) after this step without changing the schedule, to split a run; 0: never",
    )
    p.add_argument("--export-dir", type=str, default=None, help="write the Hub-ready model here at the end")
    p.add_argument("--push-to-hub", type=str, default=None, metavar="REPO_ID", help="upload the export to this repo")
    # argparse fills in a default only where the namespace has no value yet: sentinels reveal what was typed
    given = p.parse_args(argv, namespace=argparse.Namespace(**{k: _NOT_GIVEN for k in vars(p.parse_args([]))}))
    explicit = {k for k, v in vars(given).items() if v is not _NOT_GIVEN}
    args = p.parse_args(argv)
    if args.min_lr is None:
        args.min_lr = args.lr / 10
    for name in (
        "n_layer",
        "n_head",
        "n_embd",
        "block_size",
        "batch_size",
        "max_steps",
        "eval_interval",
        "log_interval",
    ):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if not 0.0 <= args.ema < 1.0:
        p.error("--ema must be in [0, 1) (0 turns it off)")
    if not 0.0 < args.t_min < 1.0:
        p.error("--t-min must be in (0, 1)")
    if args.push_to_hub and not args.export_dir:
        p.error("--push-to-hub needs --export-dir")
    return args, explicit


def resumed_args(args: argparse.Namespace, explicit: set[str], saved: dict) -> argparse.Namespace:
    """The checkpoint's own settings, with the flags a resume may change taken from the command line.

    A flag that would change the run itself (model shape, optimizer, loss, batch...) and differs from
    the checkpoint's is an error rather than being silently ignored or silently applied.
    """
    conflicts = [
        f"--{k.replace('_', '-')} {getattr(args, k)} (the run has {saved[k]})"
        for k in sorted(explicit - set(RESUMABLE_CHANGES))
        if k in saved and getattr(args, k) != saved[k]
    ]
    if conflicts:
        raise ValueError(f"--resume keeps the run's own settings; these flags differ: {'; '.join(conflicts)}")
    # flags newer than the checkpoint keep their defaults; flags typed now win over the saved ones
    merged = {**vars(args), **saved, **{k: getattr(args, k) for k in explicit}, "resume": True, "out_dir": args.out_dir}
    changed = [f"{k}={getattr(args, k)} (was {saved[k]})" for k in explicit if getattr(args, k) != saved.get(k)]
    if changed:
        print(f"resuming with changed settings: {', '.join(sorted(changed))}")
    return argparse.Namespace(**merged)


def learning_rate(step: int, args: argparse.Namespace) -> float:
    """Linear warmup, then cosine decay from lr to min_lr at max_steps."""
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    progress = min(1.0, (step - args.warmup_steps) / max(1, args.max_steps - args.warmup_steps))
    return args.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (args.lr - args.min_lr)


def zero_residual_projections(model: MDLM) -> None:
    """Every block starts as the identity map (nathan-barry/tiny-diffusion, modded-nanoGPT)."""
    for module in model.modules():
        if getattr(module, "is_residual_projection", False):
            torch.nn.init.zeros_(module.weight)


def get_batch(data: torch.Tensor, batch_size: int, block_size: int, generator: torch.Generator) -> torch.Tensor:
    """Random windows of the training tokens, (B, block_size)."""
    starts = torch.randint(0, data.numel() - block_size + 1, (batch_size,), generator=generator)
    return torch.stack([data[s : s + block_size] for s in starts.tolist()])


def save_checkpoint(path: Path, payload: dict) -> None:
    """torch.save into memory, then an atomic rename: a kill mid-write leaves the old file intact."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def load_checkpoint(path: Path) -> dict:
    """Loads tensors and plain values only (weights_only: a crafted file cannot run code), or says why not."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # pickle, zip and EOF errors of empty, truncated or foreign files
        raise ValueError(f"{path} is not a readable mdlm_hf checkpoint ({type(error).__name__}: {error})") from error
    if not isinstance(checkpoint, dict) or "model_config" not in checkpoint or "model" not in checkpoint:
        raise ValueError(f"{path} is not an mdlm_hf checkpoint: it has no model_config and model")
    return checkpoint


def bf16_is_faster(model: MDLM, batch: torch.Tensor, repeats: int = 2) -> bool:
    """Times forward+backward in fp32 and under bf16 autocast; bf16 speed on CPUs varies by chip."""
    rng_state = torch.get_rng_state()
    timings = {}
    for use_bf16 in (False, True):
        context = torch.autocast("cpu", dtype=torch.bfloat16) if use_bf16 else nullcontext()
        for _ in range(repeats + 1):  # the first call warms up
            start = time.perf_counter()
            with context:
                loss = diffusion_loss(model, batch, torch.Generator().manual_seed(0))
            loss.backward()
            timings[use_bf16] = min(timings.get(use_bf16, math.inf), time.perf_counter() - start)
    model.zero_grad(set_to_none=True)
    torch.set_rng_state(rng_state)
    return timings[True] < timings[False]


def choose_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


@dataclass
class Processes:
    """Where this process runs: one per torchrun rank; rank 0 alone logs and writes."""

    device: torch.device
    rank: int = 0
    world_size: int = 1

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup_processes(args: argparse.Namespace) -> Processes:
    """Joins the torchrun process group (gloo on CPU, nccl on GPU) when there is one; sets threads."""
    processes = Processes(choose_device(args.device))
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        processes.rank, processes.world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if processes.device.type == "cuda":
            processes.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
            torch.cuda.set_device(processes.device)
        dist.init_process_group(backend="nccl" if processes.device.type == "cuda" else "gloo")
    if args.threads:
        torch.set_num_threads(args.threads)
    return processes


def read_training_text(args: argparse.Namespace) -> tuple[Path, str]:
    """The training text (downloaded TinyShakespeare by default), checked to hold at least one block."""
    data_path = Path(args.data) if args.data else download_tinyshakespeare(DEFAULT_DATA_CACHE)
    text = read_text(data_path)
    train_text, val_text = split_text(text)
    if len(train_text) <= args.block_size or len(val_text) < 1:
        raise ValueError(
            f"text of {len(text)} characters is too short for --block-size {args.block_size}: "
            f"the training split ({len(train_text)} chars) must be longer than one block"
        )
    return data_path, text


def model_config_from_args(args: argparse.Namespace, text: str) -> dict:
    """The MDLM constructor's arguments for a new run: the text's characters and the model flags."""
    return dict(
        vocab=CharTokenizer.from_text(text).vocab,
        n_layer=args.n_layer,
        n_head=args.n_head,
        n_embd=args.n_embd,
        block_size=args.block_size,
        dropout=args.dropout,
        position_encoding=args.position_encoding,
        time_conditioning=args.time_conditioning,
        norm=args.norm,
        mlp=args.mlp,
        qk_norm=args.qk_norm,
    )


class StopRequest:
    """Ctrl-C or SIGTERM asks the loop to stop at the next step boundary, so the checkpoint is exact.

    Raising mid-step (Python's default) would save random streams that had already moved past the
    interrupted step. A second signal stops at once, without saving (the last checkpoint stays).
    """

    def __init__(self) -> None:
        self.requested = False
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        tqdm.write("stop requested: finishing this step, then saving (signal again to quit without saving)")

    def agreed(self, processes: Processes) -> bool:
        """Whether any rank was asked to stop: every rank must leave the loop at the same step."""
        if not processes.distributed:
            return self.requested
        flag = torch.tensor([float(self.requested)], device=processes.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())


@dataclass
class Progress:
    """The counters a checkpoint carries besides weights and optimizer state."""

    step: int = 0
    tokens_seen: int = 0
    wall_time: float = 0.0
    best_val: float = math.inf
    history: dict = field(default_factory=lambda: {"train": [], "val": []})


class Trainer:
    """The model, its optimizers, EMA, data and random streams, and the steps that change them."""

    def __init__(self, args: argparse.Namespace, processes: Processes, text: str, checkpoint: dict | None) -> None:
        self.args, self.processes = args, processes
        self.out_dir = Path(args.out_dir)
        self.model_config = checkpoint["model_config"] if checkpoint else model_config_from_args(args, text)
        rank, device = processes.rank, processes.device
        torch.manual_seed(args.seed)  # the same initial weights on every rank; DDP also broadcasts rank 0's
        self.model = MDLM(**self.model_config).to(device)
        if args.zero_init_residual and checkpoint is None:
            zero_residual_projections(self.model)
        torch.manual_seed(args.seed + 2000 + rank)  # dropout masks differ between ranks
        train_text, val_text = split_text(text)
        self.train_data = torch.tensor(self.model.tokenizer.encode(train_text), dtype=torch.long)
        self.val_data = torch.tensor(self.model.tokenizer.encode(val_text), dtype=torch.long)
        self.optimizers = build_optimizers(self.model, args, fused=device.type == "cuda")
        self.ema = EMA(self.model, args.ema) if args.ema else None
        # a second model that holds the averaged weights while they are evaluated
        self.ema_model = MDLM(**self.model_config).to(device) if self.ema else None
        self.data_generator = torch.Generator().manual_seed(args.seed + rank)
        self.noise_generator = torch.Generator().manual_seed(args.seed + 1000 + rank)
        self.progress = Progress()
        if checkpoint is not None:
            self.restore(checkpoint)
        self.train_model = DistributedDataParallel(self.model) if processes.distributed else self.model
        self.autocast = nullcontext()

    def restore(self, checkpoint: dict) -> None:
        """Weights, optimizer and EMA state, counters and this rank's random streams from a checkpoint."""
        args, rank = self.args, self.processes.rank
        self.model.load_state_dict(checkpoint["model"])
        for optimizer, state in zip(self.optimizers, checkpoint["optimizers"], strict=True):
            optimizer.load_state_dict(state)
        if self.ema is not None:
            if checkpoint.get("ema") is None:
                raise ValueError("--ema: the checkpoint was trained without EMA weights; resume without --ema")
            self.ema.load_state_dict(checkpoint["ema"])
        self.progress = Progress(
            **{k: checkpoint[k] for k in ("step", "tokens_seen", "wall_time", "best_val", "history")}
        )
        step = self.progress.step
        if rank < len(checkpoint["rng"]):
            rng = checkpoint["rng"][rank]
            self.data_generator.set_state(rng["data"])
            self.noise_generator.set_state(rng["noise"])
            torch.set_rng_state(rng["torch"])
        else:  # a checkpoint of fewer processes than now: fresh streams for the new ranks, never a copy of rank 0's
            self.data_generator.manual_seed(args.seed + rank + 7919 * step)
            self.noise_generator.manual_seed(args.seed + 1000 + rank + 7919 * step)
            torch.manual_seed(args.seed + 2000 + rank + 7919 * step)

    def choose_precision(self) -> bool:
        """bf16 autocast or fp32, the same decision on every rank; returns whether bf16 is on."""
        args, device = self.args, self.processes.device
        if args.dtype == "auto" and device.type == "cpu":
            trial_batch = get_batch(self.train_data, args.batch_size, args.block_size, torch.Generator())
            use_bf16 = bf16_is_faster(self.model, trial_batch)
        else:
            use_bf16 = args.dtype == "bfloat16" or (args.dtype == "auto" and device.type == "cuda")
        if self.processes.distributed:
            decision = torch.tensor([float(use_bf16)], device=device)
            dist.broadcast(decision, src=0)
            use_bf16 = bool(decision.item())
        self.autocast = torch.autocast(device.type, dtype=torch.bfloat16) if use_bf16 else nullcontext()
        return use_bf16

    def train_step(self) -> torch.Tensor:
        """One optimizer step on a fresh batch; returns the (detached) loss."""
        args = self.args
        set_learning_rates(self.optimizers, learning_rate(self.progress.step, args) / args.lr)
        batch = get_batch(self.train_data, args.batch_size, args.block_size, self.data_generator)
        with self.autocast:
            loss = diffusion_loss(
                self.train_model, batch.to(self.processes.device), self.noise_generator, args.loss_weighting, args.t_min
            )
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"the loss became {loss.item()} at step {self.progress.step + 1}; the last good checkpoint is kept "
                "(lower --lr or --muon-lr, or raise --warmup-steps)"
            )
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), args.grad_clip)
        for optimizer in self.optimizers:
            optimizer.step()
        if self.ema is not None:
            self.ema.update(self.model)
        self.progress.step += 1
        self.progress.tokens_seen += batch.numel() * self.processes.world_size
        return loss.detach()

    def validation_nelbo(self, model: MDLM) -> float:
        """Validation NELBO (nats/char) on the first eval_chars of the split, same masks every time."""
        args = self.args
        masks = torch.Generator().manual_seed(1234)
        with self.autocast:
            return elbo(model, self.val_data[: args.eval_chars], args.eval_samples, masks).nats_per_char

    def evaluate(self) -> dict:
        """Scores the weights (and their EMA), logs both, and keeps the better in best.pt when it is the best yet."""
        p = self.progress
        record = {"step": p.step, "nelbo": self.validation_nelbo(self.model)}
        record.update(tokens=p.tokens_seen, time=p.wall_time)
        candidates = {"raw": (record["nelbo"], self.model.state_dict())}
        if self.ema is not None:
            ema_weights = self.ema.weights(self.model)
            self.ema_model.load_state_dict(ema_weights)
            record["nelbo_ema"] = self.validation_nelbo(self.ema_model)
            candidates["ema"] = (record["nelbo_ema"], ema_weights)
        p.history["val"].append(record)
        ema_note = f", EMA {record['nelbo_ema']:.4f}" if self.ema is not None else ""
        tqdm.write(
            f"step {p.step}: val NELBO {record['nelbo']:.4f} nats/char{ema_note} "
            f"({record['nelbo'] / math.log(2):.4f} bpc), {p.tokens_seen / 1e6:.2f}M tokens, {p.wall_time / 60:.1f} min"
        )
        # selection on the first validation characters only: which weights to keep, never what to train
        kind = min(candidates, key=lambda k: candidates[k][0])
        value, weights = candidates[kind]
        if value < p.best_val:
            p.best_val = value
            best = {"model_config": self.model_config, "model": weights, "weights": kind, "step": p.step}
            save_checkpoint(self.out_dir / "best.pt", {**best, "val_nelbo": value, "tokens_seen": p.tokens_seen})
        return record

    def checkpoint(self) -> dict:
        """Everything a resume needs; collective under torchrun (every rank's random streams are gathered)."""
        rng = {
            "data": self.data_generator.get_state(),
            "noise": self.noise_generator.get_state(),
            "torch": torch.get_rng_state(),
        }
        all_rng = [rng]
        if self.processes.distributed:
            all_rng = [None] * self.processes.world_size
            dist.all_gather_object(all_rng, rng)
        return {
            "model_config": self.model_config,
            "model": self.model.state_dict(),
            "optimizers": [optimizer.state_dict() for optimizer in self.optimizers],
            "ema": self.ema.state_dict() if self.ema is not None else None,
            **asdict(self.progress),
            "rng": all_rng,
            "args": vars(self.args),
        }

    def save(self, payload: dict | None = None) -> None:
        """Writes ckpt.pt and history.json atomically (rank 0); every rank must call it unless a payload is given."""
        payload = payload if payload is not None else self.checkpoint()
        if self.processes.is_main:
            save_checkpoint(self.out_dir / "ckpt.pt", payload)
            atomic_write_bytes(self.out_dir / "history.json", json.dumps(self.progress.history).encode())

    def loop(self, stop: StopRequest) -> str:
        """Trains until max_steps or a stop; returns why it stopped ("finished", "stopped", "interrupted")."""
        args, p, is_main = self.args, self.progress, self.processes.is_main
        bar = tqdm(total=args.max_steps, initial=p.step, disable=not is_main, dynamic_ncols=True, file=sys.stdout)
        run_start = time.perf_counter() - p.wall_time
        window_start, window_tokens = time.perf_counter(), p.tokens_seen
        self.model.train()
        try:
            while p.step < args.max_steps:
                loss = self.train_step()
                p.wall_time = time.perf_counter() - run_start
                bar.update(1)
                if p.step % args.log_interval == 0 and is_main:
                    rate = (p.tokens_seen - window_tokens) / (time.perf_counter() - window_start)
                    window_start, window_tokens = time.perf_counter(), p.tokens_seen
                    lr = learning_rate(p.step - 1, args)
                    p.history["train"].append(
                        {"step": p.step, "loss": loss.item(), "lr": lr, "tokens": p.tokens_seen, "time": p.wall_time}
                    )
                    bar.set_postfix(loss=f"{loss.item():.3f}", lr=f"{lr:.2e}", tok_s=f"{rate:,.0f}")
                if p.step % args.eval_interval == 0 or p.step == args.max_steps:
                    if is_main:
                        self.evaluate()
                    self.save()
                    window_start, window_tokens = time.perf_counter(), p.tokens_seen
                if stop.agreed(self.processes):
                    if is_main:
                        tqdm.write(f"interrupted at step {p.step}: saving checkpoint, resume with --resume")
                    return "interrupted"
                out_of_time = args.max_minutes and p.wall_time > args.max_minutes * 60
                if out_of_time or p.step == args.stop_at_step:
                    reason = "--max-minutes" if out_of_time else "--stop-at-step"
                    if is_main:
                        tqdm.write(f"stopping at step {p.step} ({reason})")
                    return "stopped"
        finally:
            bar.close()
        return "finished"


def main(argv: list[str] | None = None) -> dict:
    """Trains, evaluates and (optionally) exports; returns a summary of the run."""
    args, explicit = parse_args(argv)
    ckpt_path = Path(args.out_dir) / "ckpt.pt"
    checkpoint = None
    if args.resume:  # the checkpoint's settings are the run's own
        if not ckpt_path.is_file():
            raise ValueError(f"--resume: no checkpoint at {ckpt_path}")
        checkpoint = load_checkpoint(ckpt_path)
        args = resumed_args(args, explicit, checkpoint.get("args", {}))
    processes = setup_processes(args)
    out_dir = Path(args.out_dir)
    if processes.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        for stale in out_dir.glob(".*.tmp"):  # left by a write that was killed (SIGKILL cannot be caught)
            stale.unlink()
    data_path, text = read_training_text(args)
    trainer = Trainer(args, processes, text, checkpoint)
    use_bf16 = trainer.choose_precision()
    stop = StopRequest()  # Ctrl-C and SIGTERM (e.g. a scheduler stopping us): save at a step boundary, exit
    if processes.is_main:
        train_chars, val_chars = trainer.train_data.numel(), trainer.val_data.numel()
        print(
            f"{trainer.model.num_parameters() / 1e6:.2f}M parameters, vocab {trainer.model.vocab_size}, "
            f"{train_chars:,} train / {val_chars:,} val chars, device {processes.device}, "
            f"{'bf16' if use_bf16 else 'fp32'}, {processes.world_size} process(es), "
            f"starting at step {trainer.progress.step}"
        )
    outcome = trainer.loop(stop)
    trainer.save()  # every rank reached the same step boundary, so the collective save is safe

    p = trainer.progress
    finished = outcome == "finished"
    if processes.is_main and args.export_dir and finished:
        from training.export import export_run

        export_run(out_dir, Path(args.export_dir), data_path, args.push_to_hub)
    if processes.distributed:
        dist.barrier()
        dist.destroy_process_group()
    return {
        "step": p.step,
        "tokens_seen": p.tokens_seen,
        "wall_time": p.wall_time,
        "best_val_nelbo": p.best_val,
        "finished": finished,
        "out_dir": str(out_dir),
        "model": trainer.model,
    }


if __name__ == "__main__":
    try:
        main()
    except (ValueError, FloatingPointError) as error:  # bad input or a diverged run: one clear line, no traceback
        sys.exit(f"error: {error}")
