"""The trainer of a run: the model, its optimizers, EMA, data and random streams, and the steps that change them
(a training step, an evaluation, a checkpoint), and the loop that runs them until the run ends or is stopped.
"""

from __future__ import annotations

import json
import math
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from mdlm_hf import MDLM
from mdlm_hf.objectives import objective_of
from mdlm_hf.pipeline import sample
from mdlm_hf.sampling.state import final_state
from training.checkpoints import load_state, model_from_config, save_checkpoint, write_or_explain
from training.corpus import Corpus
from training.ema import EMA
from training.flags import EVAL_TEXT_SEED, EVAL_TEXT_STEPS, EVAL_TEXTS, RunSettings
from training.optimizers import build_optimizers, learning_rate, set_learning_rates
from training.processes import Processes, StopRequest, agreed, hardware_description, joined_hardware
from training.run_options import model_config_from_args
from training.tracking import Tracker

ETA_TIMED_STEPS = 2  # after a warm-up step, the steps timed for the estimate printed as the loop starts


def zero_residual_projections(model: MDLM) -> None:
    """Every block starts as the identity map (nathan-barry/tiny-diffusion, modded-nanoGPT)."""
    for module in model.modules():
        if getattr(module, "is_residual_projection", False):
            torch.nn.init.zeros_(module.weight)


def get_batch(
    data: np.ndarray | torch.Tensor, batch_size: int, block_size: int, generator: torch.Generator
) -> torch.Tensor:
    """Random windows of the training ids (a memory-mapped array, read window by window), (B, block_size) int64."""
    starts = torch.randint(0, len(data) - block_size + 1, (batch_size,), generator=generator)
    return torch.stack([torch.from_numpy(np.array(data[s : s + block_size], dtype=np.int64)) for s in starts.tolist()])


def training_loss(
    model: torch.nn.Module, batch: torch.Tensor, generator: torch.Generator, args: RunSettings
) -> torch.Tensor:
    """The run's objective's loss on a batch of clean text (B, T), its masks (a diffusion model's) from `generator`."""
    return objective_of(model).loss(model, batch, generator, args.loss_weighting, args.t_min)


def writing_steps(model: MDLM) -> dict:
    """The steps the samples at each evaluation take, where the model's objective takes a number of steps (a twin
    writes a character a pass)."""
    return {"num_steps": EVAL_TEXT_STEPS} if "num_steps" in objective_of(model).accepted_options else {}


