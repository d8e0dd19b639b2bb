"""The shell: `:` and keys switch views, `?` lists the live keys of the view, themes switch, the palette knows
the views, the dialog is an Approver whose approvals are bound, and credit transfer goes through it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widgets import Input, Static

from tests.tui.console_support import confirm_dialog, dialog, sim_console, wait_for, with_settings
from vastui.approval import Action, ApprovalRequest, instance_target
from vastui.cli import main
from vastui.config import load_settings
from vastui.errors import ApprovalRequired, ConfigError
from vastui.events import Notice
from vastui.tui.dialogs.help import HelpScreen
from vastui.tui.dialogs.prompt import PromptScreen
from vastui.tui.themes import check_theme, theme_names
from vastui.tui.widgets.statusbar import StatusBar


@pytest.mark.slow
async def test_views_help_command_bar_and_themes(tmp_path: Path) -> None:
    async with sim_console(tmp_path, settings=with_settings(live=False)) as sim:
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            assert app.current_view == "offers"
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            keys = dict(app.screen.keys)
            assert keys["r"] == "Rent marked" and keys["/"] == "Filter" and "d" not in keys
            await pilot.press("escape")
            await pilot.press("2", "question_mark")
            assert isinstance(app.screen, HelpScreen) and dict(app.screen.keys)["d"] == "Destroy"
            assert "r" not in dict(app.screen.keys)
            await pilot.press("escape")

            await pilot.press("colon", *"account", "enter")
            assert app.current_view == "account"
            await pilot.press("colon", *"nope", "enter")
            assert app.current_view == "account"
            await pilot.press("colon", "escape")
            assert not app.query_one("#command-bar", Input).has_class("-open")

            app.services.bus.publish(Notice(at=0.0, campaign_id=None, level="warning", text="leak check slow"))
            await wait_for(pilot, lambda: any(n.message == "leak check slow" for n in app._notifications),
                           what="the bus notice as a notification")

            names = {c.title for c in app.get_system_commands(app.screen_stack[-1])}
            assert {"View: Offers", "View: Leaks", "Theme: light", "Theme: dark"} <= names
            assert "Theme" not in names   # Textual's own picker: its themes are not this console's
            bar = app.query_one(StatusBar)
            dark_bg = bar.styles.background
            app.apply_theme("light")
            await pilot.pause()
            assert app.has_class("theme-light") and not app.has_class("theme-dark")
            assert bar.styles.background != dark_bg


def test_themes_exist_and_a_bad_theme_is_refused_before_anything_opens() -> None:
    assert {"dark", "light"} <= set(theme_names())
    with pytest.raises(ConfigError, match="light"):
        check_theme("solarized")
    with pytest.raises(SystemExit) as refused:  # refused by argparse, before anything opens
        main(["console", "--theme", "solarized", "--url", "http://127.0.0.1:9", "--api-key", "k" * 12])
    assert refused.value.code == 2


def test_theme_and_money_threshold_come_from_the_environment_or_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "config.toml").write_text('theme = "light"\nmoney_confirm_over_usd = 50\n', encoding="utf-8")
    env = {"VASTUI_CONFIG_DIR": str(config), "VASTUI_DATA_DIR": str(tmp_path / "data")}
    from_file = load_settings(env=env, home=tmp_path)
    assert from_file.theme == "light" and from_file.money_confirm_over_usd == 50.0
    from_env = load_settings(env={**env, "VASTUI_THEME": "dark", "VASTUI_MONEY_CONFIRM_OVER_USD": "5"}, home=tmp_path)
    assert from_env.theme == "dark" and from_env.money_confirm_over_usd == 5.0
    with pytest.raises(ConfigError, match="money_confirm_over_usd"):
        load_settings(env={**env, "VASTUI_MONEY_CONFIRM_OVER_USD": "lots"}, home=tmp_path)


def test_bare_vastui_off_a_terminal_prints_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2  # under pytest stdin/stdout are not a terminal: no console is opened
    assert "console" in capsys.readouterr().out


async def test_the_dialog_approver_binds_action_and_target(tmp_path: Path) -> None:
    async with sim_console(tmp_path, settings=with_settings(live=False)) as sim:
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            with pytest.raises(ApprovalRequired):  # money without a cap: no dialog at all
                await app.approver.request(ApprovalRequest(action=Action.PREPAY_INSTANCE,  # type: ignore[attr-defined]
                                                           target=instance_target(5), summary="s"))
            assert dialog(app) is None
            request = ApprovalRequest(action=Action.PREPAY_INSTANCE, target=instance_target(5), summary="s",
                                      cost_cap_usd=3.0)
            task = asyncio.ensure_future(app.approver.request(request))  # type: ignore[attr-defined]
            await confirm_dialog(pilot, app)
            approval = await task
            assert approval is not None and approval.request.cost_cap_usd == 3.0
            with pytest.raises(ApprovalRequired):
                approval.consume(action=Action.PREPAY_INSTANCE, target=instance_target(6))
            approval.consume(action=Action.PREPAY_INSTANCE, target=instance_target(5))
            task = asyncio.ensure_future(app.approver.request(request))  # type: ignore[attr-defined]
            await wait_for(pilot, lambda: dialog(app) is not None, what="the dialog")
            await pilot.press("escape")
            assert await task is None


async def test_transfer_credit_needs_the_typed_amount(tmp_path: Path) -> None:
    async with sim_console(tmp_path, settings=with_settings(initial_view="account")) as sim:
        app = sim.app
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(pilot, lambda: app.state.user is not None, what="the account")
            await pilot.press("t")
            await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), what="the recipient prompt")
            app.screen.query_one(Input).value = "friend@example.com"
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen)
                           and "friend@example.com" in app.screen.question, what="the amount prompt")
            await pilot.press("3", "0", "enter")
            await wait_for(pilot, lambda: dialog(app) is not None, what="the transfer dialog")
            box = dialog(app)
            assert box is not None and box.proposal.typed == "30.00"
            assert "from $1000.00 to $970.00" in box.proposal.consequence
            await confirm_dialog(pilot, app, typed="30")
            await wait_for(pilot, lambda: any(r.path == "/api/v0/commands/transfer_credit/" and r.status == 200
                                              for r in sim.requests()), what="the transfer")
            bar = app.query_one(StatusBar)
            await wait_for(pilot, lambda: "credit $970.00" in bar.plain_text, what="the new credit")
            await wait_for(pilot, lambda: bool(app.outcomes), what="the transfer's outcome")
            assert app.outcomes[-1].summary() == "transferred $30.00 to friend@example.com"   # the toast's words
            body = app.query_one("#account-body", Static)
            await wait_for(pilot, lambda: "to friend@example.com  ok: $30.00 sent" in str(body.render()),
                           what="the transfer in the account's history")
