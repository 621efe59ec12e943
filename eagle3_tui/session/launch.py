"""A server's launch as a relaunch runs it: argv, working directory, its environment, log
file, port, and who owns the restart. Discovery reads it from a running process, the local store keeps
the last one, presets change its argv, the restart runs it. Values whose names look secret are kept for
the relaunch but never shown (`redact_env`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from eagle3_tui.engines import Engine, engine_for_launch

_SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|KEY|CREDENTIAL|AUTH", re.I)
# A launch flag whose value is a secret: whole words only, so `--max-total-tokens` and `--tokenizer-path` stay
_SECRET_FLAG = re.compile(r"(^|[-_])(api[-_]?key|key|token|secret|password|passwd|credentials?|auth)([-_]|$)", re.I)
DEFAULT_PORT = 30000
"""SGLang's port when its command names none (each engine has its own: `Engine.default_port`)."""


def is_secret_name(name: str) -> bool:
    return bool(_SECRET.search(name))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """For display, logs and the ledger: secret-looking values (HF_TOKEN, ...) replaced."""
    return {k: ("<redacted>" if is_secret_name(k) else v) for k, v in env.items()}


def redact_argv(argv: Sequence[str]) -> list[str]:
    """For display (a report pasted into an issue): the value of a flag whose name looks secret
    (`--api-key K`, `--api-key=K`, `--hf-token K`) replaced; every other word as it is."""
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next and not word.startswith("-"):
            out.append("<redacted>")
            hide_next = False
            continue
        hide_next = False
        name, eq, _ = word.partition("=")
        if word.startswith("-") and _SECRET_FLAG.search(name.lstrip("-")):
            out.append(f"{name}=<redacted>" if eq else word)
            hide_next = not eq
        else:
            out.append(word)
    return out


@dataclass(frozen=True)
class LaunchSpec:
    """What a relaunch runs: argv, working directory, environment, log file, port."""

    argv: tuple[str, ...]
    cwd: str | None
    env: dict[str, str] = field(default_factory=dict)
    """Variables set for the launch: on top of the launching shell's environment, or (`env_whole`) alone."""
    log_path: str | None = None
    port: int = DEFAULT_PORT
    bind_host: str = "127.0.0.1"
    owner: str | None = None
    """Who restarts it when not this console: "docker:<id>", "podman:<id>", "pod:<id>", "systemd:<unit>"."""
    hf_cache: str | None = None
    """The server's Hugging Face hub cache, from its whole environment (repo-id model paths resolve there)."""
    env_whole: bool = False
    """`env` is the server's whole environment (read from its process): the relaunch starts from it
    alone (`env -i`), so nothing of the launching shell's (an SSH login's, the console's) slips in."""

    def to_json(self, *, keep_secrets: bool = False) -> str:
        d = asdict(self)
        d["argv"] = list(self.argv)
        for name in ("owner", "hf_cache"):
            if d[name] is None:
                del d[name]
        if not keep_secrets:
            d["env"] = {k: v for k, v in self.env.items() if not is_secret_name(k)}
            if len(d["env"]) != len(self.env):
                d["env_whole"] = False  # secrets not saved: a relaunch from this record takes them from its shell
        if not d["env_whole"]:
            del d["env_whole"]
        return json.dumps(d, indent=2)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LaunchSpec:
        return cls(
            argv=tuple(str(a) for a in d["argv"]),
            cwd=d.get("cwd"),
            env={str(k): str(v) for k, v in (d.get("env") or {}).items()},
            log_path=d.get("log_path"),
            port=int(d.get("port") or DEFAULT_PORT),
            bind_host=str(d.get("bind_host") or "127.0.0.1"),
            owner=str(d["owner"]) if d.get("owner") else None,
            hf_cache=str(d["hf_cache"]) if d.get("hf_cache") else None,
            env_whole=d.get("env_whole") is True,
        )

    @property
    def engine(self) -> Engine:
        """The engine whose launch command this is (SGLang, vLLM or the sim, which speaks SGLang)."""
        return engine_for_launch(self.argv)

    def with_argv(self, argv: Sequence[str]) -> LaunchSpec:
        """The same cwd, env, log and owner with another command (its port and bind host re-read)."""
        spec = LaunchSpec.from_argv(argv, cwd=self.cwd, env=self.env, log_path=self.log_path)
        return replace(spec, owner=self.owner, hf_cache=self.hf_cache, env_whole=self.env_whole)

    def with_env(self, extra: Mapping[str, str]) -> LaunchSpec:
        """The same launch with `extra` (the profile's launch_env) set over its environment."""
        return replace(self, env={**self.env, **extra}) if extra else self

    @classmethod
    def from_argv(
        cls, argv: Sequence[str], *, cwd: str | None, env: Mapping[str, str] | None = None, log_path: str | None = None
    ) -> LaunchSpec:
        engine = engine_for_launch(argv)
        args = engine.parse_launch(argv)
        host = args.host or "127.0.0.1"
        if host in ("0.0.0.0", "::", "localhost"):
            host = "127.0.0.1" if host != "::" else "::1"
        return cls(tuple(argv), cwd, dict(env or {}), log_path, args.port or engine.default_port, host)
