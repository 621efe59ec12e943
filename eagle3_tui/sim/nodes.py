"""Several sim nodes (`--nnodes N --node-rank R --dist-init-addr HOST:PORT`), the way SGLang's behave.

The head (rank 0) opens a TCP listener at the dist-init address (SGLang's TCPStore) before it loads,
then serves HTTP and logs the stats as one node does. A node of rank > 0 waits until that address
answers (up to `--dist-timeout` seconds), says it joined, and runs without HTTP or stats until it is
stopped (SIGTERM: a clean exit) or the head goes away (its connection closes: an error, exit 1), so
stopping the head before the others shows in their logs as it would on real nodes.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from eagle3_tui.sim.logfmt import LogWriter

DIST_TIMEOUT_S = 300.0  # SGLang's default wait for the other nodes
CONNECT_POLL_S = 0.1


def parse_addr(addr: str) -> tuple[str, int]:
    """`HOST:PORT` or `[V6]:PORT` -> (host, port); ValueError naming the value when it is neither."""
    host, sep, port = addr.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--dist-init-addr {addr!r} is not HOST:PORT")
    return host, int(port)


def check_flags(ns: argparse.Namespace) -> str | None:
    """What is wrong with the node flags (one sentence), or None."""
    if ns.nnodes < 1 or not 0 <= ns.node_rank < ns.nnodes:
        return f"--node-rank {ns.node_rank} is not within --nnodes {ns.nnodes}"
    if ns.nnodes > 1 and not ns.dist_init_addr:
        return "--dist-init-addr HOST:PORT is required with --nnodes > 1"
    if ns.dist_init_addr:
        try:
            parse_addr(ns.dist_init_addr)
        except ValueError as err:
            return str(err)
    return None


class HeadListener:
    """The head's dist-init address: accepts the other nodes and holds their connections until closed."""

    def __init__(self, addr: str) -> None:
        host, port = parse_addr(addr)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind((host, port))
        except OSError:
            self._sock.close()
            raise
        self._sock.listen(16)
        self._peers: list[socket.socket] = []
        threading.Thread(target=self._accept, name="dist-init", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:  # closed
                return
            self._peers.append(conn)

    def close(self) -> None:
        for s in (self._sock, *self._peers):
            with contextlib.suppress(OSError):
                s.close()


def open_head(ns: argparse.Namespace, log: LogWriter) -> HeadListener | int | None:
    """The head's listener (None: one node), or the exit code when the address cannot be bound."""
    if ns.nnodes <= 1:
        return None
    try:
        head = HeadListener(ns.dist_init_addr)
    except OSError as err:
        log.write(f"RuntimeError: the dist-init address {ns.dist_init_addr} cannot be bound: {err.strerror or err}")
        return 1
    log.write(f"sim: node 0 of {ns.nnodes} (the head) waits for the other nodes at {ns.dist_init_addr}")
    return head


def _join(addr: str, timeout_s: float) -> socket.socket | None:
    host, port = parse_addr(addr)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return socket.create_connection((host, port), timeout=2)
        except OSError:
            if time.monotonic() > deadline:
                return None
            time.sleep(CONNECT_POLL_S)


def run_follower(ns: argparse.Namespace, log: LogWriter) -> int:
    """A node of rank > 0: join the head, then run until stopped (0) or the head is gone (1)."""
    who = f"node {ns.node_rank} of {ns.nnodes}"
    timeout_s = float(ns.dist_timeout) if ns.dist_timeout else DIST_TIMEOUT_S
    log.write(f"sim: {who} waiting for the head at {ns.dist_init_addr}")
    try:
        conn = _join(ns.dist_init_addr, timeout_s)
        if conn is None:
            log.write(f"RuntimeError: {who}: the head at {ns.dist_init_addr} did not answer within {timeout_s:.0f} s")
            return 1
        log.write(f"sim: {who} joined the head at {ns.dist_init_addr} (no HTTP here: the head serves and logs the stats)")
        conn.settimeout(None)
        with conn:
            while conn.recv(4096):
                pass
    except SystemExit:  # SIGTERM (server._on_signals)
        log.write(f"sim: {who} shutting down (SIGTERM)")
        return 0
    log.write(f"RuntimeError: {who} lost the head at {ns.dist_init_addr} (connection closed)")
    return 1
