"""Train a character-level masked diffusion language model.

    python training/train.py --data ../shared/data/tinyshakespeare.txt --out-dir runs/shakespeare
    torchrun --nproc_per_node 2 training/train.py --data input.txt     # data-parallel
    python training/train.py --out-dir runs/shakespeare --resume       # continue where it stopped

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
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from mdlm_hf import MDLM, CharTokenizer, diffusion_loss, elbo
from mdlm_hf.data import atomic_write_bytes, download_tinyshakespeare, read_text, split_text
from mdlm_hf.diffusion import LOSS_WEIGHTINGS

DEFAULT_DATA_CACHE = Path.home() / ".cache" / "mdlm_hf" / "tinyshakespeare.txt"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags; every knob of the run is one of them."""
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
    # optimisation
    p.add_argument("--batch-size", type=int, default=32, help="sequences per step per process")
    p.add_argument("--max-steps", type=int, default=2000)
    p.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    p.add_argument("--min-lr", type=float, default=None, help="final learning rate (default lr / 10)")
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.99)
    p.add_argument("--grad-clip", type=float, default=1.0, help="max gradient norm (0: off)")
    p.add_argument("--loss-weighting", choices=list(LOSS_WEIGHTINGS), default="elbo")
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
    if args.push_to_hub and not args.export_dir:
        p.error("--push-to-hub needs --export-dir")
    return args


def learning_rate(step: int, args: argparse.Namespace) -> float:
    """Linear warmup, then cosine decay from lr to min_lr at max_steps."""
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    progress = min(1.0, (step - args.warmup_steps) / max(1, args.max_steps - args.warmup_steps))
    return args.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (args.lr - args.min_lr)


def get_batch(data: torch.Tensor, batch_size: int, block_size: int, generator: torch.Generator) -> torch.Tensor:
    """Random windows of the training tokens, (B, block_size)."""
    starts = torch.randint(0, data.numel() - block_size + 1, (batch_size,), generator=generator)
    return torch.stack([data[s : s + block_size] for s in starts.tolist()])


