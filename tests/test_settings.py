"""Settings come from flags > M3AGENT_* env > m3agent.toml > defaults, and errors are clear."""

from __future__ import annotations

from pathlib import Path

import pytest

from m3agent.errors import ConfigError
from m3agent.settings import load_settings


def test_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert str(settings.memory) == "m3agent.db" and settings.memory.path == tmp_path.resolve() / "m3agent.db"
    assert settings.media.clip_seconds == 30.0
    assert settings.embedder == "minilm"


def test_precedence_flag_over_env_over_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m3agent.toml").write_text('memory = "file.db"\nembedder = "hash"\n[media]\nclip_seconds = 10\n')
    assert str(load_settings().memory) == "file.db"
    assert load_settings().media.clip_seconds == 10
    monkeypatch.setenv("M3AGENT_MEMORY", "env.db")
    monkeypatch.setenv("M3AGENT_MEDIA__CLIP_SECONDS", "12")
    settings = load_settings()
    assert (str(settings.memory), settings.media.clip_seconds, settings.embedder) == ("env.db", 12, "hash")
    assert str(load_settings(memory="flag.db").memory) == "flag.db"
    assert str(load_settings(memory=None).memory) == "env.db"


def test_invalid_value_is_a_config_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("M3AGENT_MEDIA__CLIP_SECONDS", "-3")
    with pytest.raises(ConfigError, match="clip_seconds"):
        load_settings()


def test_unknown_key_in_file_is_rejected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m3agent.toml").write_text('memroy = "typo.db"\n')
    with pytest.raises(ConfigError, match="memroy"):
        load_settings()


def test_missing_explicit_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")


def test_broken_toml_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("memory = [unclosed\n")
    with pytest.raises(ConfigError):
        load_settings(bad)
