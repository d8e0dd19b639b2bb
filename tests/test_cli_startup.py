"""A quick CLI: commands import only what they use. Checked by what a fresh interpreter has loaded, never by time."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from vastui.cli import LAZY_COMMANDS, build_parser

HEAVY = ("asyncssh", "aiosqlite", "vastui.cli.campaign", "vastui.campaign.plan", "vastui.bench.receipt",
         "vastui.remote.runner", "vastui.sim", "textual")
EXTRAS = ("starlette", "uvicorn", "pynvml")  # the [sim] and [nvml] extras: vastui runs without them


def _loaded_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("argv", [["--help"], ["offers", "--help"], ["instances", "--help"], ["sim", "--help"]])
def test_help_and_the_market_commands_load_nothing_heavy(argv: list[str]) -> None:
    loaded = _loaded_after(f"from vastui.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass")
    assert not [name for name in (*HEAVY, *EXTRAS, "asyncio", "httpx", "rich") if name in loaded]


def _without_extras(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter where importing starlette, uvicorn or pynvml fails, as without the extras."""
    blocked = "".join(f"sys.modules[{name!r}] = None\n" for name in EXTRAS)
    return subprocess.run([sys.executable, "-c", f"import sys\n{blocked}{code}"], capture_output=True, text=True,
                          timeout=120)


def test_vastui_imports_and_helps_without_the_extras() -> None:
    result = _without_extras("import vastui.cli, vastui.campaign.handle, vastui.remote.runner\n"
                             "from vastui.cli import main\nmain(['--help'])")
    assert result.returncode == 0, result.stderr
    assert "usage: vastui" in result.stdout


@pytest.mark.parametrize("argv", [["sim", "--port", "0"], ["demo", "--headless"]])
def test_the_simulator_commands_name_the_extra_they_need(argv: list[str]) -> None:
    result = _without_extras(f"from vastui.cli import main\nsys.exit(main({argv!r}))")
    assert result.returncode == 1
    assert result.stderr.startswith("vastui: Missing extra:"), result.stderr
    assert "pip install 'vastui[sim]'" in result.stderr


def test_offers_loads_the_client_and_not_the_campaign_machinery() -> None:
    code = ("from vastui.cli import build_parser\nbuild_parser(['offers'])\n"
            "import vastui.vast.client, vastui.vast.query, vastui.cli.terminal")
    loaded = _loaded_after(code)
    assert "httpx" in loaded
    assert not [name for name in HEAVY if name in loaded]


def test_a_market_command_does_not_load_httpx_s_own_command_line() -> None:
    """``vastui instances`` against a closed port: it imports the client, fails to connect, and loads no click."""
    code = ("from vastui.cli import main\n"
            "main(['instances', '--json', '--url', 'http://127.0.0.1:9', '--api-key', 'k-0123456789'])")
    loaded = _loaded_after(code)
    assert "httpx" in loaded and "vastui.vast.client" in loaded
    assert "click" not in loaded and "pygments" not in loaded


def _choices(parser: argparse.ArgumentParser) -> dict[str, str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {action.dest: action.help or "" for action in sub._choices_actions}


def test_lazy_commands_show_the_same_help_line_as_their_real_registration() -> None:
    full, light = _choices(build_parser()), _choices(build_parser(["offers"]))
    assert set(LAZY_COMMANDS) <= set(full)
    assert light == full


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
def test_a_lazy_command_named_in_argv_gets_its_real_arguments(name: str) -> None:
    parser = build_parser([name, "--help"])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    real = sub.choices[name]
    assert [a for a in real._actions if not isinstance(a, argparse._HelpAction)], name
