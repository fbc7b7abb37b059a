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
            from lockcheck.python import trace_meta

            at = trace_meta.lines_written(rec.trace)  # the parent's trace as this child's past ends
            try:
                out = open(f"{self.trace_path}.pid{pid}", "w", buffering=1, encoding="utf-8")
            except OSError:
                rec.trace = None
                return
            trace_meta.write_child_header(out, pid, rec.forked_from or os.getppid(), at, rec.context, rec.check,
                                          rec.test_rules)
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
        """Each forked child wrote `TRACE.pidN`: appended to the trace line for line (its first line,
        the format's header, becomes `# forked child: ...`), its tasks named `pidN:...`, a parent's
        file before its children's.  Line for line, so its `fork` record's line numbers and its
        plugin lines (test names, rules, stacks) stay true: `lockcheck check` replays each
        process from the state it really had (`lockcheck.commands.fork_replay`)."""
        import glob

        if self.trace_file is None or self.trace_path is None:
            return
        children = [(path, _fork_record(path)) for path in glob.glob(glob.escape(self.trace_path) + ".pid*")]
        for path in _parents_first(children):
            try:
                with open(path, "rb") as f:
                    self._append_child(path.rsplit(".", 1)[1], f)
            except OSError:
                continue
            try:
                os.unlink(path)
            except OSError:
                pass

    def _append_child(self, name: str, raw: Any) -> None:
        """One child's file, streamed line by line (split at newlines only, as the readers split).

        Its events are the child's recorder's own `.lt` lines, whose first field is the task (never
        quoted: a task has no blanks): the prefix goes in front of it without parsing the line --
        a grammar parse per line made a child's thousands of events cost seconds, and imported lark
        at the session's end.  The child writes whole lines, so only a last line without its newline
        is one it did not finish (killed mid-line): a comment stands for it, the numbering holds.
        """
        prefix = name + ":"
        out = self.trace_file
        out.write(f"# forked child: {name} (its tasks are named {prefix}TASK)\n")
        next(raw, None)  # its `#lockcheck-trace v1`: the line just written stands for it
        for data in raw:
            if not data.endswith(b"\n"):
                out.write("# (a line the child did not finish)\n")
                continue
            line = data[:-1].decode("utf-8", "surrogateescape")
            out.write((line if not line.strip() or line.startswith("#") else prefix + line) + "\n")


def _fork_record(path: str) -> tuple[int, int]:
    """(child pid, parent pid) of a child's file, from its `fork` record; (0, 0) when it has none."""
    from lockcheck.readers import plugin_meta

    try:
        with open(path, "rb") as f:
            lines = [f.readline(), f.readline()]
    except OSError:
        return 0, 0
    words = lines[plugin_meta.FORK_RECORD - 1].decode("utf-8", "replace").split()
    if len(words) == 5 and words[:2] == [plugin_meta.MARK, "fork"] and words[2].isdigit() and words[3].isdigit():
        return int(words[2]), int(words[3])
    return 0, 0


def _parents_first(children: list) -> list:
    """The paths of the children's files ((path, (pid, parent pid)) each), each after its parent's,
    otherwise by pid: a replay meets a parent's fork points before its children's parts."""
    known = {pids[0]: (path, pids) for path, pids in children}
    done: set = set()
    order: list = []

    def visit(path: str, pids: tuple[int, int]) -> None:
        if path in done:
            return
        done.add(path)
        if pids[1] in known and pids[1] != pids[0]:
            visit(*known[pids[1]])
        order.append(path)

    for path, pids in sorted(children, key=lambda item: item[1][0]):
        visit(path, pids)
    return order
