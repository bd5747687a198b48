"""The control runtime is public and typed: one mode list, one source of defaults (import cycles: test_layers.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from m3agent.control import MODE_STEPS, MODES, AgentConfig, answer, config_for
from m3agent.domain import CONTROL_MODE_SETTINGS, CONTROL_MODES
from m3agent.errors import ConfigError
from m3agent.settings import ControlSettings, load_settings
from test_control_world import opened_world

BIN = Path(sys.executable).parent / "m3agent"

# -- one mode list, one dispatch table ---------------------------------------------------------------------------


def test_modes_are_listed_once_and_every_mode_has_steps() -> None:
    from m3agent.cli.cmd_ask import ask as ask_command

    assert MODES == CONTROL_MODES == ("agent", "baseline", "grounded", "select")
    assert ("auto", *CONTROL_MODES) == CONTROL_MODE_SETTINGS
    assert set(MODE_STEPS) == set(MODES)
    mode_option = next(p for p in ask_command.params if p.name == "mode")
    assert tuple(mode_option.type.choices) == CONTROL_MODE_SETTINGS  # type: ignore[attr-defined]
    for mode in CONTROL_MODE_SETTINGS:
        assert ControlSettings(mode=mode).mode == mode
    with pytest.raises(ValueError):
        ControlSettings(mode="fast")  # type: ignore[arg-type]


# -- settings are the single source of defaults --------------------------------------------------------------------


def test_agent_config_has_no_defaults_of_its_own() -> None:
    fields = dataclasses.fields(AgentConfig)
    assert {f.name for f in fields} == set(ControlSettings.model_fields)
    assert all(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING for f in fields)
    config = AgentConfig.from_settings()
    defaults = ControlSettings()
    assert config.mode == "agent"  # auto, with no LLM named
    assert all(
        getattr(config, name) == getattr(defaults, name) for name in ControlSettings.model_fields if name != "mode"
    )


def test_overrides_follow_the_settings_rules() -> None:
    config = AgentConfig.from_settings(ControlSettings(search_k=3), "none", rounds=2, clip_k=None)
    assert (config.mode, config.search_k, config.rounds, config.clip_k) == ("select", 3, 2, ControlSettings().clip_k)
    assert config.replace(mode="auto").mode == "select" and config.replace(mode="agent").mode == "agent"
    with pytest.raises(ConfigError, match="rounds"):
        config.replace(rounds=0)
    with pytest.raises(ConfigError, match=r"unknown control setting.*memory_k"):
        AgentConfig.from_settings(memory_k=8)


def _clean_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for key in [k for k in os.environ if k.startswith("M3AGENT_")]:
        monkeypatch.delenv(key)
    return dict(os.environ)


def _comparable(record: dict[str, Any]) -> dict[str, Any]:
    record = {k: v for k, v in record.items() if k != "latency_s"}
    record["searches"] = [{k: v for k, v in s.items() if k != "latency_s"} for s in record["searches"]]
    return record


def test_library_and_cli_answer_with_the_same_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with opened_world(tmp_path):
        pass
    (tmp_path / "m3agent.toml").write_text(
        'memory = "memory.db"\nembedder = "hash"\nllm = "none"\n\n[control]\nsearch_k = 3\nselect_k = 1\n',
        encoding="utf-8",
    )
    env = _clean_env(monkeypatch)
    monkeypatch.chdir(tmp_path)
    question = "Who buys bread at the bakery?"
    out = subprocess.run([str(BIN), "ask", "--json", question], capture_output=True, text=True, cwd=tmp_path,
                         env=env, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    settings = load_settings()
    assert config_for(settings) == AgentConfig.from_settings(settings.control, "none")
    from m3agent.store import open_store

    with open_store(settings.memory, readonly=True, create=False) as store:
        library = answer(question, store, settings).to_dict()
    cli = json.loads(out.stdout)
    assert _comparable(cli) == _comparable(library)
    assert library["mode"] == "select" and library["answered"]
    hits = [hit for clip in library["searches"][0]["clips"] for hit in clip["hits"]]
    assert len(hits) == 3  # search_k from the settings file, not a default of the library
