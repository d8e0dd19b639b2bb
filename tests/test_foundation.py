"""The shared foundation: secrets stay hidden, approvals are single-use and bound, key resolution order."""

from __future__ import annotations

from pathlib import Path

import pytest

from vastui.approval import Action, Approval, ApprovalRequest, require
from vastui.config import Redactor, Secret, load_settings, resolve_api_key, resolve_url
from vastui.errors import ApprovalRequired, ConfigError, ManifestError, QueryError


def test_secret_never_shows_itself() -> None:
    secret = Secret("sk-very-secret-123")
    assert "sk-very" not in repr(secret)
    assert "sk-very" not in str(secret)
    assert "sk-very" not in f"{secret} {secret!r} {[secret]}"
    assert secret.reveal() == "sk-very-secret-123"


def test_redactor_replaces_known_secrets_and_bearer_tokens() -> None:
    redact = Redactor([Secret("abcd1234efgh")])
    text = redact("key=abcd1234efgh and Authorization: Bearer zzzzzzzzzzzzzz")
    assert "abcd1234efgh" not in text
    assert "zzzzzzzzzzzzzz" not in text


def test_key_resolution_order(tmp_path: Path) -> None:
    home = tmp_path / "h"
    key_file = home / ".config" / "vastai" / "vast_api_key"
    key_file.parent.mkdir(parents=True)
    key_file.write_text("from-file\n")
    assert resolve_api_key(explicit="flag", env={"VAST_API_KEY": "env"}, home=home).key == Secret("flag")
    assert resolve_api_key(explicit=None, env={"VAST_API_KEY": "env"}, home=home).key == Secret("env")
    resolved = resolve_api_key(explicit=None, env={}, home=home)
    assert resolved.key == Secret("from-file")
    assert resolved.source == str(key_file)
    assert resolve_api_key(explicit=None, env={}, home=tmp_path / "empty").key is None


def test_url_resolution_strips_trailing_slash_and_rejects_garbage() -> None:
    assert resolve_url(explicit="http://127.0.0.1:9/", env={}) == "http://127.0.0.1:9"
    assert resolve_url(explicit=None, env={"VAST_URL": "http://x:1"}) == "http://x:1"
    with pytest.raises(ConfigError):
        resolve_url(explicit="ftp://nope", env={})


def test_settings_flag_beats_environment(tmp_path: Path) -> None:
    settings = load_settings(url="http://flag:1", env={"VAST_URL": "http://env:2"}, home=tmp_path)
    assert settings.url == "http://flag:1"
    assert load_settings(env={"VAST_URL": "http://env:2"}, home=tmp_path).url == "http://env:2"


def _approval(action: Action, target: str) -> Approval:
    return Approval(ApprovalRequest(action=action, target=target, summary="test"), granted_by="test", granted_at=0.0)


def test_approval_is_single_use_and_bound_to_action_and_target() -> None:
    approval = _approval(Action.DESTROY_INSTANCE, "instance:1")
    with pytest.raises(ApprovalRequired):
        require(approval, action=Action.DESTROY_INSTANCE, target="instance:2")
    with pytest.raises(ApprovalRequired):
        require(approval, action=Action.STOP_INSTANCE, target="instance:1")
    require(approval, action=Action.DESTROY_INSTANCE, target="instance:1")
    with pytest.raises(ApprovalRequired):
        require(approval, action=Action.DESTROY_INSTANCE, target="instance:1")
    with pytest.raises(ApprovalRequired):
        require(None, action=Action.DESTROY_INSTANCE, target="instance:1")


def test_errors_say_where() -> None:
    err = QueryError("unknown operator '=>'", query="num_gpus=>2", column=9)
    assert "column 9" in str(err)
    merr = ManifestError("must be positive", path="w.toml", line=12, field="budget.max_usd")
    assert str(merr).startswith("w.toml:12: budget.max_usd")


def test_the_store_is_a_file_or_a_postgres_url_and_the_operator_has_a_name(tmp_path: Path) -> None:
    env = {"VASTUI_CONFIG_DIR": str(tmp_path / "cfg"), "VASTUI_DATA_DIR": str(tmp_path / "data"), "USER": "ana"}
    plain = load_settings(env=env, home=tmp_path)
    assert plain.db_url is None and plain.db == tmp_path / "data" / "vastui.sqlite3" == plain.db_path
    assert plain.operator.startswith("ana@")   # the login name and the machine's, until the config says
    team = load_settings(db_path="postgresql://ana:s3cret-pw@db.example:5432/team", env=env, home=tmp_path)
    assert team.db == team.db_url == "postgresql://ana:s3cret-pw@db.example:5432/team"
    assert team.db_shown == "postgresql://ana@db.example:5432/team"
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.toml").write_text('db_url = "postgres://db.example/team"\noperator = "ana (ops)"\n',
                                                  encoding="utf-8")
    configured = load_settings(env=env, home=tmp_path)
    assert configured.db_url == "postgres://db.example/team" and configured.operator == "ana (ops)"
    assert load_settings(env={**env, "VASTUI_OPERATOR": "bo"}, home=tmp_path).operator == "bo"
    with pytest.raises(ConfigError, match="a SQLite file or a postgresql:// URL, not 'mysql://u@db/team'"):
        load_settings(db_path="mysql://u:pw@db/team", env=env, home=tmp_path)
    with pytest.raises(ConfigError, match="operator must be a short printable name"):
        load_settings(env={**env, "VASTUI_OPERATOR": "x" * 80}, home=tmp_path)
