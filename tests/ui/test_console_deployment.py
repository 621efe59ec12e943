"""Pilot: the actions a deployment refuses (deployment.refusal) are shown disabled, and their keys say why."""

from __future__ import annotations

from eagle3_tui.session.host.deployment import Deployment
from eagle3_tui.ui import keys
from eagle3_tui.ui.factory import make_app
from eagle3_tui.ui.themes import builtin_theme_dir
from tests.ui.recorded import clock_of, recorded_session, until_ready

CID = "3f2a" * 16
POD = Deployment("container", "docker", CID, pid=4242, pod="0b1c" * 9)
DOCKER = Deployment("container", "docker", CID, pid=4242)
UNIT = Deployment("systemd", None, "sglang", pid=4242, unit="sglang")
NODE1 = Deployment("process", pid=4242, nodes=2, node_rank=1, dist_init="10.0.0.1:5000")


async def test_refused_actions_are_disabled_and_their_keys_say_why(tmp_path):
    session, _ = recorded_session(tmp_path)
    app = make_app(session, clock=clock_of(session), theme_dirs=[builtin_theme_dir()], screenshot_dir=tmp_path / "s")

    def toasts() -> list[str]:
        return [str(n.message) for n in app._notifications]

    async with app.run_test(size=(120, 40)) as pilot:
        await until_ready(pilot)
        main = app.main
        session.deploy.current = POD
        for action in ("restart", "rollback", "sweep"):
            assert main.check_action(action, ()) is None, action  # shown, disabled
        assert main.check_action("bench", ()) is True
        await pilot.press("R")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]  # no confirmation: nothing is restarted
        assert any(t.startswith("pod container 3f2a…") and "pod's controller restarts it" in t for t in toasts())
        said = len(toasts())
        main.run_key(keys.all_keys(app.key_owners())["rollback"])  # from the palette: the same reason
        await pilot.pause()
        assert len(toasts()) == said + 1 and "pod's controller" in toasts()[-1]

        session.deploy.current = DOCKER  # the engine restarts it; its flags are the image's
        assert main.check_action("restart", ()) is True and main.check_action("sweep", ()) is None
        await pilot.press("S")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]
        assert any("command line belongs to its image" in t for t in toasts())
        await pilot.press("R")  # allowed: the confirmation comes up
        await pilot.pause()
        assert app.screen is not app.screen_stack[0]
        await pilot.press("escape")

        session.deploy.current = UNIT  # systemctl restart, a drop-in for flags: nothing refused
        assert all(main.check_action(a, ()) is True for a in ("restart", "rollback", "sweep"))
        session.deploy.current = NODE1
        assert main.check_action("restart", ()) is None
        assert "this is node 1 of 2" in (main.refused("restart") or "")


PANE = Deployment("pane", pid=4242, terminal="tmux")


async def test_restart_of_a_pane_server_is_offered_into_a_log_file(tmp_path):
    session, _ = recorded_session(tmp_path)
    calls: list[bool] = []

    async def restart(*, into_log: bool = False) -> None:
        # The recorded session has no server to relaunch (tests/test_deploy_pane.py runs the real
        # restart into a log); here only what the console asks of the session is under test.
        calls.append(into_log)

    session.control.restart = restart  # type: ignore[method-assign]
    app = make_app(session, clock=clock_of(session), theme_dirs=[builtin_theme_dir()], screenshot_dir=tmp_path / "s")
    async with app.run_test(size=(120, 40)) as pilot:
        await until_ready(pilot)
        session.deploy.current = PANE
        assert app.main.check_action("restart", ()) is None  # a plain restart would leave the pane
        await pilot.press("R")
        await pilot.pause()
        modal = app.screen
        assert modal is not app.screen_stack[0], "the into-log restart is offered"
        question = str(modal.query_one("#confirm-question").render())
        assert question.startswith("tmux pane: the server runs in a terminal pane") and "logging to a file" in question
        await pilot.press("y")
        for _ in range(50):
            if calls:
                break
            await pilot.pause(0.05)
        assert calls == [True]
