"""Host profiles: what the console knows about a GPU host before it attaches.

Profiles live in one TOML file, `hosts.toml` in the platformdirs user config dir (the env variable
`EAGLE3_TUI_CONFIG_DIR` names another dir), one table per host:

```toml
["gpu-box"]
address = "10.0.0.5"            # or an ~/.ssh/config alias; default: the table name
log_path = "/root/sglang.log"
launch_command = ["python", "-m", "sglang.launch_server", "--model-path", "/models/k2"]
remote_python = "/root/venv/bin/python"
draft_path = "/models/k2-eagle3"
target_path = "/models/k2"
data_glob = "/data/hs/*.pt"
data_slots = [0, 3, 31, 59]     # boundaries of the hidden states stored in the data
baseline_tps = 90.0
restart_deadline_s = 900
api_key = "..."                 # the server's --api-key (EAGLE3_TUI_API_KEY overrides it)
ssh_config = "~/.ssh/config.d/gpu"  # an extra ssh_config file (default: ~/.ssh/config)

["gpu-box".presets."embed-3-31"]
layer_ids = [-1, 2, 30]
description = "training wiring"

["gpu-box".presets."steps-5"]
flags = { "speculative-num-steps" = 5, "speculative-num-draft-tokens" = 6 }
```

Everything is optional: discovery fills what is missing. CLI flags override the file.
`save_profile_values` writes settings learnt in the console (the training data) back into one table.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from eagle3_tui.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib

APP_NAME = "eagle3-tui"
LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "local"})

PresetKind = Literal["layers", "flags"]


@dataclass(frozen=True)
class Preset:
    """A named config the operator can apply with one key.

    `kind == "layers"`: the draft config's `eagle_config.eagle_aux_hidden_state_layer_ids` becomes
    `layer_ids` (None = key absent, SGLang's default). `kind == "flags"`: launch flags change;
    `flags` maps a flag name without dashes (`speculative-num-steps`) to its new value, None removes it.
    `boundaries` is filled by the session for the attached target (what the ids mean there).
    """

    name: str
    kind: PresetKind
    layer_ids: tuple[int, ...] | None = None
    flags: Mapping[str, str | int | float | bool | None] = field(default_factory=dict)
    boundaries: tuple[int, ...] | None = None
    builtin: bool = False
    description: str = ""


@dataclass
class Profile:
    """One host. Paths are on that host; `local` hosts are reached without SSH."""

    name: str
    address: str | None = None
    local: bool = False
    log_path: str | None = None
    launch_command: list[str] | None = None
    launch_cwd: str | None = None
    launch_env: dict[str, str] = field(default_factory=dict)
    remote_python: str | None = None
    draft_path: str | None = None
    target_path: str | None = None
    data_glob: str | None = None
    data_slots: tuple[int, ...] | None = None
    baseline_tps: float | None = None
    presets: list[Preset] = field(default_factory=list)
    restart_deadline_s: float = 900.0
    keymap: dict[str, str] = field(default_factory=dict)
    theme: str | None = None
    port: int | None = None
    state_dir: str | None = None
    accept_new_host_key: bool = False
    ssh_config: str | None = None
    api_key: str | None = None
    """The server's `--api-key`, sent as a Bearer token (else the key on the server's own command line)."""
    demo: bool = False
    source: str | None = None
    """The hosts.toml this profile was read from (or would be written to); None: not from a file (the demo)."""
    nodes: list[str] = field(default_factory=list)
    """The hosts of a multi-node server, in node-rank order (the head first): a restart restarts them all."""

    @property
    def target(self) -> str:
        """What to connect to: the address, else the table name (an ssh alias)."""
        return self.address or self.name

    def local_state_dir(self) -> Path:
        """Where this machine keeps the host's undo records (on this machine, never the host)."""
        if self.state_dir:
            return Path(self.state_dir)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.name) or "host"
        return data_dir() / "hosts" / safe


