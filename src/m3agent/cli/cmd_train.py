"""``m3agent train control``: reinforcement learning of the agent loop's policy from a packaged model or a GGUF
file (expert iteration with llama.cpp rollouts and TRL SFT, or TRL GRPO; PEFT LoRA), then the merged GGUF and,
optionally, held-out F1 before / after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from m3agent.cli.common import build_settings, json_option
from m3agent.cli.output import console, print_json


@click.group()
def train() -> None:
    """Train m3agent's own models from its memories."""


@train.command()
@click.option("--name", default=None,
              help="the run and the trained model (resumes the run of that name); default control-<base>-<method>")
@click.option("--method", type=click.Choice(["expert", "grpo"]), default=None,
              help="expert: expert iteration, rollouts sampled by llama.cpp (the CPU default); grpo: TRL GRPO, "
                   "rollouts in transformers (for a GPU); default train.method")
@click.option("--iterations", type=int, default=None,
              help="expert: iterations in all (a resumed run continues to it)")
@click.option("--samples", type=int, default=None, help="expert: rollouts sampled per question and iteration (K)")
@click.option("--steps", type=int, default=None, help="grpo: optimizer steps in all (a resumed run continues to it)")
@click.option("--base", default=None,
              help="model to start from: packaged (qwen-0.5b, qwen-1.5b, smollm2) or a .gguf file; default train.base")
@click.option("--group", type=int, default=None, help="grpo: rollouts per question (GRPO group)")
@click.option("--questions-per-step", type=int, default=None, help="grpo: questions per step")
@click.option("--max-questions", type=int, default=None, help="training questions drawn (default: all)")
@click.option("--rounds", type=int, default=None, help="most model turns of a rollout")
@click.option("--max-new-tokens", type=int, default=None, help="most tokens of one reply")
@click.option("--held-out", default=None, help="comma-separated LoCoMo conversations never trained on")
@click.option("--data", type=click.Path(path_type=Path, exists=True, dir_okay=False), default=None,
              help="LoCoMo JSON (default: shared/data/locomo/locomo10.json)")  # fmt: skip
@click.option("--export/--no-export", default=True, show_default=True,
              help="write the merged GGUF and its card (always with --eval-questions)")
@click.option("--eval-questions", type=int, default=0, show_default=True,
              help="held-out questions answered before and after (agent loop, llama.cpp): F1, intervals")
@json_option
@click.pass_context
def control(ctx: click.Context, name: str | None, method: str | None, iterations: int | None, samples: int | None,
            steps: int | None, base: str | None, group: int | None, questions_per_step: int | None,
            max_questions: int | None, rounds: int | None, max_new_tokens: int | None, held_out: str | None,
            data: Path | None, export: bool, eval_questions: int, as_json: bool) -> None:  # fmt: skip
    """Train the agent loop's policy on LoCoMo (split by conversation) by expert iteration or GRPO; resumable."""
    from m3agent.settings import TrainSettings
    from m3agent.train import session as service
    from m3agent.train.catalogue import checked_name, default_run_name
    from m3agent.train.model import require_train_extra, resolve_base

    require_train_extra()
    settings = build_settings(ctx)
    overrides: dict[str, Any] = {
        "method": method, "iterations": iterations, "samples": samples, "steps": steps, "base": base,
        "group": group, "questions_per_step": questions_per_step,
        "max_questions": max_questions, "rounds": rounds, "max_new_tokens": max_new_tokens,
        "held_out": held_out.split(",") if held_out else None,
    }  # fmt: skip
    chosen = {k: v for k, v in overrides.items() if v is not None}
    settings = settings.model_copy(update={"train": TrainSettings.model_validate(
        {**settings.train.model_dump(), **chosen})})  # fmt: skip
    chosen_base = resolve_base(settings, settings.train.base)  # a missing or wrong file fails before the data
    name = checked_name(name or default_run_name(chosen_base.short_name, settings.train.method))
    the_plan = service.plan(settings, data=data, max_held_out=eval_questions or None)
    result = service.train(the_plan, name, show_progress=not as_json)
    report: dict[str, Any] = {"run": str(result.run_dir), "method": settings.train.method, "steps": result.steps,
                              "seconds": round(result.seconds, 1),
                              "curve": str(result.curve) if result.curve else None}  # fmt: skip
    if export or eval_questions:
        report["model"] = str(service.export(settings, name))
    if eval_questions:
        report["scores"] = service.before_after(the_plan, name)
        service.add_scores(settings, name, report["scores"])
    if as_json:
        print_json(report)
        return
    for key, value in report.items():
        console().print(f"{key}: {value}")
    if "model" in report:
        console().print(f"[green]ready[/]: --llm llamacpp:{report['model']} --mode agent")


COMMANDS = [train]
