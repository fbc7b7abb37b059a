"""Where the tests' data lives: inside the repository, so a fresh clone tests itself.

Everything a test reads is under `tests/data/` (example cases with their
`.expect` files, the two Linux 6.1 captures with the kernel's own state) or
`traces/` (the shipped sample traces). Nothing is looked up beside the
checkout, so no test can pass or skip because of what happens to be there.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
EXAMPLES = DATA / "examples"
CAPTURES = DATA / "kernel-6.1"
BOOTS = ("clean", "clean-nohash")
TRACES = ROOT / "traces"

#: an ftrace capture in which the idle task takes hrtimer_bases.lock inside a hardirq handler
FTRACE_HARDIRQ_TIMER = (
    "# tracer: nop\n#\n"
    "          <idle>-0       [001] d.h1.    10.000100: lock_acquire: 0xff82 hrtimer_bases.lock\n"
    "          <idle>-0       [001] d.h1.    10.000200: lock_release: 0xff82 hrtimer_bases.lock\n"
)


def timer_traces(folder: Path, comm: str, tid: int) -> tuple[Path, Path]:
    """`irq.ftrace` (FTRACE_HARDIRQ_TIMER) and `task.perf`, where task COMM/TID takes the same
    hrtimer_bases.lock in `perf script` output, which says nothing of irq context."""
    ftrace = folder / "irq.ftrace"
    ftrace.write_text(FTRACE_HARDIRQ_TIMER)
    perf = folder / "task.perf"
    perf.write_text(f"{comm:>16} {tid:>5} [001]    10.001150: lock:lock_acquire: 0xff82 hrtimer_bases.lock\n"
                    f"{comm:>16} {tid:>5} [001]    10.001180: lock:lock_release: 0xff82 hrtimer_bases.lock\n")
    return ftrace, perf


def deny_open(monkeypatch, *paths) -> None:
    """Make `open()` of these paths fail with EACCES, as for a user without permission (root reads all)."""
    import builtins

    denied_paths = {str(path) for path in paths}
    real_open = builtins.open

    def denied(file, *args, **kwargs):
        if str(file) in denied_paths:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", denied)
