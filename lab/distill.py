"""An 8-pass student: self-distillation through time (SDTT, Deschenaux & Gulcehre, arXiv 2410.21035).

The student starts as a copy of the teacher. In each round it learns to predict in one denoising step what the
teacher writes in two half steps, so that it samples with half the teacher's passes; the next round's teacher is
that student: 32 -> 16 -> 8 passes in three rounds.

    python -m lab.distill --teacher pretrained/mdlm-shakespeare-char --data tinyshakespeare.txt \\
        --train-extra runs/corpus/all_plays.txt --out-dir runs/student --rounds 2 --steps 2000 --device cuda

A step: clean windows x0, a time t in [1/N, 1] for a student of N passes, x_t with each character masked with
probability t. The teacher takes two ancestral half steps, t -> t - 1/(2N) -> t - 1/N: each masked character is
revealed in a half step with the schedule's probability, drawn from the teacher's distribution at the canvas as it
is. The student, reading x_t, is trained on the characters those two steps revealed: its distribution against the
teacher's there (the teacher's second-step distribution, which knows the first step's draws, for the characters
revealed second), a KL divergence. The exports are `save_pretrained` folders with the teacher's words.txt and
demo.json beside the weights; the sampler runs one with `num_steps=N`.
"""

from __future__ import annotations

import argparse
import copy
import math
import shutil
import sys
import time
from pathlib import Path

import torch

from mdlm_hf import MDLM
from mdlm_hf.devices import DEVICE_HELP, choose_device, device_problem
from mdlm_hf.objectives import DIFFUSION, objective_of
from training.corpus import read_texts, split_text

TEACHER_PASSES = 32  # the shipped sampler's steps: the first round's teacher writes 256 characters in these
COPIED = ("words.txt", "casts.json", "demo.json")  # what the export takes from the teacher's folder, where it has them


