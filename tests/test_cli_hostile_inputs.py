"""Inputs a careless or hostile hand gives the CLI: a broken URL, a port past 65535, a non-UTF-8 config.toml, a
database under /proc or under a file, absurd time scales and ports, a manifest nested 100k deep. Each is one line
on stderr and a non-zero exit — never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vastui.cli import main
from vastui.config import load_settings, resolve_url
from vastui.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "resnet.toml"


def one_error_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.strip().splitlines() if not line.startswith(("usage:", " "))]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:99999", "http://127.0.0.1:-1", "http://:80",
                                 "http://host:port"])
def test_a_broken_url_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_url(explicit=url, env={})
    assert url in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:99999"])
def test_the_cli_says_a_broken_url_in_one_line(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["offers", "--url", url, "--api-key", "k" * 16]) == 1
    assert url in one_error_line(capsys.readouterr().err)


def test_good_urls_still_pass() -> None:
    assert resolve_url(explicit="http://[::1]:8765/", env={}) == "http://[::1]:8765"
    assert resolve_url(explicit="https://console.vast.ai", env={}) == "https://console.vast.ai"


@pytest.mark.parametrize("content", [b'url = "\xff\xfe"\n', b"\x00\x01\x02binary", b"theme = 'caf\xe9'\n"])
def test_a_non_utf8_config_toml_is_a_config_error(tmp_path: Path, content: bytes) -> None:
    config_dir = tmp_path / "cfg"
    config_dir.mkdir()
    (config_dir / "config.toml").write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        load_settings(env={"VASTUI_CONFIG_DIR": str(config_dir), "VASTUI_DATA_DIR": str(tmp_path)}, home=tmp_path)
    assert "config.toml" in str(caught.value) and "\n" not in str(caught.value)


def test_a_config_toml_nested_100k_deep_is_a_config_error(tmp_path: Path) -> None:
    config_dir = tmp_path / "cfg"
    config_dir.mkdir()
    (config_dir / "config.toml").write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(env={"VASTUI_CONFIG_DIR": str(config_dir), "VASTUI_DATA_DIR": str(tmp_path)}, home=tmp_path)
    assert "nested too deeply" in str(caught.value)


def _plan_argv(*extra: str) -> list[str]:
    # nothing listens on port 9: a command that got past its settings would fail there, with another message
    return ["campaign", "plan", str(EXAMPLE), "--url", "http://127.0.0.1:9", "--api-key", "k" * 16, *extra]


@pytest.mark.parametrize("command", ["plan", "leaks"])
@pytest.mark.parametrize("where", ["proc", "file"])
def test_a_database_under_proc_or_under_a_file_is_one_line(tmp_path: Path, command: str, where: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    db = "/proc/nope/x.sqlite3" if where == "proc" else str(blocker / "x.sqlite3")
    argv = (_plan_argv("--db", db) if command == "plan"
            else ["leaks", "--url", "http://127.0.0.1:9", "--api-key", "k" * 16, "--db", db])
    assert main(argv) == 1
    line = one_error_line(capsys.readouterr().err)
    assert db in line and "database" in line
    if where == "file":
        assert f"{blocker} is a file, not a folder" in line


def test_the_demo_with_a_data_dir_under_proc_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("VASTUI_DATA_DIR", "/proc/nope")
    assert main(["demo", "--headless", "--quiet"]) == 1
    assert "/proc/nope" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("command", ["plan", "leaks"])
def test_a_data_dir_under_proc_is_one_line(command: str, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("VASTUI_DATA_DIR", "/proc/nope")
    argv = _plan_argv() if command == "plan" else ["leaks", "--url", "http://127.0.0.1:9", "--api-key", "k" * 16]
    assert main(argv) == 1
    assert "/proc/nope" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("argv", [["sim"], ["demo"], ["campaign", "plan", str(EXAMPLE)]])
@pytest.mark.parametrize("scale", ["0", "-5", "nan", "inf", "-inf", "lots"])
def test_an_absurd_time_scale_is_refused_in_one_line(argv: list[str], scale: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main([*argv, f"--time-scale={scale}"])
    assert caught.value.code == 2
    line = one_error_line(capsys.readouterr().err)
    assert "--time-scale" in line and "positive" in line  # the value typed is not echoed (it may be a key)


@pytest.mark.parametrize("port", ["-1", "70000", "65536", "http"])
def test_a_sim_port_out_of_range_is_refused_in_one_line(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["sim", "--port", port])
    assert caught.value.code == 2
    line = one_error_line(capsys.readouterr().err)
    assert "--port" in line and "0 to 65535" in line


def test_a_manifest_nested_100k_deep_is_one_manifest_error(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deep.toml"
    path.write_text("[workload]\nname = " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert main(["manifest", "check", str(path)]) == 1
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"{path}") and "nested too deeply" in line


def test_the_console_script_gives_one_line_for_a_broken_url() -> None:
    env = {**os.environ, "VAST_API_KEY": "k" * 16}
    result = subprocess.run([sys.executable, "-m", "vastui", "instances", "--url", "http://[::1"],
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 1 and "http://[::1" in one_error_line(result.stderr)


@pytest.mark.parametrize(("line", "key"), [("db_path = 7", "db_path"), ("url = 8765", "url"),
                                            ("ssh_key = true", "ssh_key"), ("theme = ['dark']", "theme"),
                                            ("money_confirm_over_usd = 'lots'", "money_confirm_over_usd"),
                                            ("approval_expiry_min = 'soon'", "approval_expiry_min")])
def test_a_config_value_of_the_wrong_type_is_refused(tmp_path: Path, line: str, key: str) -> None:
    config_dir = tmp_path / "cfg"
    config_dir.mkdir()
    (config_dir / "config.toml").write_text(line + "\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(env={"VASTUI_CONFIG_DIR": str(config_dir), "VASTUI_DATA_DIR": str(tmp_path)}, home=tmp_path)
    assert key in str(caught.value) and "config.toml" in str(caught.value)
    assert not (Path.cwd() / "7").exists()


def test_config_values_of_the_right_type_still_load(tmp_path: Path) -> None:
    config_dir = tmp_path / "cfg"
    config_dir.mkdir()
    (config_dir / "config.toml").write_text(f"db_path = '{tmp_path}/x.db'\nmoney_confirm_over_usd = 5\n"
                                            "approval_expiry_min = 30\n")
    settings = load_settings(env={"VASTUI_CONFIG_DIR": str(config_dir), "VASTUI_DATA_DIR": str(tmp_path)},
                             home=tmp_path)
    assert settings.db_path == tmp_path / "x.db" and settings.money_confirm_over_usd == 5.0
    assert settings.approval_expiry_s == 30 * 60.0


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
def test_an_approval_expiry_that_is_not_a_positive_number_of_minutes_is_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match="approval_expiry_min"):
        load_settings(env={"VASTUI_CONFIG_DIR": str(tmp_path / "cfg"), "VASTUI_DATA_DIR": str(tmp_path),
                           "VASTUI_APPROVAL_EXPIRY_MIN": value}, home=tmp_path)
    default = load_settings(env={"VASTUI_CONFIG_DIR": str(tmp_path / "cfg"), "VASTUI_DATA_DIR": str(tmp_path)},
                            home=tmp_path)
    assert default.approval_expiry_s == 15 * 60.0
