"""Control policy training: a GRPO run on LoCoMo (split by conversation), then held-out F1 before / after.

Trains (or resumes) run ``--name`` with ``m3agent train control``'s own functions, exports the merged GGUF,
answers ``--eval-questions`` held-out questions with the base and the trained model in the agent loop
through llama.cpp (the product's path), and writes the "Control policy training" section of
docs/benchmarks.md: machine, load, commit, command, steps, time per step, the curve (copied to
docs/train_control_curve.png) and F1 before / after with bootstrap intervals. ``--eval-questions 0`` skips the
evaluation and reports the measured cost per step and the projected time of a longer run.

    .venv/bin/python bench/train_control.py --steps 20 --eval-questions 30
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SECTION = "Control policy training"
CURVE = REPO / "docs" / "train_control_curve.png"
PROJECTED_STEPS = (200, 1000)
"""Run lengths to project from the measured cost per step (GRPO papers train for hundreds of steps)."""


def main(argv: list[str] | None = None) -> int:
    from m3agent.bench.environment import environment
    from m3agent.settings import TrainSettings, load_settings
    from m3agent.train import service
    from m3agent.train.curve import read_steps

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="control-qwen-0.5b-grpo")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--group", type=int, default=None)
    parser.add_argument("--questions-per-step", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--max-new-tokens", type=int, default=None)
    parser.add_argument("--eval-questions", type=int, default=0, help="held-out questions before / after")
    parser.add_argument("--no-train", action="store_true", help="report the run as it stands (no new steps)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    load = round(os.getloadavg()[0], 2)
    settings = load_settings(shared_dir=SHARED)
    chosen = {k: v for k, v in {"steps": args.steps, "group": args.group, "rounds": args.rounds,
                                "questions_per_step": args.questions_per_step,
                                "max_new_tokens": args.max_new_tokens}.items() if v is not None}  # fmt: skip
    settings = settings.model_copy(update={"train": TrainSettings.model_validate(
        {**settings.train.model_dump(), **chosen})})  # fmt: skip
    the_plan = service.plan(settings, max_held_out=args.eval_questions or None)
    if not args.no_train:
        service.train(the_plan, args.name)
    run = service.run_dir(settings.resolved_cache_dir(), args.name)
    steps = read_steps(run)
    report: dict[str, Any] = {"run": str(run), "steps": len(steps), "cost": cost(steps, settings.train.threads)}
    if args.eval_questions:
        service.export(settings, args.name)
        report["scores"] = service.before_after(the_plan, args.name)
        service.add_scores(settings, args.name, report["scores"])
    print(json.dumps(report, indent=2), flush=True)
    if not args.no_write:
        if (run / "curve.png").is_file():
            shutil.copyfile(run / "curve.png", CURVE)
        command = "python bench/train_control.py " + " ".join(sys.argv[1:] if argv is None else argv)
        write_section(report, steps, settings, environment(embedder=settings.embedder), load, command)
    return 0


def cost(steps: list[dict[str, Any]], threads: int) -> dict[str, float]:
    """Seconds per step: wall (on the shared machine) and the idle estimate (CPU seconds / threads), with the
    share of rollouts and the projected hours of longer runs at the idle estimate."""
    if not steps:
        return {}

    def per_step(key: str) -> float:
        gaps = [b[key] - a[key] for a, b in pairwise(steps) if b[key] > a[key]]
        gaps = gaps or [steps[0][key]]
        return sum(gaps) / len(gaps)

    idle = per_step("cpu_s") / threads
    return {"s_per_step": round(per_step("elapsed_s"), 1), "idle_s_per_step": round(idle, 1),
            "rollout_s_per_step": round(sum(s["rollout_s"] for s in steps) / len(steps), 1),
            "idle_rollout_s_per_step": round(sum(s["rollout_cpu_s"] for s in steps) / len(steps) / threads, 1),
            **{f"projected_h_{n}_steps": round(n * idle / 3600, 1) for n in PROJECTED_STEPS}}  # fmt: skip


def write_section(report: dict[str, Any], steps: list[dict[str, Any]], settings: Any, env: dict[str, Any],
                  load: float, command: str) -> None:  # fmt: skip
    from m3agent.bench.results_io import replace_section, run_line

    train = settings.train
    c = report["cost"]
    lines = [run_line(env, command, load), "",
             f"GRPO (TRL, loss `{train.loss}`, beta {train.beta}, clip-higher {train.epsilon_high}) with LoRA "
             f"r={train.lora_r} on the packaged `{train.base}` (dequantised from its GGUF), on the CPU. Each step: "
             f"{train.questions_per_step} training questions x a group of {train.group} rollouts of the agent loop "
             f"(up to {train.rounds} rounds, {train.max_new_tokens} tokens a reply, temperature "
             f"{train.temperature}) over the real LoCoMo store. Held out (never trained on): "
             f"{', '.join(train.held_out)}. Reward: m3agent/train/reward.py.", "",
             f"- steps recorded: {len(steps)}; a step took {c.get('s_per_step', 'n/a')} s wall on the shared machine "
             f"(rollouts {c.get('rollout_s_per_step', 'n/a')} s); idle 2-core estimate (CPU seconds / "
             f"{train.threads} threads): {c.get('idle_s_per_step', 'n/a')} s a step, rollouts "
             f"{c.get('idle_rollout_s_per_step', 'n/a')} s",
             f"- projected at the idle estimate: {c.get('projected_h_200_steps', 'n/a')} h for 200 steps, "
             f"{c.get('projected_h_1000_steps', 'n/a')} h for 1000 steps",
             "", "![reward and F1 per step](train_control_curve.png)", "",
             "| step | reward | answer F1 | evidence F1 | format errors / rollout | s (elapsed) |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    lines += [f"| {s['step']} | {s['reward']:.3f} | {s['f1']:.3f} | {s['evidence_f1']:.3f} | "
              f"{s['format_errors']:.2f} | {s['elapsed_s']:.0f} |" for s in steps]  # fmt: skip
    scores = report.get("scores")
    if scores:
        before, after, diff = scores["before"], scores["after"], scores["difference"]
        lines += ["", f"Held-out F1, agent loop through llama.cpp ({scores['questions']} questions of "
                  f"{', '.join(scores['conversations'])}, {scores['rounds']} rounds; 95 % bootstrap over questions):",
                  "", "| model | F1 | 95 % CI |", "|---|---|---|",
                  f"| before (`{scores['models']['before']}`) | {before['mean']:.3f} | {before['ci95']} |",
                  f"| after (trained) | {after['mean']:.3f} | {after['ci95']} |",
                  f"| after - before (paired) | {diff['mean']:+.3f} | {diff['ci95']} |"]  # fmt: skip
    replace_section(REPO / "docs" / "benchmarks.md", SECTION, "\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