def config_dir() -> Path:
    env = os.environ.get("EAGLE3_TUI_CONFIG_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME))


def data_dir() -> Path:
    env = os.environ.get("EAGLE3_TUI_DATA_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME))


def default_profile_path() -> Path:
    return config_dir() / "hosts.toml"


_STR_FIELDS = (
    "address",
    "log_path",
    "launch_cwd",
    "remote_python",
    "draft_path",
    "target_path",
    "data_glob",
    "theme",
    "state_dir",
    "ssh_config",
    "api_key",
)
API_KEY_ENV = "EAGLE3_TUI_API_KEY"


def _err(path: Path, host: str, msg: str) -> UserError:
    return UserError(f"{path}: host {host!r}: {msg}")


def _int_list(value: Any, path: Path, host: str, key: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise _err(path, host, f"{key} must be a list of integers")
    return tuple(value)


def _parse_presets(raw: Any, path: Path, host: str) -> list[Preset]:
    if raw is None:
        return []
    if not isinstance(raw, dict):
        raise _err(path, host, "presets must be a table of named presets")
    out: list[Preset] = []
    for name, body in raw.items():
        if not isinstance(body, dict):
            raise _err(path, host, f"preset {name!r} must be a table")
        desc = str(body.get("description", ""))
        if "layer_ids" in body and "flags" in body:
            raise _err(path, host, f"preset {name!r} has both layer_ids and flags; use one")
        if "layer_ids" in body:
            ids = body["layer_ids"]
            if ids == "default" or ids == []:
                out.append(Preset(name, "layers", None, description=desc))
            else:
                out.append(Preset(name, "layers", _int_list(ids, path, host, f"preset {name!r} layer_ids"), description=desc))
        elif "flags" in body:
            flags = body["flags"]
            if not isinstance(flags, dict) or not flags:
                raise _err(path, host, f"preset {name!r}: flags must be a non-empty table")
            clean: dict[str, str | int | float | bool | None] = {}
            for k, v in flags.items():
                key = str(k).lstrip("-")
                if v == "" or v is False:
                    clean[key] = None
                elif isinstance(v, (str, int, float, bool)):
                    clean[key] = v
                else:
                    raise _err(path, host, f"preset {name!r}: flag {k!r} must be a string or number")
            out.append(Preset(name, "flags", flags=clean, description=desc))
        else:
            raise _err(path, host, f"preset {name!r} needs layer_ids or flags")
    return out


def profile_from_table(name: str, table: Mapping[str, Any], *, path: Path | None = None) -> Profile:
    """Build a Profile from one TOML table; wrong types are one clear sentence."""
    src = path or Path("hosts.toml")
    prof = Profile(name=name)
    for key in _STR_FIELDS:
        if key in table:
            if not isinstance(table[key], str):
                raise _err(src, name, f"{key} must be a string")
            setattr(prof, key, table[key])
    if "local" in table:
        prof.local = bool(table["local"])
    _read_launch(prof, table, src)
    if "data_slots" in table:
        from eagle3_tui.eagle.wiring import check_slots

        try:
            prof.data_slots = check_slots(_int_list(table["data_slots"], src, name, "data_slots"))
        except ValueError as err:
            raise _err(src, name, f"data_slots: {err}") from None
    _read_numbers(prof, table, src)
    if "keymap" in table:
        km = table["keymap"]
        if not isinstance(km, dict):
            raise _err(src, name, "keymap must be a table of action = key")
        prof.keymap = {str(k): str(v) for k, v in km.items()}
    prof.presets = _parse_presets(table.get("presets"), src, name)
    if "nodes" in table:
        nodes = table["nodes"]
        if not isinstance(nodes, list) or not all(isinstance(n, str) and n for n in nodes):
            raise _err(src, name, "nodes must be a list of host names, the head (node rank 0) first")
        prof.nodes = list(nodes)
    if prof.address is None and name in LOCAL_NAMES:
        prof.local = True
    return prof


def _read_launch(prof: Profile, table: Mapping[str, Any], src: Path) -> None:
    """`launch_command` (a list, or one shell-quoted string) and `launch_env`."""
    if "launch_command" in table:
        cmd = table["launch_command"]
        if isinstance(cmd, str):
            import shlex

            try:
                cmd = shlex.split(cmd)
            except ValueError as err:  # "No closing quotation", "No escaped character"
                raise _err(src, prof.name, f"launch_command is not valid shell quoting ({err})") from None
        if not isinstance(cmd, list) or not cmd or not all(isinstance(a, str) for a in cmd):
            raise _err(src, prof.name, "launch_command must be a list of strings (or one shell-quoted string)")
        prof.launch_command = list(cmd)
    if "launch_env" in table:
        env = table["launch_env"]
        if not isinstance(env, dict):
            raise _err(src, prof.name, "launch_env must be a table of strings")
        prof.launch_env = {str(k): str(v) for k, v in env.items()}


def _read_numbers(prof: Profile, table: Mapping[str, Any], src: Path) -> None:
    """The positive floats and the port (a TOML bool is not a number here)."""
    for key in ("baseline_tps", "restart_deadline_s"):
        if key in table:
            v = table[key]
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
                raise _err(src, prof.name, f"{key} must be a positive number")
            setattr(prof, key, float(v))
    if "port" in table:
        v = table["port"]
        if not isinstance(v, int) or isinstance(v, bool) or not 0 < v < 65536:
            raise _err(src, prof.name, "port must be an integer 1..65535")
        prof.port = v


def read_profiles(path: Path | str | None = None) -> dict[str, Profile]:
    """All profiles in the file; a missing default file is an empty dict, a missing named file an error."""
    p = Path(path) if path else default_profile_path()
    if not p.exists():
        if path:
            raise UserError(f"profile file {p} does not exist")
        return {}
    try:
        data = tomllib.loads(p.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as err:
        raise UserError(f"{p} is not UTF-8 text (byte {err.start}); TOML files must be UTF-8") from None
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{p} is not valid TOML: {err}") from None
    except RecursionError:
        raise UserError(f"{p} is nested too deeply to read") from None
    except OSError as err:
        raise UserError(f"cannot read {p}: {err.strerror or err}") from None
    out: dict[str, Profile] = {}
    for name, table in data.items():
        if not isinstance(table, dict):
            raise UserError(f"{p}: {name!r} must be a table ([\"{name}\"]), one per host")
        out[name] = profile_from_table(name, table, path=p)
    return out


def load_profile(
    host: str | None,
    path: Path | str | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    local: bool = False,
) -> Profile:
    """The profile for `host` (table name or address), else a bare one; `overrides` win.

    `host` None with `local` (or `--host localhost`) attaches to this machine through LocalHost.
    """
    if host is None and not local:
        raise UserError("no host given: use --host ADDRESS_OR_ALIAS, --local, or --demo")
    name = host or "localhost"
    profiles = read_profiles(path)
    prof = profiles.get(name)
    if prof is None:
        prof = next((p for p in profiles.values() if p.address == name), None)
    if prof is None:
        prof = Profile(name=name, address=None if name in LOCAL_NAMES else name)
    else:
        prof = dataclasses.replace(prof)
    if local or (name in LOCAL_NAMES and prof.address in (None, *LOCAL_NAMES)):
        prof.local = True
    prof.source = str(Path(path) if path else default_profile_path())
    if os.environ.get(API_KEY_ENV):
        prof.api_key = os.environ[API_KEY_ENV]
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if not hasattr(prof, key) or key == "name":
            raise UserError(f"unknown profile setting {key!r}")
        setattr(prof, key, value)
    return prof


def _strip_layer_ids(text: str) -> str:
    """The draft config text without any aux-layer-id key (the broken demo starts with none)."""
    import json

    cfg = json.loads(text)
    cfg.pop("eagle_aux_hidden_state_layer_ids", None)
    nested = cfg.get("eagle_config")
    if isinstance(nested, dict):
        nested.pop("eagle_aux_hidden_state_layer_ids", None)
    return json.dumps(cfg, indent=2) + "\n"


DEMO_SGLANG_VERSION = "0.5.6"
"""The release the demo's sim behaves as (sim/release.py)."""


def demo_profile(world: Any, *, port: int, state_dir: str | Path) -> Profile:
    """The demo host: this machine, the sim server with the seeds' broken flags.

    The draft dir is copied into `state_dir` (config.json as a file without a layer-id key, the
    weights linked) so that presets edit the copy, never the cached world.
    """
    from eagle3_tui.sim.hf_tokenizer import FOLDER, ensure_hf_tokenizer

    if (Path(world.target_dir) / "tokenizer.json").exists():
        ensure_hf_tokenizer(world.target_dir)  # a world built before the folder existed
    state = Path(state_dir)
    state.mkdir(parents=True, exist_ok=True)
    draft_src = Path(world.draft_dir)
    draft = state / "draft"
    draft.mkdir(exist_ok=True)
    for entry in draft_src.iterdir():
        dest = draft / entry.name
        if entry.name == "config.json":
            continue
        if not dest.exists() and not dest.is_symlink():
            try:
                dest.symlink_to(entry.resolve())
            except OSError:
                if entry.is_dir():
                    shutil.copytree(entry, dest)
                else:
                    shutil.copy2(entry, dest)
    cfg = draft / "config.json"
    if not cfg.exists():
        cfg.write_text(_strip_layer_ids((draft_src / "config.json").read_text(encoding="utf-8")), encoding="utf-8")
    argv = [
        sys.executable,
        "-m",
        "eagle3_tui.sim.server",
        "--model-path",
        str(world.target_dir),
        # the world's Hugging Face tokenizer folder, as real SGLang is served: its chat template is what
        # `bench` renders (the sim tokenizes the same ids from the target's own tokenizer.json)
        "--tokenizer-path",
        str(Path(world.target_dir) / FOLDER),
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        str(draft),
        "--speculative-num-steps",
        "1",
        "--speculative-num-draft-tokens",
        "16",
        "--speculative-eagle-topk",
        "1",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--sim-background-load",
        "4",
        # The server shuts down when this console is gone, even after a SIGKILL.
        "--sim-exit-with-pid",
        str(os.getpid()),
        # A decode stat every 10 iterations (SGLang's default is 40) so the demo's charts move at once.
        "--decode-log-interval",
        "10",
        # SGLang 0.5.6 serving a Qwen3 target: -1 captures the embedding stock, and decode under CUDA
        # graphs replays the default boundaries whatever the ids say (the story's partial wiring fix).
        "--sglang-version",
        DEMO_SGLANG_VERSION,
        "--sim-target-arch",
        "qwen3",
    ]
    return Profile(
        name="demo",
        local=True,
        log_path=str(state / "server.log"),
        launch_command=argv,
        launch_cwd=str(state),
        remote_python=sys.executable,
        draft_path=str(draft),
        target_path=str(world.target_dir),
        data_glob=str(world.data_glob),
        data_slots=tuple(world.slot_boundaries),
        restart_deadline_s=120.0,
        port=port,
        state_dir=str(state / "local"),
        demo=True,
    )
