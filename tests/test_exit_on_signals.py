"""The one exit path: ctrl-C, SIGTERM and SIGHUP end a long command with one line and their own exit
status, never a traceback, locally and over the real sshd (whose port forward and channels close in
order: no asyncio "Exception in callback")."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eagle3_tui.cli import main
from eagle3_tui.errors import UserError
from eagle3_tui.remote.errors import ConnectionLost
from tests.plugins.signals import sigint_as_at_a_prompt

WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}


def _profile(tmp_path: Path, ssh=None) -> tuple[Path, str]:
    log = tmp_path / "server.log"
    log.write_text("[2026-12-01 09:00:00] a line of an old run\n")
    if ssh is None:
        head, alias = '["here"]\nlocal = true\n', "here"
    else:
        head, alias = f'["{ssh.alias}"]\nssh_config = "{ssh.ssh_config}"\n', ssh.alias
    prof = tmp_path / "hosts.toml"
    prof.write_text(head + f'remote_python = "{sys.executable}"\nlog_path = "{log}"\n'
                    f'state_dir = "{tmp_path}/state"\nport = 1\n')
    return prof, alias


def _signalled(tmp_path: Path, sig: int, ssh=None) -> tuple[int, str]:
    prof, alias = _profile(tmp_path, ssh)
    env = {**os.environ, "EAGLE3_TUI_DATA_DIR": str(tmp_path / "data")}
    p = subprocess.Popen([sys.executable, "-m", "eagle3_tui", "watch", "--no-ui", "--duration", "120",
                          "--host", alias, "--profile", str(prof)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         preexec_fn=sigint_as_at_a_prompt)
    try:
        assert p.stdout is not None
        first = p.stdout.readline()  # the server line: attached and following
        assert first.startswith("server: "), first
        time.sleep(0.5)
        p.send_signal(sig)
        _out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_watch_ends_on_a_signal_with_one_line(tmp_path, sig):
    rc, err = _signalled(tmp_path, sig)
    assert rc == 128 + sig
    assert err.strip() == f"eagle3-tui: {WORDS[sig]}", err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_watch_over_ssh_ends_on_a_signal_with_one_line(tmp_path, sshd, sig):
    rc, err = _signalled(tmp_path, sig, ssh=sshd)
    assert rc == 128 + sig
    assert "Traceback" not in err and "Exception in callback" not in err
    assert err.strip() == f"eagle3-tui: {WORDS[sig]}", err


def test_a_lost_connection_and_a_bug_have_their_own_status(monkeypatch, capsys):
    from eagle3_tui.commands import hostcmds

    def lost(args):
        raise ConnectionLost("Lost the connection to gpu1: Connection reset by peer.")

    monkeypatch.setattr(hostcmds, "run", lost)
    assert main(["doctor", "--local"]) == 3
    assert capsys.readouterr().err == "eagle3-tui: Lost the connection to gpu1: Connection reset by peer.\n"

    def bug(args):
        raise AttributeError("'list' object has no attribute 'get'")

    monkeypatch.setattr(hostcmds, "run", bug)
    monkeypatch.delenv("EAGLE3_TUI_DEBUG", raising=False)
    assert main(["doctor", "--local"]) == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error (AttributeError" in err and "Traceback" not in err
    assert UserError("x").exit_code == 2


def _console_in_a_pty(tmp_path: Path, sig: int) -> tuple[int, bytes]:
    """`eagle3-tui --host here` in a pseudo-terminal (Textual draws on stderr): wait for the first
    frame, send `sig`, return the exit status and everything the terminal got."""
    import pty
    import select

    prof, alias = _profile(tmp_path)
    env = {**os.environ, "EAGLE3_TUI_DATA_DIR": str(tmp_path / "data"), "TERM": "xterm-256color"}
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "eagle3_tui", "--host", alias, "--profile", str(prof)],
                         stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    screen = b""

    def read_until(done, timeout: float) -> None:
        nonlocal screen
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            if select.select([master], [], [], 0.05)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    return
                screen += chunk

    try:
        read_until(lambda: b"tok/s" in screen, 30)  # the Live pane is drawn: the app is mounted
        assert b"tok/s" in screen, screen[-500:]
        p.send_signal(sig)
        read_until(lambda: p.poll() is not None, 30)
        read_until(lambda: False, 0.2)
        return p.wait(timeout=5), screen
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_the_console_ends_on_a_signal_with_one_line(tmp_path, sig):
    rc, screen = _console_in_a_pty(tmp_path, sig)
    assert rc == 128 + sig
    line = f"eagle3-tui: {WORDS[sig]}\r\n".encode()
    assert b"Traceback" not in screen and screen.count(b"eagle3-tui: ") == 1 and line in screen, screen[-300:]
    if sig != signal.SIGHUP:
        # after the console's last escape sequence (leaving the alternate screen) the terminal gets the
        # one line; a hang-up writes it from its exit thread while the (gone) terminal may still be drawn
        assert b"\x1b[?1049l" in screen
        assert re.split(rb"\x1b\[[0-9;?]*[A-Za-z]", screen)[-1] == line, screen[-300:]