def save_checkpoint(path: Path, payload: dict) -> None:
    """torch.save into memory, then an atomic rename: a kill mid-write leaves the old file intact."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    atomic_write_bytes(path, buffer.getvalue())


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


def main(argv: list[str] | None = None) -> dict:
    """Trains, evaluates and (optionally) exports; returns a summary of the run."""
    args = parse_args(argv)

    # ---- processes: one per torchrun rank; rank 0 alone logs and writes ----
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    rank, world_size = 0, 1
    device = choose_device(args.device)
    if distributed:
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
            torch.cuda.set_device(device)
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    is_main = rank == 0
    if args.threads:
        torch.set_num_threads(args.threads)
    out_dir = Path(args.out_dir)
    if is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        for stale in out_dir.glob(".*.tmp"):  # left by a write that was killed (SIGKILL cannot be caught)
            stale.unlink()

    # ---- data ----
    data_path = Path(args.data) if args.data else download_tinyshakespeare(DEFAULT_DATA_CACHE)
    text = read_text(data_path)
    train_text, val_text = split_text(text)
    if len(train_text) <= args.block_size or len(val_text) < 1:
        raise ValueError(
            f"text of {len(text)} characters is too short for --block-size {args.block_size}: "
            f"the training split ({len(train_text)} chars) must be longer than one block"
        )

    # ---- model, optimizer, or the checkpoint they were saved in ----
    ckpt_path = out_dir / "ckpt.pt"
    checkpoint = None
    if args.resume:
        if not ckpt_path.is_file():
            raise ValueError(f"--resume: no checkpoint at {ckpt_path}")
        checkpoint = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        model_config = checkpoint["model_config"]
    else:
        model_config = dict(
            vocab=CharTokenizer.from_text(text).vocab,
            n_layer=args.n_layer,
            n_head=args.n_head,
            n_embd=args.n_embd,
            block_size=args.block_size,
            dropout=args.dropout,
            position_encoding=args.position_encoding,
            time_conditioning=args.time_conditioning,
        )
    torch.manual_seed(args.seed)  # the same initial weights on every rank; DDP also broadcasts rank 0's
    model = MDLM(**model_config).to(device)
    torch.manual_seed(args.seed + 2000 + rank)  # dropout masks differ between ranks
    tokenizer = model.tokenizer
    train_data = torch.tensor(tokenizer.encode(train_text), dtype=torch.long)
    val_data = torch.tensor(tokenizer.encode(val_text), dtype=torch.long)

    decay = [p for p in model.parameters() if p.dim() >= 2]  # matrices and embeddings decay; norms do not
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
        betas=(args.beta1, args.beta2),
        fused=device.type == "cuda",
    )
    data_generator = torch.Generator().manual_seed(args.seed + rank)
    noise_generator = torch.Generator().manual_seed(args.seed + 1000 + rank)
    step, tokens_seen, wall_time, best_val = 0, 0, 0.0, float("inf")
    history: dict[str, list] = {"train": [], "val": []}
    if checkpoint is not None:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        step, tokens_seen, wall_time = checkpoint["step"], checkpoint["tokens_seen"], checkpoint["wall_time"]
        best_val, history = checkpoint["best_val"], checkpoint["history"]
        if rank < len(checkpoint["rng"]):
            rng = checkpoint["rng"][rank]
            data_generator.set_state(rng["data"])
            noise_generator.set_state(rng["noise"])
            torch.set_rng_state(rng["torch"])
        else:  # saved on Ctrl-C, when only rank 0's state could be collected: fresh streams, never a copy of rank 0's
            data_generator.manual_seed(args.seed + rank + 7919 * step)
            noise_generator.manual_seed(args.seed + 1000 + rank + 7919 * step)
            torch.manual_seed(args.seed + 2000 + rank + 7919 * step)
    train_model = DistributedDataParallel(model) if distributed else model

    if args.dtype == "auto" and device.type == "cpu":
        use_bf16 = bf16_is_faster(model, get_batch(train_data, args.batch_size, args.block_size, torch.Generator()))
    else:
        use_bf16 = args.dtype == "bfloat16" or (args.dtype == "auto" and device.type == "cuda")
    if distributed:  # every rank must take the same decision
        decision = torch.tensor([float(use_bf16)], device=device)
        dist.broadcast(decision, src=0)
        use_bf16 = bool(decision.item())
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if use_bf16 else nullcontext()

    def evaluate() -> float:
        """Validation NELBO (nats/char) on the first eval_chars of the split, same masks every time."""
        with autocast:
            result = elbo(model, val_data[: args.eval_chars], args.eval_samples, torch.Generator().manual_seed(1234))
        return result.nats_per_char

    def make_checkpoint() -> dict:
        # every rank's RNG state, so a resumed data-parallel run continues each stream exactly
        rng = {"data": data_generator.get_state(), "noise": noise_generator.get_state(), "torch": torch.get_rng_state()}
        all_rng = [None] * world_size if distributed else [rng]
        if distributed:
            dist.all_gather_object(all_rng, rng)
        return {
            "model_config": model_config,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "step": step,
            "tokens_seen": tokens_seen,
            "wall_time": wall_time,
            "best_val": best_val,
            "history": history,
            "rng": all_rng,
            "args": vars(args),
        }

    def write_checkpoint() -> None:
        payload = make_checkpoint()  # collective under torchrun: every rank calls it
        if is_main:
            save_checkpoint(ckpt_path, payload)
            atomic_write_bytes(out_dir / "history.json", json.dumps(history).encode())

    # SIGTERM (e.g. a scheduler stopping us) behaves like Ctrl-C: save, then exit cleanly
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    # ---- the loop ----
    if is_main:
        print(
            f"{model.num_parameters() / 1e6:.2f}M parameters, vocab {tokenizer.vocab_size}, "
            f"{len(train_text):,} train / {len(val_text):,} val chars, device {device}, "
            f"{'bf16' if use_bf16 else 'fp32'}, {world_size} process(es), starting at step {step}"
        )
    progress = tqdm(total=args.max_steps, initial=step, disable=not is_main, dynamic_ncols=True, file=sys.stdout)
    interrupted = False
    run_start = time.perf_counter() - wall_time
    window_start, window_tokens = time.perf_counter(), 0
    try:
        model.train()
        while step < args.max_steps:
            lr = learning_rate(step, args)
            for group in optimizer.param_groups:
                group["lr"] = lr
            batch = get_batch(train_data, args.batch_size, args.block_size, data_generator).to(device)
            with autocast:
                loss = diffusion_loss(train_model, batch, noise_generator, weighting=args.loss_weighting)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if args.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
            optimizer.step()
            step += 1
            tokens_seen += batch.numel() * world_size
            window_tokens += batch.numel() * world_size
            wall_time = time.perf_counter() - run_start
            progress.update(1)
            if step % args.log_interval == 0 and is_main:
                rate = window_tokens / (time.perf_counter() - window_start)
                window_start, window_tokens = time.perf_counter(), 0
                history["train"].append(
                    {"step": step, "loss": loss.item(), "lr": lr, "tokens": tokens_seen, "time": wall_time}
                )
                progress.set_postfix(loss=f"{loss.item():.3f}", lr=f"{lr:.2e}", tok_s=f"{rate:,.0f}")
            if step % args.eval_interval == 0 or step == args.max_steps:
                if is_main:
                    val = evaluate()
                    history["val"].append({"step": step, "nelbo": val, "tokens": tokens_seen, "time": wall_time})
                    tqdm.write(
                        f"step {step}: val NELBO {val:.4f} nats/char ({val / math.log(2):.4f} bpc), "
                        f"{tokens_seen / 1e6:.2f}M tokens, {wall_time / 60:.1f} min"
                    )
                    if val < best_val:
                        best_val = val
                        save_checkpoint(
                            out_dir / "best.pt",
                            {
                                "model_config": model_config,
                                "model": model.state_dict(),
                                "step": step,
                                "val_nelbo": val,
                                "tokens_seen": tokens_seen,
                            },
                        )
                write_checkpoint()
                window_start, window_tokens = time.perf_counter(), 0
            out_of_time = args.max_minutes and wall_time > args.max_minutes * 60
            if out_of_time or step == args.stop_at_step:
                if is_main:
                    tqdm.write(f"stopping at step {step} ({'--max-minutes' if out_of_time else '--stop-at-step'})")
                break
    except KeyboardInterrupt:
        interrupted = True
        if is_main:
            tqdm.write(f"interrupted at step {step}: saving checkpoint, resume with --resume")
    finally:
        progress.close()
    if interrupted and distributed:
        dist.destroy_process_group()  # peers are interrupted too; a collective here could hang
        distributed = False
    if interrupted:
        if is_main:
            save_checkpoint(ckpt_path, make_checkpoint())
            atomic_write_bytes(out_dir / "history.json", json.dumps(history).encode())
    else:
        write_checkpoint()

    finished = step >= args.max_steps and not interrupted
    summary = {
        "step": step,
        "tokens_seen": tokens_seen,
        "wall_time": wall_time,
        "best_val_nelbo": best_val,
        "finished": finished,
        "out_dir": str(out_dir),
        "model": model,
    }
    if is_main and args.export_dir and finished:
        from export import export_run  # training/export.py, beside this script

        export_run(out_dir, Path(args.export_dir), data_path, args.push_to_hub)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
    return summary


if __name__ == "__main__":
    try:
        main()
    except ValueError as error:  # bad input: one clear line, no traceback
        sys.exit(f"error: {error}")
