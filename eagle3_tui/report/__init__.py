"""The shareable report: one Markdown file and its PNG charts, for pasting into an issue.

- `data`: what a report shows, as plain dataclasses;
- `gather`: that data from an attached session, every number from the function the console uses;
- `markdown`: the Markdown (pure);
- `charts`: the PNGs (matplotlib, headless, imported only when a chart is drawn);
- `write`: the folder, written atomically.

`eagle3-tui report` (commands/report.py) and the console's `r` key both end in `write_report(gather(session))`.
"""

from __future__ import annotations

from eagle3_tui.report.data import ReportData
from eagle3_tui.report.gather import gather
from eagle3_tui.report.write import default_dir, write_report

__all__ = ["ReportData", "default_dir", "gather", "write_report"]