def half_steps(
    teacher: MDLM, noisy: torch.Tensor, t: torch.Tensor, passes: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """The teacher's two ancestral half steps from `noisy` (B, T) at times `t` (B,): the characters each reveals
    (B, T) bool, and the teacher's distribution where it revealed them (B, T, V)."""
    mask_id, step = teacher.mask_id, 1.0 / (2 * passes)
    revealed = torch.zeros_like(noisy, dtype=torch.bool)
    target = torch.zeros(*noisy.shape, teacher.vocab_size, device=noisy.device)
    canvas, now = noisy.clone(), t.clone()
    for _ in range(2):
        masked = canvas == mask_id
        probs = teacher(canvas).float().softmax(dim=-1)  # (B, T, V)
        after = (now - step).clamp(min=0)
        chance = ((now - after) / now.clamp(min=1e-6))[:, None]  # (B, 1): reveal probability this half step
        reveal = masked & (torch.rand(canvas.shape, generator=generator, device=canvas.device) < chance)
        drawn = torch.multinomial(probs.view(-1, probs.size(-1)), 1, generator=generator).view(canvas.shape)
        target = torch.where(reveal[..., None], probs, target)
        canvas = torch.where(reveal, drawn, canvas)
        revealed |= reveal
        now = after
    return revealed, target


def distill_loss(
    student: MDLM, teacher: MDLM, x0: torch.Tensor, passes: int, generator: torch.Generator
) -> torch.Tensor:
    """KL(teacher's two half steps || student's one step) over the characters the half steps revealed."""
    B = x0.size(0)
    t = 1.0 / passes + (1 - 1.0 / passes) * torch.rand(B, generator=generator, device=x0.device)  # (B,)
    is_masked = torch.rand(x0.shape, generator=generator, device=x0.device) < t[:, None]
    noisy = torch.where(is_masked, student.mask_id, x0)
    with torch.no_grad():
        revealed, target = half_steps(teacher, noisy, t, passes, generator)
    log_student = student(noisy).float().log_softmax(dim=-1)  # (B, T, V)
    # 0 log 0 = 0: [MASK] (-inf for both) and the characters the teacher gives no chance
    terms = torch.where(target > 0, target * (target.clamp(min=1e-30).log() - log_student), 0.0)
    kl = terms.sum(dim=-1)  # (B, T)
    return (kl * revealed).sum() / revealed.sum().clamp(min=1)


def train_round(
    student: MDLM,
    teacher: MDLM,
    tokens: torch.Tensor,
    passes: int,
    args: argparse.Namespace,
    generator: torch.Generator,
    deadline: float = float("inf"),
) -> list[float]:
    """One round: `args.steps` AdamW steps of the student against the teacher, or fewer where time.perf_counter()
    passes `deadline`; the losses."""
    optimizer = torch.optim.AdamW(student.parameters(), lr=args.lr, weight_decay=0.0)
    student.train()
    teacher.eval()
    losses, L = [], student.block_size
    for step in range(args.steps):
        if step and time.perf_counter() > deadline:
            print(f"{passes} passes: stopping at step {step} (--max-minutes)", flush=True)
            break
        starts = torch.randint(0, tokens.numel() - L, (args.batch_size,), generator=generator, device=tokens.device)
        x0 = torch.stack([tokens[s : s + L] for s in starts.tolist()]).to(tokens.device)
        loss = distill_loss(student, teacher, x0, passes, generator)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"the distillation loss became {loss.item()} at step {step + 1}: lower --lr")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if (step + 1) % max(args.steps // 10, 1) == 0:
            print(f"{passes} passes: step {step + 1}/{args.steps}, KL {sum(losses[-10:]) / len(losses[-10:]):.4f}")
    return losses


def export(student: MDLM, teacher_dir: Path, out: Path) -> None:
    """The student as a folder `from_pretrained` loads, with the teacher's words.txt and demo.json."""
    student.eval().cpu().save_pretrained(out)
    for name in COPIED:
        if (teacher_dir / name).is_file():
            shutil.copyfile(teacher_dir / name, out / name)


def main(argv: list[str] | None = None) -> dict:
    """Parses the flags, distils round by round and exports each round's student; returns each round's facts."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--teacher", required=True, help="the diffusion model's folder (its words.txt goes along)")
    parser.add_argument("--data", required=True, nargs="+", help="the text (its training split is read)")
    parser.add_argument("--train-extra", nargs="*", default=[], help="more text for the windows")
    parser.add_argument("--out-dir", required=True, help="each round's student: OUT/student-N (N passes)")
    parser.add_argument("--rounds", type=int, default=2, help="32 -> 16 is one; 2: 8 passes")
    parser.add_argument("--steps", type=int, default=2000, help="steps of each round")
    parser.add_argument("--max-minutes", type=float, default=None, help="the rounds share this time, finished or not")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help=DEVICE_HELP)
    args = parser.parse_args(argv)
    if not 1 <= args.rounds <= 4 or args.steps < 1 or args.batch_size < 1 or not args.lr > 0:
        parser.error("--rounds must be 1 to 4, --steps and --batch-size >= 1, --lr > 0")
    if args.max_minutes is not None and not args.max_minutes > 0:
        parser.error(f"--max-minutes must be above 0, not {args.max_minutes}")
    if problem := device_problem(args.device):
        parser.error(problem)
    device = choose_device(args.device)
    teacher_dir = Path(args.teacher)
    teacher = MDLM.from_pretrained(teacher_dir, fast=False).to(device)
    if objective_of(teacher) is not DIFFUSION:
        parser.error("--teacher must be a diffusion model: an autoregressive twin writes a character a pass")
    train_text = split_text(read_texts(args.data))[0] + "".join("\n" + read_texts([p]) for p in args.train_extra)
    tokens = torch.tensor(teacher.tokenizer.encode(train_text), device=device)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    facts, started = {}, time.perf_counter()
    student = teacher
    for round_ in range(1, args.rounds + 1):
        passes = TEACHER_PASSES >> round_
        teacher, student = student.eval(), copy.deepcopy(student).train()
        teacher.requires_grad_(False)
        student.requires_grad_(True)
        share = (args.max_minutes or math.inf) * 60 / args.rounds  # each round its share of the time
        losses = train_round(student, teacher, tokens, passes, args, generator, time.perf_counter() + share)
        out = Path(args.out_dir) / f"student-{passes}"
        export(student, teacher_dir, out)
        student.to(device)
        facts[passes] = {"first_kl": losses[0], "last_kl": sum(losses[-10:]) / len(losses[-10:]), "export": str(out)}
        print(f"round {round_}: a {passes}-pass student in {out} ({time.perf_counter() - started:.0f} s)", flush=True)
    return facts


if __name__ == "__main__":
    try:
        main()
    except (ValueError, OSError, FloatingPointError) as error:
        sys.exit(f"error: {error}")