def bf16_is_faster(model: MDLM, batch: torch.Tensor, args: RunSettings, repeats: int = 2) -> bool:
    """Times forward+backward in fp32 and under bf16 autocast; bf16 speed on CPUs varies by chip."""
    rng_state = torch.get_rng_state()
    timings = {}
    for use_bf16 in (False, True):
        context = torch.autocast("cpu", dtype=torch.bfloat16) if use_bf16 else nullcontext()
        for _ in range(repeats + 1):  # the first call warms up
            start = time.perf_counter()
            with context:
                loss = training_loss(model, batch, torch.Generator().manual_seed(0), args)
            loss.backward()
            timings[use_bf16] = min(timings.get(use_bf16, math.inf), time.perf_counter() - start)
    model.zero_grad(set_to_none=True)
    torch.set_rng_state(rng_state)
    return timings[True] < timings[False]


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

    def __init__(
        self,
        args: RunSettings,
        processes: Processes,
        corpus: Corpus,
        checkpoint: dict | None,
        start: dict | None = None,
    ) -> None:
        """`checkpoint`: the run's own, to resume; `start`: --init-from's model (`starting_point`) for a new run."""
        self.args, self.processes = args, processes
        self.out_dir = Path(args.out_dir)
        saved = checkpoint or start
        self.model_config = saved["model_config"] if saved else model_config_from_args(args, corpus.vocab)
        rank, device = processes.rank, processes.device
        torch.manual_seed(args.seed)  # the same initial weights on every rank; DDP also broadcasts rank 0's
        self.model = model_from_config(self.model_config, self.out_dir / "ckpt.pt").to(device)
        # the stages of training before this run (--init-from's lineage), for its card and metrics.json
        self.parent_stages: list[dict] = list(start.get("stages", [])) if start is not None else []
        if start is not None:
            load_state(self.model, start["model"], Path(args.init_from))
        if args.zero_init_residual and saved is None:
            zero_residual_projections(self.model)
        torch.manual_seed(args.seed + 2000 + rank)  # dropout masks differ between ranks
        self.train_data, self.val_data = corpus.train, corpus.val  # memory-mapped ids
        self.optimizers = build_optimizers(self.model, args, fused=device.type == "cuda")
        self.ema = EMA(self.model, args.ema) if args.ema else None
        # a second model that holds the averaged weights while they are evaluated
        self.ema_model = MDLM(**self.model_config).to(device) if self.ema else None
        self.data_generator = torch.Generator().manual_seed(args.seed + rank)
        self.noise_generator = torch.Generator().manual_seed(args.seed + 1000 + rank)
        self.progress = Progress()
        # what the run trained on so far, for the model card; a resume elsewhere adds the new machine
        self.hardware = hardware_description(device, processes.world_size)
        self.saved_step: int | None = None  # the step this invocation last wrote to ckpt.pt
        self.tracker = Tracker()  # main opens the one --tracker asks for, on rank 0
        if checkpoint is not None:
            self.restore(checkpoint)
        self.train_model = DistributedDataParallel(self.model) if processes.distributed else self.model
        if args.compile:  # the steps' forward and backward; evaluation and export run eagerly
            self.train_model = torch.compile(self.train_model)
        self.autocast = nullcontext()

    def restore(self, checkpoint: dict) -> None:
        """Weights, optimizer and EMA state, counters and this rank's random streams from a checkpoint."""
        args, rank, path = self.args, self.processes.rank, self.out_dir / "ckpt.pt"
        load_state(self.model, checkpoint["model"], path)
        if len(checkpoint["optimizers"]) != len(self.optimizers):  # load_checkpoint made sure it is a list
            raise ValueError(f"{path}: its optimizer states do not match --optimizer {args.optimizer}")
        for optimizer, state in zip(self.optimizers, checkpoint["optimizers"], strict=True):
            load_state(optimizer, state, path)
        if self.ema is not None:
            if checkpoint.get("ema") is None:
                raise ValueError("--ema: the checkpoint was trained without EMA weights; resume without --ema")
            load_state(self.ema, checkpoint["ema"], path)
        self.progress = Progress(**{f.name: checkpoint[f.name] for f in fields(Progress)})
        self.hardware = joined_hardware(checkpoint.get("hardware"), self.hardware)
        self.parent_stages = list(checkpoint.get("parent_stages") or [])
        step = self.progress.step
        if rank < len(checkpoint["rng"]):
            rng = checkpoint["rng"][rank]
            try:
                self.data_generator.set_state(rng["data"])
                self.noise_generator.set_state(rng["noise"])
                torch.set_rng_state(rng["torch"])
            except (KeyError, TypeError, RuntimeError) as error:
                raise ValueError(f"{path}: its random-number states are malformed ({error})") from error
        else:  # a checkpoint of fewer processes than now: fresh streams for the new ranks, never a copy of rank 0's
            self.data_generator.manual_seed(args.seed + rank + 7919 * step)
            self.noise_generator.manual_seed(args.seed + 1000 + rank + 7919 * step)
            torch.manual_seed(args.seed + 2000 + rank + 7919 * step)

    def choose_precision(self) -> bool:
        """bf16 autocast or fp32, the same decision on every rank; returns whether bf16 is on."""
        args, device = self.args, self.processes.device
        if args.dtype == "auto" and device.type == "cpu":
            if self.processes.is_main:
                print("timing fp32 vs bf16 for one step (--dtype auto)...", flush=True)
            trial_batch = get_batch(self.train_data, args.batch_size, args.block_size, torch.Generator())
            use_bf16 = bf16_is_faster(self.model, trial_batch, args)
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
        set_learning_rates(self.optimizers, self.progress.step, args)
        batch = get_batch(self.train_data, args.batch_size, args.block_size, self.data_generator)
        with self.autocast:
            loss = training_loss(self.train_model, batch.to(self.processes.device), self.noise_generator, args)
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
        """Validation NELBO (nats/char) on the first eval_chars of the split, same masks every time; for the
        autoregressive twin its exact NLL (which the NELBO bounds: history.json keeps both under one key)."""
        args = self.args
        masks = torch.Generator().manual_seed(1234)
        tokens = torch.from_numpy(np.array(self.val_data[: args.eval_chars], dtype=np.int64))
        with self.autocast:
            return objective_of(model).validation_nats(model, tokens, args.eval_samples, masks)

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
            f"step {p.step}: val {objective_of(self.model).score_label} {record['nelbo']:.4f} nats/char{ema_note} "
            f"({record['nelbo'] / math.log(2):.4f} bpc), {p.tokens_seen / 1e6:.2f}M tokens, {p.wall_time / 60:.1f} min"
        )
        # selection on the first validation characters only: which weights to keep, never what to train
        kind = min(candidates, key=lambda k: candidates[k][0])
        value, weights = candidates[kind]
        metrics = validation_metrics(record, objective_of(self.model).score)
        texts = self.sample_texts(self.model if kind == "raw" else self.ema_model)
        if texts:  # from the weights that scored better, as best.pt would keep them
            metrics["samples"] = "\n".join(f"--- sample {i} ---\n{text}" for i, text in enumerate(texts))
            how = f"{EVAL_TEXT_STEPS} steps" if writing_steps(self.model) else "left to right"
            heading = f"samples at step {p.step} ({kind} weights, {how}, seed {EVAL_TEXT_SEED}):"
            tqdm.write(f"{heading}\n{metrics['samples']}")
        self.tracker.log(p.step, metrics)
        if value < p.best_val:
            p.best_val = value
            best = {"model_config": self.model_config, "model": weights, "weights": kind, "step": p.step}
            save_checkpoint(self.out_dir / "best.pt", {**best, "val_nelbo": value, "tokens_seen": p.tokens_seen})
        return record

    def sample_texts(self, model: MDLM) -> list[str]:
        """EVAL_TEXTS texts of --eval-sample-chars (at most a block) from `model`, default options, fixed seed."""
        length = min(self.args.eval_sample_chars, self.args.block_size)
        if length == 0:
            return []
        canvas = torch.full((EVAL_TEXTS, length), model.mask_id, dtype=torch.long)
        steps = writing_steps(model)
        with self.autocast:  # the sampler's own generator: the training's random streams do not move
            state = final_state(sample(model, canvas, seed=EVAL_TEXT_SEED, **steps))
        return model.tokenizer.decode_batch(state.tokens.tolist())

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
            "args": asdict(self.args),  # a plain dict of the settings
            "hardware": self.hardware,
            "parent_stages": self.parent_stages,
        }

    def save(self) -> None:
        """Writes ckpt.pt and history.json atomically (rank 0); every rank must call it (the streams are gathered).
        A step this invocation saved already (the last: the loop's evaluation, then main) is skipped on every rank."""
        if self.saved_step == self.progress.step:
            return
        payload = self.checkpoint()
        if self.processes.is_main:
            save_checkpoint(self.out_dir / "ckpt.pt", payload)
            write_or_explain(self.out_dir / "history.json", json.dumps(self.progress.history).encode())
        self.saved_step = self.progress.step

    def estimate(self, step_seconds: float, steps: int) -> str:
        """How long this invocation's `steps` will take at the measured time per step (evaluations not counted)."""
        args = self.args
        minutes = steps * step_seconds / 60
        tokens_per_second = args.batch_size * args.block_size * self.processes.world_size / step_seconds
        line = f"about {minutes:.0f}" if minutes >= 10 else f"about {minutes:.1f}"
        line += f" minutes for {steps:,} steps at {tokens_per_second:,.0f} tokens/s"
        if args.max_minutes and minutes > args.max_minutes:
            line += f" (--max-minutes {args.max_minutes:g} stops it sooner)"
        return line

    def loop(self, stop: StopRequest, deadline: float = math.inf) -> str:
        """Trains until max_steps or a stop; returns why it stopped ("finished", "stopped", "interrupted").
        `deadline`: the time.perf_counter() at which --max-minutes stops this invocation."""
        args, p, is_main = self.args, self.progress, self.processes.is_main
        bar = tqdm(total=args.max_steps, initial=p.step, disable=not is_main, dynamic_ncols=True, file=sys.stdout)
        run_start = time.perf_counter() - p.wall_time  # wall_time counts every invocation of the run
        save_every = args.save_minutes * 60 if args.save_minutes else math.inf
        last_save = time.perf_counter()
        window_start, window_tokens = time.perf_counter(), p.tokens_seen
        ends_at = args.stop_at_step if p.step < args.stop_at_step < args.max_steps else args.max_steps
        steps_ahead, step_times = ends_at - p.step, []
        self.model.train()
        try:
            while p.step < args.max_steps:
                step_start = time.perf_counter()
                loss = self.train_step()
                if is_main and len(step_times) <= ETA_TIMED_STEPS:  # the warm-up step, then the timed ones
                    if self.processes.device.type == "cuda":
                        torch.cuda.synchronize()
                    step_times.append(time.perf_counter() - step_start)
                    if len(step_times) == ETA_TIMED_STEPS + 1:
                        tqdm.write(self.estimate(sum(step_times[1:]) / ETA_TIMED_STEPS, steps_ahead))
                p.wall_time = time.perf_counter() - run_start
                bar.update(1)
                if p.step % args.log_interval == 0 and is_main:
                    window_start, window_tokens = self.log_training(loss, bar, window_start, window_tokens)
                saved = p.step % args.eval_interval == 0 or p.step == args.max_steps
                if saved:
                    if is_main:
                        self.evaluate()
                    self.save()
                now = time.perf_counter()
                # rank 0's clock decides (see agreed); a stop request on any rank stops all; the end saves anyway
                save_due = is_main and not saved and p.step < args.max_steps and now - last_save > save_every
                interrupted, out_of_time, save_due = agreed(
                    self.processes, stop.requested, is_main and now > deadline, save_due
                )
                if interrupted:
                    if is_main:
                        tqdm.write(f"interrupted at step {p.step}: saving checkpoint, resume with --resume")
                    return "interrupted"
                if out_of_time or p.step == args.stop_at_step:
                    reason = "--max-minutes" if out_of_time else "--stop-at-step"
                    if is_main:
                        tqdm.write(f"stopping at step {p.step} ({reason})")
                    return "stopped"
                if save_due:  # --save-minutes: a checkpoint even when evaluations are far apart
                    self.save()
                if saved or save_due:  # the time a save took is not the steps'
                    last_save = time.perf_counter()
                    window_start, window_tokens = time.perf_counter(), p.tokens_seen
        finally:
            bar.close()
        return "finished"

    def log_training(self, loss: torch.Tensor, bar: tqdm, window_start: float, window_tokens: int) -> tuple[float, int]:
        """Records the step's loss, learning rate and tokens/s since the window began (at `window_start`, with
        `window_tokens` seen) in the history, the progress bar and the tracker; returns the next window's start."""
        p = self.progress
        rate = (p.tokens_seen - window_tokens) / (time.perf_counter() - window_start)
        next_window = time.perf_counter(), p.tokens_seen
        lr = learning_rate(p.step - 1, self.args)
        p.history["train"].append(
            {"step": p.step, "loss": loss.item(), "lr": lr, "tokens": p.tokens_seen, "time": p.wall_time}
        )
        bar.set_postfix(loss=f"{loss.item():.3f}", lr=f"{lr:.2e}", tok_s=f"{rate:,.0f}")
        self.tracker.log(p.step, {"train/loss": loss.item(), "train/lr": lr, "train/tokens_per_s": rate})
        return next_window


def validation_metrics(record: dict, score: str = "nelbo") -> dict[str, float | str]:
    """An evaluation's record as tracker scalars: the validation `score` ("nelbo", a twin's "nll") in nats and bits
    per char, raw and EMA, and the tokens seen."""
    metrics = {f"val/{score}": record["nelbo"], "val/bpc": record["nelbo"] / math.log(2)}
    if "nelbo_ema" in record:
        metrics.update({f"val/{score}_ema": record["nelbo_ema"], "val/bpc_ema": record["nelbo_ema"] / math.log(2)})
    return {**metrics, "train/tokens_seen": record["tokens"]}
