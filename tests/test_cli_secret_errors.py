"""The CLI's own error messages, as real processes: a wrong invocation never echoes the API key (argparse quotes what
it could not parse, which is often the key), a URL's password is never shown, and a URL that cannot be sent —
not UTF-8, a control character, no scheme, a bad port — is one ``vastui: ...`` line naming where it came from."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

KEY = "c0ffee5ecret" * 4
PASSWORD = "hunter2pw"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VAST", "COLUMNS"))}
    env.update(HOME=str(tmp_path), VASTUI_CONFIG_DIR=str(tmp_path / "cfg"), VASTUI_DATA_DIR=str(tmp_path / "data"),
               **extra)
    return env


def _run(argv: list[str | bytes], env: dict[str, str] | dict[bytes, bytes]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "vastui", *argv], capture_output=True, env=env, timeout=120,
                          stdin=subprocess.DEVNULL)


def _error_line(result: subprocess.CompletedProcess[bytes]) -> str:
    err = result.stderr.decode("utf-8", errors="replace")
    assert "Traceback" not in err, err
    lines = [line for line in err.strip().splitlines() if not line.startswith(("usage:", " "))]
    assert len(lines) == 1, err
    return lines[0]


WRONG_INVOCATIONS = [
    ["--api-key", KEY, "instances"],                      # the key where the command belongs
    ["--api-key", KEY],                                   # the key alone, no command
    [f"--api-key={KEY}", "instances"],
    ["instancs", "--api-key", KEY],                       # a misspelt command
    ["instances", "--api-key", KEY, "--bogus"],           # an unknown flag
    ["instances", "--api-key", KEY, KEY],                 # the key twice
    ["instances", f"--bogus={KEY}", "--api-key", "x" * 16],
    ["instances", "--json=" + KEY],                       # a value given to a flag that takes none
    ["offers", "--api-key", KEY, "--limit", KEY],         # wrong value types
    ["offers", "--type", KEY],
    ["offers", "--api", KEY, "--storage", KEY],           # an abbreviated --api-key
    ["ssh-run", KEY, "--api-key", KEY],
    ["campaign", KEY],                                    # a wrong subcommand
    ["manifest", KEY],
    ["sim", "--port", KEY],
    ["sim", "--time-scale", KEY],
    ["leaks", "--poll-interval", KEY],
    ["instances", "--api-key"],                           # --api-key at the end with no value
    ["--url", f"http://user:{PASSWORD}@127.0.0.1:9", "instances"],
]


@pytest.mark.parametrize("argv", WRONG_INVOCATIONS, ids=lambda argv: " ".join(a[:12] for a in argv))
def test_a_wrong_invocation_never_shows_the_key(tmp_path: Path, argv: list[str]) -> None:
    result = _run(list(argv), _env(tmp_path))
    shown = (result.stdout + result.stderr).decode("utf-8", errors="replace")
    assert result.returncode == 2, shown
    assert KEY not in shown and KEY[:12] not in shown and PASSWORD not in shown, shown
    _error_line(result)


def test_a_word_that_is_the_key_from_the_environment_is_not_shown(tmp_path: Path) -> None:
    result = _run(["instances", KEY], _env(tmp_path, VAST_API_KEY=KEY))
    assert result.returncode == 2
    assert KEY[:12].encode() not in result.stdout + result.stderr
    assert "unrecognized arguments: 1 value (not shown)" in _error_line(result)


@pytest.mark.parametrize("where", ["environment", "key file"])
def test_a_flag_shaped_word_that_is_the_known_key_is_not_named(tmp_path: Path, where: str) -> None:
    flaggy = "--sk" + "a1b2" * 6   # a key that looks like an option name would otherwise be named as one
    extra = {"VAST_API_KEY": flaggy} if where == "environment" else {}
    if where == "key file":
        key_file = tmp_path / ".config" / "vastai" / "vast_api_key"
        key_file.parent.mkdir(parents=True)
        key_file.write_text(flaggy + "\n")
        key_file.chmod(0o600)
    result = _run(["instances", flaggy, "--other"], _env(tmp_path, **extra))
    assert result.returncode == 2
    assert flaggy[2:].encode() not in result.stdout + result.stderr
    assert "unrecognized arguments: --other and 1 value (not shown)" in _error_line(result)


def test_the_key_before_the_command_gets_a_hint(tmp_path: Path) -> None:
    line = _error_line(_run(["--api-key", KEY, "instances"], _env(tmp_path)))
    assert "invalid command" in line and "go after the command" in line


def test_an_unknown_flag_is_still_named(tmp_path: Path) -> None:
    line = _error_line(_run(["instances", "--bogus=1", "extra"], _env(tmp_path)))
    assert line.endswith("unrecognized arguments: --bogus and 1 value (not shown) (see --help)"), line


BAD_URLS: list[tuple[str, list[str | bytes], dict[str, str] | None, str, str]] = [
    # (id, extra argv, extra environment, the source the message names, what it says)
    ("argv-not-utf8", ["--url", b"http://h\xff/"], None, "--url", "not UTF-8"),
    ("argv-control", ["--url", "http://h\x01x/"], None, "--url", "control character"),
    ("argv-no-scheme", ["--url", "127.0.0.1:8765"], None, "--url", "http:// or https://"),
    ("argv-bad-port", ["--url", "http://127.0.0.1:99999"], None, "--url", "Port out of range"),
    ("argv-space", ["--url", "http://a b/"], None, "--url", "a space"),
    ("argv-non-ascii-host", ["--url", "http://bücher.example/"], None, "--url", "xn--"),
    ("env-bad-port", [], {"VAST_URL": "http://h:port"}, "VAST_URL", "not a usable URL"),
    ("env-password", [], {"VAST_URL": f"http://u:{PASSWORD}@h:99999/"}, "VAST_URL", "<redacted>"),
]


@pytest.mark.parametrize(("argv", "env_extra", "source", "says"), [case[1:] for case in BAD_URLS],
                         ids=[case[0] for case in BAD_URLS])
def test_a_bad_url_is_one_line_naming_its_source(tmp_path: Path, argv: list[str | bytes],
                                                 env_extra: dict[str, str] | None, source: str, says: str) -> None:
    result = _run(["instances", "--api-key", KEY, *argv], _env(tmp_path, **(env_extra or {})))
    line = _error_line(result)
    assert result.returncode == 1
    assert line.startswith("vastui: ") and f"from {source}" in line and says in line, line
    assert PASSWORD not in line


def test_a_non_utf8_vast_url_in_the_environment_is_one_line(tmp_path: Path) -> None:
    env = {os.fsencode(k): os.fsencode(v) for k, v in _env(tmp_path).items()}
    env[b"VAST_URL"] = b"http://h\xff\xfe/"
    result = _run(["instances", "--api-key", KEY], env)
    line = _error_line(result)
    assert result.returncode == 1 and "from VAST_URL" in line and "not UTF-8" in line, line


def test_a_url_with_a_nul_in_config_toml_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.toml").write_text('url = "http://h\\u0000x/"\n')
    result = _run(["instances", "--api-key", KEY], _env(tmp_path))
    line = _error_line(result)
    assert result.returncode == 1 and "config.toml (url)" in line and "control character" in line, line


async def test_a_clients_repr_and_the_redactor_hide_a_url_password() -> None:
    from vastui.clock import WallClock
    from vastui.config import Redactor, Secret
    from vastui.vast.client import HttpVastClient

    url = f"http://operator:{PASSWORD}@127.0.0.1:9"
    async with HttpVastClient(base_url=url, api_key=Secret(KEY), clock=WallClock()) as client:
        assert PASSWORD not in repr(client) and "127.0.0.1:9" in repr(client)
        assert PASSWORD not in repr(client._wire)
    said = Redactor()(f"GET {url}/api/v0/users/current failed; also https://u:{PASSWORD}@h/x")
    assert PASSWORD not in said and said.count("<redacted>@") == 2


def test_plain_parse_args_on_the_parser_shows_no_value_either(capsys: pytest.CaptureFixture[str]) -> None:
    from vastui.cli import build_parser

    with pytest.raises(SystemExit) as caught:
        build_parser(["instances"]).parse_args(["instances", KEY])  # not parse_safely: argparse's own path
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert KEY not in err and "unrecognized arguments (not shown" in err
