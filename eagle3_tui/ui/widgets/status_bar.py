"""The two-line status bar: connection, server, effective flags, wiring, preset, live numbers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.markup import escape
from textual.widgets import Static

from eagle3_tui.ui.format import accept_level, fmt_boundaries, fmt_duration, fmt_ids, fmt_num

_CONN_STYLE = {
    "connected": "$success",
    "local": "$success",
    "connecting": "$warning",
    "reconnecting": "$warning",
    "failed": "$error",
}
_SERVER_STYLE = {
    "ready": "$success",
    "starting": "$warning",
    "unknown": "$foreground-muted",
    "stopped": "$foreground-muted",
    "failed": "$error",
}


def conn_text(conn: Any) -> str:
    kind = getattr(conn, "kind", "connecting")
    style = _CONN_STYLE.get(kind, "$foreground")
    if kind == "reconnecting":
        attempt = getattr(conn, "attempt", 0)
        wait = getattr(conn, "next_try_s", None)
        label = f"reconnecting {attempt}, next try in {fmt_duration(wait)}"
    elif kind == "failed":
        label = f"failed: {getattr(conn, 'reason', '') or 'unknown reason'}"
    else:
        label = kind
    return f"[{style}]● {escape(label)}[/]"


class StatusBar(Static):
    """Renders the session's snapshots; `refresh_from(session)` is called on every state event."""

    DEFAULT_CSS = """
    StatusBar { height: 2; padding: 0 1; background: $panel; color: $foreground; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, clock: Callable[[], float], **kwargs: Any) -> None:
        super().__init__("connecting…", **kwargs)
        self._clock = clock
        self._session: Any = None
        self.restart_note: str = ""
        self.check_note: str = ""

    def show_boot(self, message: str) -> None:
        self.update(escape(message))

    def refresh_from(self, session: Any) -> None:
        self._session = session
        self.update(self.render_text())

    def tick(self) -> None:
        """Uptime moves once a second even without events."""
        if self._session is not None:
            self.update(self.render_text())

    def render_text(self) -> str:
        s = self._session
        profile = getattr(s, "profile", None)
        host = getattr(profile, "name", None) or getattr(profile, "address", None) or "?"
        server = s.server
        state = getattr(server, "state", "unknown")
        parts1 = [f"[b]{escape(str(host))}[/b] {conn_text(s.conn)}"]
        srv = f"server [{_SERVER_STYLE.get(state, '$foreground')}]{escape(state)}[/]"
        pid = getattr(server, "pid", None)
        if pid:
            srv += f" pid {pid}"
        started = getattr(server, "started_at", None)
        if state == "ready" and started:
            srv += f" up {fmt_duration(self._clock() - started)}"
        parts1.append(srv)
        if getattr(server, "speculative", None) is False:
            parts1.append("speculation off")
        else:
            steps = getattr(server, "steps", None)
            topk = getattr(server, "topk", None)
            draft = getattr(server, "draft_tokens", None)
            asked = getattr(server, "requested_draft_tokens", None)
            draft_txt = fmt_num(draft)
            if asked is not None and draft is not None and asked != draft:
                draft_txt = f"[$accept-warn]{draft} (asked {asked})[/]"
            parts1.append(f"steps {fmt_num(steps)} topk {fmt_num(topk)} draft tokens {draft_txt}")
        if self.restart_note:
            parts1.append(f"[$warning]{escape(self.restart_note)}[/]")
        if getattr(s, "readonly", False):
            parts1.append("[reverse $warning] READONLY [/]")

        ids = getattr(server, "layer_ids", None)
        bounds = getattr(server, "boundaries", None)
        parts2 = [f"ids {escape(fmt_ids(ids))} → {escape(fmt_boundaries(bounds))}"]
        preset = getattr(server, "active_preset", None)
        parts2.append(f"preset {escape(preset or '–')}")
        summary = _summary(s)
        if summary is not None:
            acc = getattr(summary, "accept_len", None)
            predicted = _predicted(s)
            level = accept_level(
                acc,
                predicted,
                (steps + 1) if isinstance(steps := getattr(server, "steps", None), int) else None,
            )
            var = {"good": "$accept-good", "warn": "$accept-warn", "bad": "$accept-bad"}.get(
                level, "$foreground"
            )
            txt = f"accept [{var}]{fmt_num(acc)}[/]"
            if predicted:
                txt += f" (check {fmt_num(predicted)})"
            parts2.append(txt)
            tps = getattr(summary, "gen_tps", None)
            base = getattr(s.telemetry, "baseline_tps", None)
            tps_txt = f"{fmt_num(tps, 1)} tok/s"
            if base:
                tps_txt += f" (base {fmt_num(base, 1)})"
            parts2.append(tps_txt)
        findings = list(getattr(s, "findings", []) or [])
        if findings:
            errors = sum(1 for f in findings if f.severity == "error")
            warns = sum(1 for f in findings if f.severity == "warning")
            infos = len(findings) - errors - warns
            bits = []
            if errors:
                bits.append(f"[$accept-bad]{errors}✖[/]")
            if warns:
                bits.append(f"[$accept-warn]{warns}▲[/]")
            if infos:
                bits.append(f"{infos}●")
            parts2.append("findings " + " ".join(bits))
        if self.check_note:
            parts2.append(escape(self.check_note))
        return " │ ".join(parts1) + "\n" + " │ ".join(parts2)


def _summary(session: Any) -> Any:
    try:
        return session.telemetry.summary(60.0)
    except Exception:  # a summary that cannot be computed yet is not worth a crash
        return None


def _predicted(session: Any) -> float | None:
    """The checker's predicted accept length for the wiring being served, if a check ran."""
    report = getattr(session, "check", None)
    if report is None:
        return None
    served = getattr(session.server, "boundaries", None)
    for result in getattr(report, "wirings", None) or []:
        if served is not None and tuple(getattr(result, "boundaries", ()) or ()) == tuple(served):
            return getattr(result, "predicted_accept_len", None)
    return None
