"""Rules: facts in, findings out. Pure functions.

`from eagle3_tui.doctor import Facts, Finding, Evidence, diagnose`.
"""

from eagle3_tui.doctor.engine import diagnose
from eagle3_tui.doctor.facts import Facts
from eagle3_tui.doctor.findings import Evidence, Finding

__all__ = ["Evidence", "Facts", "Finding", "diagnose"]
