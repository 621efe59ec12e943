"""One installed SGLang release, as far as EAGLE-3 is concerned: every part read from its source, or the table.

`read_release(read)` reads what does not depend on the target (version, start-up order, draft loader,
spec rules, the speculative path, log stream) and `Release.capture_rule(arch)` the target model file. A part whose file is
missing or whose code does not match a known pattern comes from `table` for the nearest release read,
and its notes say "assumed from version X".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eagle3_tui.sglang.installed import table
from eagle3_tui.sglang.installed.archs import Arch
from eagle3_tui.sglang.installed.capture import CaptureRule, read_capture_rule
from eagle3_tui.sglang.installed.loader import DraftLoader, read_draft_loader
from eagle3_tui.sglang.installed.logstream import read_log_stream
from eagle3_tui.sglang.installed.multimodal import MultimodalCapture, read_multimodal
from eagle3_tui.sglang.installed.notes import Note, assumed_from
from eagle3_tui.sglang.installed.runner import GraphOrder, read_graph_order
from eagle3_tui.sglang.installed.source import Modules, Read, read_version
from eagle3_tui.sglang.installed.spec import SpecRules, read_spec_rules
from eagle3_tui.sglang.installed.specpath import SpecPath, read_spec_path


@dataclass
class Release:
    version: str | None
    graph_order: GraphOrder
    loader: DraftLoader
    spec: SpecRules
    log_stream: str
    log_note: Note
    path: SpecPath = field(default_factory=lambda: table.spec_path(None))
    """The speculative path beyond capture: spec v2, draft-extend graphs, the switches it declares."""
    mods: Modules | None = None
    _rules: dict[str, CaptureRule] = field(default_factory=dict)
    _multimodal: dict[str, MultimodalCapture | None] = field(default_factory=dict)

    def capture_rule(self, arch: Arch) -> CaptureRule:
        if arch.key not in self._rules:
            rule = read_capture_rule(self.mods, arch) if self.mods is not None else None
            self._rules[arch.key] = rule if rule is not None else table.capture_rule(self.version, arch)
        return self._rules[arch.key]

    def multimodal(self, architecture: str) -> MultimodalCapture | None:
        """Whether a multimodal target's wrapper passes the ids to its language model (None: not one)."""
        if architecture not in self._multimodal:
            got = read_multimodal(self.mods, architecture) if self.mods is not None else None
            self._multimodal[architecture] = got if got is not None else table.multimodal(self.version, architecture)
        return self._multimodal[architecture]

    @property
    def notes(self) -> tuple[Note, ...]:
        return (*self.graph_order.notes, *self.loader.notes, *self.spec.notes, *self.path.notes, self.log_note)


def read_release(read: Read | None, *, version: str | None = None) -> Release:
    """Everything target-independent; `read=None` (no source at all) gives the table for `version`."""
    mods = Modules(read) if read is not None else None
    if mods is not None and version is None:
        version = read_version(mods.read)
    order = read_graph_order(mods) if mods else None
    loader = read_draft_loader(mods) if mods else None
    spec = read_spec_rules(mods) if mods else None
    log = read_log_stream(mods) if mods else None
    path = read_spec_path(mods) if mods else None
    how = assumed_from(table.nearest(version))
    stream, log_note = log if log is not None else ("stderr", Note("version table", table.LOG_TEXT, how))
    return Release(
        version=version,
        graph_order=order if order is not None else table.graph_order(version),
        loader=loader if loader is not None else table.draft_loader(version),
        spec=spec if spec is not None else table.spec_rules(version),
        log_stream=stream,
        log_note=log_note,
        path=path if path is not None else table.spec_path(version),
        mods=mods,
    )
