"""Renderers: findings -> output.  The only place lockcheck writes a report.

Every renderer module exposes::

    render(findings: list[Finding], summary: Summary, out: TextIO) -> None

and writes nothing but `out`.  `RENDERERS` maps the `--format` name of
docs/cli.md to the module; the CLI fills a `Summary` with the
run's counts and picks the module by name.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType

from lockcheck.util.version import __version__


@dataclass
class Summary:
    """What the run looked at, for the summary line and the JSON `stats`.

    `files` are the trace files read, `notes` free-form remarks printed
    after the summary (e.g. "3 releases of locks never seen acquired"),
    `suppressed` the number of findings dropped by `--suppress`, `errors`
    the `FILE:LINE:COL: message` of each input that could not be read (the
    findings are then those of the rest: no renderer may call that clean).
    """

    events: int = 0
    tasks: int = 0
    classes: int = 0
    dependencies: int = 0
    files: list[str] = field(default_factory=list)
    version: str = __version__
    notes: list[str] = field(default_factory=list)
    suppressed: int = 0
    errors: list[str] = field(default_factory=list)
    #: where the annotations of captured acquisitions came from (`Annotators.source_counts`): {} if none
    annotations: dict[str, int] = field(default_factory=dict)
    #: `--quiet`: the findings only, no summary line and no notes (the JSON document keeps both)
    quiet: bool = False


class _Renderers(Mapping):
    """`--format` name -> renderer module, each imported when first asked for (a run uses one)."""

    _modules = {
        "text": "lockcheck.report.text",
        "json": "lockcheck.report.json",
        "sarif": "lockcheck.report.sarif",
        "github": "lockcheck.report.github",
        "html": "lockcheck.report.html",
    }

    def __getitem__(self, name: str) -> ModuleType:
        return importlib.import_module(self._modules[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)


#: `--format` name -> renderer module (renderers may import `Summary` from here)
RENDERERS: Mapping[str, ModuleType] = _Renderers()

__all__ = ["RENDERERS", "Summary"]
