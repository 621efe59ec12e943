"""Writing a report folder atomically: `report.md` and `charts/*.png`, built in a temp folder beside the
target and renamed into place, so a failure (a chart that cannot be drawn, a full disk) leaves nothing
half-written, and a reader never sees a report without its charts.

Where: the folder the user names (`-o DIR`), else `eagle3-report-<host>-<UTC time>` in the current
directory (the console: where its screenshots go), where a user looks for a file they just asked for.
An existing folder is used only when it is empty or holds an earlier report (replaced whole);
anything else there is refused, never mixed with or overwritten.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from eagle3_tui.errors import UserError
from eagle3_tui.report import charts as ch
from eagle3_tui.report.data import ReportData
from eagle3_tui.report.markdown import TITLE, render

REPORT_FILE = "report.md"
CHARTS_DIR = "charts"
_OURS = {REPORT_FILE, CHARTS_DIR}


def default_dir(host: str, now: float, base: Path | None = None) -> Path:
    """`eagle3-report-<host>-<YYYYmmdd-HHMMSS>` (UTC) in `base` (default: the current directory)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", host).strip("._") or "host"
    return (base or Path.cwd()) / f"eagle3-report-{safe}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime(now))}"


def _is_report(folder: Path) -> bool:
    """An earlier report: only our names inside, and report.md begins with our title."""
    try:
        names = {p.name for p in folder.iterdir()}
        if not names <= _OURS or REPORT_FILE not in names:
            return False
        with open(folder / REPORT_FILE, encoding="utf-8", errors="replace") as f:
            return f.readline().startswith(TITLE)
    except OSError:
        return False


def _usable(target: Path) -> bool:
    """Whether `target` may be (re)placed: absent, an empty folder, or an earlier report. Refused otherwise."""
    if not target.exists() and not target.is_symlink():
        return False
    if target.is_symlink() or not target.is_dir():
        raise UserError(f"cannot write the report to {target}: it exists and is not a folder; name another with -o")
    try:
        empty = not any(target.iterdir())
    except OSError as err:
        raise UserError(f"cannot write the report to {target}: {err.strerror or err}") from None
    if not empty and not _is_report(target):
        raise UserError(f"cannot write the report to {target}: the folder holds other files; name a new or empty "
                        "folder with -o")
    return True


def preflight(target: Path) -> None:
    """Refuse a folder that cannot take the report before any work is done for it (a command watches the
    server first): one that `write_report` would refuse, or one under a file."""
    target = Path(os.path.abspath(Path(target).expanduser()))
    _usable(target)
    above = target.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        raise UserError(f"cannot write the report to {target}: {above} is not a folder; name another with -o")


def draw(data: ReportData, folder: Path) -> dict[str, str]:
    """Every chart there is data for, into `folder/charts/`; name -> path relative to `folder`."""
    out = folder / CHARTS_DIR
    out.mkdir()
    drawn: dict[str, ch.Chart] = {}
    host = data.header.host
    if not data.over_time.empty:
        drawn["over_time"] = ch.over_time_chart(data.over_time, out / "accept-and-tps-over-time.png", host)
    if data.positions:
        drawn["positions"] = ch.positions_chart(data.positions, out / "per-position-acceptance.png", host)
    if data.changes:
        drawn["changes"] = ch.changes_chart(data.changes, out / "changes-before-after.png", host)
    return {name: f"{CHARTS_DIR}/{c.path.name}" for name, c in drawn.items()}


def write_report(data: ReportData, target: Path | None = None, *, base: Path | None = None) -> Path:
    """Write the report folder for `data` at `target` (default: `default_dir` in `base`); the report.md path.

    UserError (one line) for a folder that cannot be used or written; nothing is left behind then."""
    target = Path(target).expanduser() if target is not None else default_dir(data.header.host,
                                                                                data.header.generated_at, base)
    target = Path(os.path.abspath(target))
    replace = _usable(target)
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent))
    except OSError as err:
        raise UserError(f"cannot write the report in {parent}: {err.strerror or err}") from None
    old: Path | None = None
    try:
        charts = draw(data, tmp)
        text = render(data, charts)
        with open(tmp / REPORT_FILE, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o755)  # mkdtemp's 0700 would surprise whoever the folder is shared with
        if replace:
            old = parent / f".{target.name}.{os.getpid()}.old"
            os.rename(target, old)
        os.rename(tmp, target)
    except OSError as err:
        if old is not None and not target.exists():
            with contextlib.suppress(OSError):
                os.rename(old, target)  # the earlier report back in place
            old = None
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"cannot write the report to {target}: {err.strerror or err}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return target / REPORT_FILE
