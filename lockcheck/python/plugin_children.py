"""Forked children under the plugin: each writes its own trace and findings file (line by
line: a child often ends with `os._exit()`), which the parent reads back so a finding made
in a child fails the test that forked it, and merges into its trace.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

from lockcheck.lockdep.findings import Finding
from lockcheck.python.plugin_summary import headline


class ForkedChildren:
    """The `LockcheckPlugin` part for forked children; the attributes it uses are the plugin's."""

    trace_file: Any
    trace_path: Optional[str]
    child_dir: Optional[str]
    in_child: bool
    _child_offsets: dict

    def _in_forked_child(self, rec: Any) -> None:
        """In a child of os.fork(): its own trace file and findings file, never the parent's.

        Both are written line by line (a child often ends with os._exit(), which flushes
        nothing); the parent merges the trace into its own and reads the findings back
        (`_read_children`), so a finding made in a child fails the test that forked it.
        """
        self.in_child = True
        self.trace_file = None  # the parent's: the child never closes or flushes it
        pid = os.getpid()
        rec.on_finding = self._child_finding
        if rec.trace is not None and self.trace_path is not None:
            try:
                out = open(f"{self.trace_path}.pid{pid}", "w", buffering=1, encoding="utf-8")
            except OSError:
                rec.trace = None
                return
            out.write(f"#lockcheck-trace v1\n# forked from pid {rec.forked_from}\n")
            info = getattr(rec._local, "info", None)
            if info is not None:
                for ev in rec.held_at_start(info[1]):
                    out.write(rec._format_event(ev) + "\n")
            rec.trace = out

    def _child_finding(self, finding: Finding, context: Optional[str]) -> None:
        if self.child_dir is None:
            return
        try:
            text = self._render([finding])
            line = json.dumps({"context": context, "headline": headline(finding, context) + f" (pid {os.getpid()})",
                               "report": text, "message": finding.message})
            os.makedirs(self.child_dir, mode=0o700, exist_ok=True)
            with open(os.path.join(self.child_dir, f"pid{os.getpid()}.jsonl"), "a", encoding="utf-8") as out:
                out.write(line + "\n")
        except Exception:  # noqa: BLE001 - a child's report must never break the child
            pass

    def _read_children(self) -> list[tuple[Optional[str], str, str, str]]:
        """New findings written by forked children since the last look."""
        if self.child_dir is None:
            return []
        new = []
        try:
            names = sorted(os.listdir(self.child_dir))
        except OSError:
            return []
        for name in names:
            path = os.path.join(self.child_dir, name)
            offset = self._child_offsets.get(path, 0)
            try:
                with open(path, encoding="utf-8") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                continue
            complete = data[:data.rfind("\n") + 1]
            self._child_offsets[path] = offset + len(complete.encode("utf-8"))
            for line in complete.splitlines():
                try:
                    obj = json.loads(line)
                    new.append((obj.get("context"), str(obj["headline"]), str(obj["report"]),
                                str(obj.get("message", ""))))
                except (ValueError, KeyError, TypeError):
                    continue
        return new

    def _merge_child_traces(self) -> None:
        """Each forked child wrote `TRACE.pidN`: appended to the trace, its tasks named `pidN:...`."""
        import glob

        from lockcheck.readers.lt import parse_line
        from lockcheck.readers.lt_write import format_event

        if self.trace_file is None or self.trace_path is None:
            return
        for path in sorted(glob.glob(glob.escape(self.trace_path) + ".pid*")):
            prefix = path.rsplit(".", 1)[1] + ":"
            try:
                with open(path, encoding="utf-8") as f:
                    lines = f.read().splitlines()
            except OSError:
                continue
            self.trace_file.write(f"# forked child: {prefix[:-1]} (its tasks are named {prefix}TASK)\n")
            for line in lines:
                if not line.strip() or line.startswith("#"):
                    if line.startswith("# ") and not line.startswith("#lockcheck"):
                        self.trace_file.write(line + "\n")
                    continue
                try:
                    ev = parse_line(line)
                except Exception:  # noqa: BLE001 - a child killed mid-line: its last line is lost
                    continue
                if ev is None:
                    continue
                ev.task = prefix + ev.task
                self.trace_file.write(format_event(ev) + "\n")
            try:
                os.unlink(path)
            except OSError:
                pass
