#!/usr/bin/env python3
"""End-to-end benchmark of `lockcheck check`: throughput and peak memory.

    .venv/bin/python benchmarks/run.py                 # 1M events, seed 1
    .venv/bin/python benchmarks/run.py --events 200000 --case lt

For every case (an input format with its trace generator) this generates a
CLEAN trace of N events and one of N/4 events (cached under benchmarks/out/,
keyed by the generator parameters), runs

    python -m lockcheck check --format json TRACE

in a child process for each, and reports wall time, events/s and the child's
own peak RSS (os.wait4, so one run's peak never leaks into the next).  The
N vs N/4 ratio of peak RSS shows whether memory is flat in trace length
(it must be: ~1.0); the ratio of throughputs shows fixed start-up cost.
Both ratios are measured in the same run, so they survive a noisy machine
better than absolute numbers.

The traces are clean, so the checker must exit 0 with no findings; anything
else is printed as a loud warning and makes this script exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
GEN = HERE / "gen_trace.py"

#: the floor the README promises, end to end (interpreter start-up included)
FLOOR_EVENTS_PER_S = 200_000
#: N-events peak RSS / (N/4)-events peak RSS above this is "not flat"
FLAT_RSS_RATIO = 1.25


@dataclass
class Measure:
    wall: float
    rss_mb: float
    status: int
    stdout: str
    stderr: str
    #: CPU seconds, user and system, of the child and of the processes it waited for (a reader process)
    cpu: float = 0.0


@dataclass
class Case:
    """One benchmark input: how to make a trace of about N events, and how to read it.

    `make(path, events, seed, meta)` writes the trace to `path` and a JSON
    `{"events": exact count, ...}` to `meta`; `key` names the cached file
    (every parameter that changes the bytes must be in it).
    """

    name: str
    make: Callable[[Path, int, int, Path], Measure]
    key: Callable[[int, int], str]
    input_format: str = "auto"
    results: list = field(default_factory=list)
    #: extra `lockcheck check` arguments (the ftrace case passes the capture's --lockdep-state)
    extra_args: list = field(default_factory=list)
    #: the trace must check clean (the reader-only ftrace case reports the uncertain findings
    #: the missing lockdep state leaves: only a crash or a rejected trace fails it)
    expect_clean: bool = True
    #: extra environment of the checker (`LOCKCHECK_PURE=1` for the pure-Python case)
    env: dict = field(default_factory=dict)
    #: measured at the small size only (the pure-Python case: a 10M run would take the budget)
    small_only: bool = False


def _child_env(extra: Optional[dict] = None) -> dict:
    env = dict(os.environ)
    # an installed lockcheck runs from its bytecode caches: a child told not to write them (some CI images
    # set PYTHONDONTWRITEBYTECODE) compiles every module it imports from source on every run, ~0.3 s of
    # each checker's start-up that no user pays (`main` writes the caches once, before measuring)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(extra or {})
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONHASHSEED", "0")
    return env


def measure(cmd: list[str], stdout_path: Path, stderr_path: Path, timeout: float,
            env: Optional[dict] = None) -> Measure:
    """Run `cmd`; wall time and *its own* peak RSS (os.wait4 rusage, not RUSAGE_CHILDREN's running max)."""
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=ROOT, env=_child_env(env))
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, wait_status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(wait_status)  # already reaped: keep Popen from waiting
    rss_kb = usage.ru_maxrss if sys.platform != "darwin" else usage.ru_maxrss / 1024
    return Measure(wall, rss_kb / 1024, proc.returncode, stdout_path.read_text(errors="replace"),
                   stderr_path.read_text(errors="replace"), usage.ru_utime + usage.ru_stime)


# -- cases --------------------------------------------------------------------------------
def _gen_version() -> int:
    for line in GEN.read_text().splitlines():
        if line.startswith("GEN_VERSION"):
            return int(line.split("=")[1])
    return 0


def lt_case(gzip: bool) -> Case:
    version = _gen_version()

    def key(events: int, seed: int) -> str:
        return f"lt-v{version}-e{events}-s{seed}.lt" + (".gz" if gzip else "")

    def make(path: Path, events: int, seed: int, meta: Path) -> Measure:
        cmd = [sys.executable, str(GEN), "--events", str(events), "--seed", str(seed),
               "-o", str(path), "--meta", str(meta)] + (["--gzip"] if gzip else [])
        out, err = path.with_name(path.name + ".out"), path.with_name(path.name + ".err")
        m = measure(cmd, out, err, 3600)
        out.unlink(missing_ok=True)
        err.unlink(missing_ok=True)
        return m

    return Case("lt" + ("-gz" if gzip else ""), make, key, "auto")


CAPTURE = ROOT / "tests" / "data" / "kernel-6.1" / "clean"


def ftrace_case() -> Optional[Case]:
    """The real `clean` kernel capture, repeated to about N events, checked with its --lockdep-state.

    Each copy gets its own pids (pid + 100000 * copy; the per-CPU idle tasks
    `<idle>-0` become `<idle>-(100000 * copy + 99000 + CPU)`), so every copy is a fresh
    set of tasks that starts mid-flight like the original; the kernel's state
    resolves the annotations ftrace cannot carry, so the trace checks clean.
    """
    trace = CAPTURE / "trace.ftrace.xz"
    if not trace.is_file():
        return None

    def key(events: int, seed: int) -> str:
        return f"ftrace-clean-e{events}.ftrace"

    def make(path: Path, events: int, seed: int, meta: Path) -> Measure:
        # in a child process: the capture read here would otherwise raise this process's RSS,
        # which Linux counts into every later child's peak (a child's ru_maxrss starts at its parent's)
        out, err = path.with_name(path.name + ".out"), path.with_name(path.name + ".err")
        m = measure([sys.executable, str(Path(__file__).resolve()), "--write-ftrace", str(path), str(events), str(meta)],
                    out, err, 3600)
        out.unlink(missing_ok=True)
        err.unlink(missing_ok=True)
        return m

    return Case("ftrace", make, key, "ftrace", extra_args=["--lockdep-state", str(CAPTURE)])


def write_ftrace(path: Path, events: int, meta: Path) -> None:
    """The `clean` capture repeated to about `events` events, each copy with its own pids (see `ftrace_case`)."""
    trace = CAPTURE / "trace.ftrace.xz"
    import lzma
    import re

    sys.path.insert(0, str(ROOT))
    from lockcheck.readers import read_all

    per_copy = sum(1 for _ in read_all([str(trace)]))
    with lzma.open(trace, "rt", encoding="utf-8", errors="replace") as stream:
        lines = stream.read().splitlines(keepends=True)
    header = [line for line in lines if line.startswith("#")]
    body = [line for line in lines if not line.startswith("#")]
    head = re.compile(r"^(.*?)-(\d+)( +(?:\(.*?\) +)?\[)(\d+)\]")
    copies = max(1, -(-events // per_copy))
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(header)
        for copy in range(copies):
            offset = 100000 * copy

            def renumber(match: "re.Match") -> str:
                pid = int(match.group(2))
                pid = offset + 99000 + int(match.group(4)) if pid == 0 and copy else pid + offset if pid else 0
                return f"{match.group(1)}-{pid}{match.group(3)}{match.group(4)}]"

            out.writelines(head.sub(renumber, line, count=1) for line in body)
    meta.write_text(json.dumps({"events": per_copy * copies, "copies": copies}))


def ftrace_reader_case(ftrace: Case) -> Case:
    """The same capture without its lockdep state: the reader's speed against `.lt`'s.

    Without the state the annotations are not resolved, so the run reports
    the uncertain findings a naive replay leaves; only speed is compared.
    """
    return Case("ftrace-nostate", ftrace.make, ftrace.key, "ftrace", expect_clean=False)


def pure_case(lt: Case) -> Case:
    """The `.lt` trace with the compiled core turned off: what pure Python does (small size only)."""
    return Case(lt.name + "-pure", lt.make, lt.key, "auto", env={"LOCKCHECK_PURE": "1"}, small_only=True)


def jsonl_case(lt: Case, seed_regen: bool) -> Case:
    """The `.lt` trace's very events as JSON Lines (`benchmarks/to_jsonl.py`): reader against reader."""

    def key(events: int, seed: int) -> str:
        return "jsonl-of-" + lt.key(events, seed).replace(".lt", "") + ".jsonl"

    def make(path: Path, events: int, seed: int, meta: Path) -> Measure:
        source, n = ensure_trace(lt, events, seed, seed_regen)
        out, err = path.with_name(path.name + ".out"), path.with_name(path.name + ".err")
        m = measure([sys.executable, str(HERE / "to_jsonl.py"), str(source), str(path)], out, err, 3600)
        written = int(out.read_text().strip() or 0) if m.status == 0 else 0
        out.unlink(missing_ok=True)
        err.unlink(missing_ok=True)
        if m.status == 0:
            meta.write_text(json.dumps({"events": written, "from": source.name}))
            if written != n:
                print(f"[jsonl] note: {written:,} events written, the generator counted {n:,}")
        return m

    return Case("jsonl", make, key, "auto")


#: cases run only when --case names them (the ftrace reader without the kernel's state)
ON_REQUEST = ("ftrace-nostate",)


def cases(args) -> list[Case]:
    lt = lt_case(args.gzip)
    all_cases = [lt, pure_case(lt)]
    ftrace = ftrace_case()
    if ftrace is not None:
        all_cases += [ftrace, ftrace_reader_case(ftrace)]
    all_cases.append(jsonl_case(lt, args.regen))
    if not args.case:
        return [c for c in all_cases if c.name not in ON_REQUEST]
    wanted = set(args.case)
    return [c for c in all_cases if c.name in wanted or c.name.split("-")[0] in wanted]


# -- adversarial shapes: growth curves -----------------------------------------------------
def shape_trace(shape: str, n: int) -> Path:
    """The cached trace of one shape and size (benchmarks/shapes.py)."""
    sys.path.insert(0, str(HERE))
    import shapes

    name, fmt = (shape[:-len("-ftrace")], "ftrace") if shape.endswith("-ftrace") else (shape, "lt")
    path = OUT / f"shape-{name}-v{shapes.SHAPES_VERSION}-n{n}.{fmt}"
    if not path.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            shapes.write(name, n, out, fmt)
        os.replace(tmp, path)
    return path


def run_shapes(sizes: dict[str, list[int]], keep_dir: Path, timeout: float) -> dict[str, list[dict]]:
    """Time `lockcheck check` on each shape at each size; print the table and growth exponents.

    The exponent between two sizes is log(t2/t1) / log(n2/n1) of the time
    above start-up (1: linear in the shape's size, 2: quadratic).  Start-up
    is measured in the same run and subtracted, so small sizes do not read
    as flat.
    """
    import math

    sys.path.insert(0, str(HERE))
    import shapes

    base = min(measure([sys.executable, "-c", "import lockcheck.commands.cli"], keep_dir / "s.out", keep_dir / "s.err", 120).wall
               for _ in range(3))
    results: dict[str, list[dict]] = {}
    print(f"\nadversarial shapes (start-up {base:.2f}s subtracted for the growth exponent)")
    print(f"{'shape':<18} {'size':>9} {'wall s':>8} {'peak RSS MB':>12} {'growth':>7}  findings")
    for shape, ns in sizes.items():
        rows = results[shape] = []
        for n in ns:
            trace = shape_trace(shape, n)
            stem = keep_dir / f"shape-{shape}-{n}"
            m = measure(check_cmd(trace, "auto"), stem.with_suffix(".json"), stem.with_suffix(".stderr"), timeout)
            kinds: dict[str, int] = {}
            try:
                for f in json.loads(m.stdout).get("findings", []):
                    kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
            except ValueError:
                kinds = {"(no report: exit %d)" % m.status: 1}
            growth = ""
            if rows and m.status in (0, 1):
                t1, n1 = max(rows[-1]["wall_s"] - base, 1e-3), rows[-1]["size"]
                growth = f"{math.log(max(m.wall - base, 1e-3) / t1) / math.log(n / n1):.2f}"
            expected = set(shapes.EXPECTED_FINDINGS.get(shape.replace("-ftrace", ""), []))
            clean = m.status in (0, 1) and set(kinds) <= expected
            rows.append({"size": n, "wall_s": m.wall, "rss_mb": m.rss_mb, "status": m.status,
                         "findings": kinds, "growth": growth, "ok": clean})
            note = ", ".join(f"{v} {k}" for k, v in sorted(kinds.items())) or "none"
            print(f"{shape:<18} {n:>9,} {m.wall:>8.2f} {m.rss_mb:>12.1f} {growth:>7}  {note}"
                  + ("" if clean else "   <-- UNEXPECTED"), flush=True)
            if m.status < 0:
                print(f"{shape}: killed after {timeout:.0f}s; larger sizes skipped", flush=True)
                break
    return results


# -- running ---------------------------------------------------------------------------------
def ensure_trace(case: Case, events: int, seed: int, regen: bool) -> tuple[Path, int]:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / case.key(events, seed)
    meta = path.with_name(path.name + ".meta.json")
    if regen or not (path.exists() and meta.exists()):
        for stale in (path, meta):
            stale.unlink(missing_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp_meta = meta.with_name(meta.name + ".tmp")
        print(f"[{case.name}] generating {events:,} events -> {path.relative_to(ROOT)}", flush=True)
        m = case.make(tmp, events, seed, tmp_meta)
        if m.status != 0:
            sys.exit(f"[{case.name}] trace generation failed ({m.status}):\n{m.stderr}")
        os.replace(tmp, path)
        os.replace(tmp_meta, meta)  # the meta file marks a complete trace
        n = json.loads(meta.read_text())["events"]
        print(f"[{case.name}]   {n:,} events in {m.wall:.1f}s ({n / m.wall:,.0f} events/s), "
              f"generator peak RSS {m.rss_mb:.1f} MB, {path.stat().st_size / 1e6:.1f} MB on disk", flush=True)
    return path, json.loads(meta.read_text())["events"]


def check_cmd(trace: Path, input_format: str, extra: Optional[list] = None) -> list[str]:
    cmd = [sys.executable, "-m", "lockcheck", "check", "--format", "json"] + list(extra or [])
    if input_format and input_format != "auto":
        cmd += ["--input-format", input_format]
    return cmd + [str(trace)]


def loud(message: str) -> None:
    bar = "!" * 78
    print(f"\n{bar}\n!!! {message}\n{bar}\n", file=sys.stderr, flush=True)


def run_case(case: Case, args, keep_dir: Path) -> bool:
    ok = True
    fmt = args.input_format or case.input_format
    for events in sizes(args)[:1 if case.small_only else None]:
        trace, n = ensure_trace(case, events, args.seed, args.regen)
        stem = keep_dir / f"{case.name}-e{events}-s{args.seed}"
        m = measure(check_cmd(trace, fmt, case.extra_args), stem.with_suffix(".json"), stem.with_suffix(".stderr"),
                    args.timeout, case.env)
        print(f"[{case.name}] {n:,} events: {m.wall:.2f}s, {n / m.wall:,.0f} events/s, "
              f"peak RSS {m.rss_mb:.1f} MB, exit {m.status}", flush=True)
        findings: Optional[list] = None
        checker_events = None
        try:
            doc = json.loads(m.stdout)
            findings = doc.get("findings")
            checker_events = (doc.get("stats") or {}).get("events")
        except ValueError:
            pass
        if checker_events is not None and checker_events != n:
            print(f"[{case.name}] note: the checker counted {checker_events:,} events, the generator {n:,}")
        case.results.append({"size": events, "events": n, "wall_s": m.wall, "cpu_s": m.cpu, "events_per_s": n / m.wall,
                             "rss_mb": m.rss_mb,
                             "status": m.status, "findings": len(findings) if findings is not None else None})
        if case.expect_clean and (m.status != 0 or findings) or m.status not in (0, 1):
            ok = False
            kinds: dict[str, int] = {}
            for f in findings or []:
                kinds[f.get("kind", "?")] = kinds.get(f.get("kind", "?"), 0) + 1
            where = trace.relative_to(ROOT)
            if "Traceback (most recent call last)" in m.stderr or m.status < 0:
                loud(f"[{case.name}] CHECKER CRASHED on {where} (exit {m.status}): see the traceback below")
            elif m.status == 2:
                loud(f"[{case.name}] CHECKER REJECTED {where} (exit 2): reader/generator disagreement?")
            else:
                loud(f"[{case.name}] CLEAN TRACE NOT CLEAN: `lockcheck check` exited {m.status} on "
                     f"{where} with {len(findings or [])} finding(s) {kinds or ''}")
            if findings:
                for f in findings[:5]:
                    print("    " + json.dumps(f)[:300], file=sys.stderr)
            if m.stderr.strip():
                print("    stderr (last lines):", file=sys.stderr)
                for line in m.stderr.strip().splitlines()[-15:]:
                    print("    " + line, file=sys.stderr)
    return ok


def sizes(args) -> tuple[int, int]:
    """The two trace sizes of every case: N and N x --scale (1M and 10M by default)."""
    return args.events, args.events * args.scale


# -- floors: what Python itself costs on the same trace, measured in the same run ----------------
def run_floors(lt: Case, args, keep_dir: Path) -> dict[int, dict]:
    """`floors.py split` and `floors.py chain` over the `.lt` trace of each size.

    The ratio of lockcheck's wall time to a floor's survives a noisy
    machine better than events/s: both sides run minutes apart on the same
    machine.  Start-up is included on both sides (python + the loop).
    """
    floors: dict[int, dict] = {}
    for events in sizes(args):
        trace, n = ensure_trace(lt, events, args.seed, args.regen)
        row = floors[events] = {"events": n}
        for which in ("split", "chain"):
            stem = keep_dir / f"floor-{which}-e{events}"
            m = measure([sys.executable, str(HERE / "floors.py"), which, str(trace)],
                        stem.with_suffix(".out"), stem.with_suffix(".err"), args.timeout)
            row[which] = m.wall if m.status == 0 else None
            row[which + "_rss_mb"] = m.rss_mb
            print(f"[floor {which}] {n:,} events: {m.wall:.2f}s, {n / m.wall:,.0f} events/s, "
                  f"peak RSS {m.rss_mb:.1f} MB" + ("" if m.status == 0 else f"  FAILED (exit {m.status})"), flush=True)
    return floors


# -- the pytest plugin's overhead ----------------------------------------------------------------
def run_plugin(args, keep_dir: Path) -> dict[str, Optional[float]]:
    """`bench_plugin.py`: the tracked-lock worst case (threads that only take and release locks)
    and a lock-heavy pytest suite, each as slowdown = instrumented / plain."""
    result: dict[str, Optional[float]] = {}
    for name, extra in (("worst-case", ["--repeat", "3"]), ("suite", ["--suite", "--repeat", "1"])):
        stem = keep_dir / f"plugin-{name}"
        m = measure([sys.executable, str(HERE / "bench_plugin.py")] + extra,
                    stem.with_suffix(".out"), stem.with_suffix(".err"), args.timeout)
        lines = m.stdout.strip().splitlines()
        slowdown = None
        for line in lines:
            if line.startswith("slowdown:"):
                slowdown = float(line.split()[1].rstrip("x"))
        result[name] = slowdown
        print(f"[plugin {name}] " + ("; ".join(line.strip() for line in lines) if m.status == 0
                                     else f"FAILED (exit {m.status}): {m.stderr.strip()[-300:]}"), flush=True)
    return result


def report(all_cases: list[Case], floors: dict[int, dict], plugin: dict) -> bool:
    ok = True
    print()
    print("lockcheck check --format json, end to end (interpreter start-up included); x split / x chain:"
          " wall time as a multiple of the floors' on the .lt trace of the same size; x lt cpu: CPU"
          " seconds per event (every process of the run) as a multiple of the compiled .lt run's")
    print(f"{'case':<8} {'events':>11} {'wall s':>8} {'events/s':>10} {'peak RSS MB':>12} "
          f"{'x split':>8} {'x chain':>8} {'cpu s':>7} {'x lt cpu':>8} {'exit':>5} {'findings':>9}")
    lt_cpu = {r["size"]: r["cpu_s"] / r["events"] for case in all_cases if case.name == "lt" for r in case.results
              if r.get("cpu_s")}
    for size, row in sorted(floors.items()):
        for which in ("split", "chain"):
            if row.get(which):
                print(f"{'floor:' + which:<8} {row['events']:>11,} {row[which]:>8.2f} {row['events'] / row[which]:>10,.0f} "
                      f"{row[which + '_rss_mb']:>12.1f}")
    for case in all_cases:
        for r in case.results:
            nf = "?" if r["findings"] is None else r["findings"]
            row = floors.get(r["size"], {})
            # the floor's time per event times this case's events (a repeated capture is not exactly N)
            per = {w: row[w] / row["events"] * r["events"] for w in ("split", "chain") if row.get(w)}
            ratios = [f"{r['wall_s'] / per[w]:>8.2f}" if w in per else f"{'-':>8}" for w in ("split", "chain")]
            r["x_split"], r["x_chain"] = [r["wall_s"] / per[w] if w in per else None for w in ("split", "chain")]
            base = lt_cpu.get(r["size"])
            r["x_lt_cpu"] = r["cpu_s"] / r["events"] / base if base else None
            x_cpu = f"{r['x_lt_cpu']:>8.2f}" if r["x_lt_cpu"] is not None else f"{'-':>8}"
            print(f"{case.name:<8} {r['events']:>11,} {r['wall_s']:>8.2f} {r['events_per_s']:>10,.0f} "
                  f"{r['rss_mb']:>12.1f} {ratios[0]} {ratios[1]} {r['cpu_s']:>7.2f} {x_cpu} {r['status']:>5} {nf:>9}")
    print()
    for case in all_cases:
        if len(case.results) < 2:
            continue
        small, large = case.results[0], case.results[1]
        rss_ratio = large["rss_mb"] / small["rss_mb"] if small["rss_mb"] else float("nan")
        speed_ratio = large["events_per_s"] / small["events_per_s"]
        flat = rss_ratio <= FLAT_RSS_RATIO
        fast = large["events_per_s"] >= FLOOR_EVENTS_PER_S
        print(f"{case.name}: peak RSS {large['rss_mb']:.1f} MB at {large['events']:,} events vs "
              f"{small['rss_mb']:.1f} MB at {small['events']:,}: ratio {rss_ratio:.2f} "
              f"({'flat' if flat else 'NOT FLAT: memory grows with trace length'})")
        print(f"{case.name}: throughput {large['events_per_s']:,.0f} vs {small['events_per_s']:,.0f} events/s: "
              f"ratio {speed_ratio:.2f}; floor {FLOOR_EVENTS_PER_S:,} events/s: "
              f"{'OK' if fast else 'BELOW THE FLOOR'}")
        if not flat:
            loud(f"[{case.name}] peak RSS grows with trace length (ratio {rss_ratio:.2f} > {FLAT_RSS_RATIO})")
        if not fast:
            print(f"{case.name}: warning: below the {FLOOR_EVENTS_PER_S:,} events/s floor "
                  "(machines are noisy: compare with a rerun before acting)", file=sys.stderr)
    return ok


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="events in the small trace (default 1000000)")
    ap.add_argument("--scale", type=int, default=10, help="the large trace is --events x this (default 10)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--input-format", default=None,
                    help="force `lockcheck check --input-format` for every case (default: the case's own, auto)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the checker's JSON output and stderr under benchmarks/out/ (traces are always cached)")
    ap.add_argument("--regen", action="store_true", help="regenerate cached traces")
    ap.add_argument("--gzip", action="store_true", help="benchmark gzip-compressed traces")
    ap.add_argument("--case", action="append",
                    help="run only this case (repeatable): lt, lt-pure, ftrace, jsonl, ftrace-nostate; none: no case")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds before a checker run is killed")
    ap.add_argument("--shapes", choices=("none", "quick", "full"), default="quick",
                    help="adversarial shapes' growth curves: none, quick (default: fits the 10-minute budget) or full")
    ap.add_argument("--shape", action="append", help="run only this shape (repeatable; implies --case none)")
    ap.add_argument("--no-plugin", action="store_true", help="leave out the pytest plugin's overhead")
    ap.add_argument("--write-ftrace", nargs=3, metavar=("PATH", "EVENTS", "META"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.write_ftrace:
        path, events, meta = args.write_ftrace
        write_ftrace(Path(path), int(events), Path(meta))
        return 0
    began = time.perf_counter()

    print(f"lockcheck benchmark: python {platform.python_version()} ({sys.executable}), "
          f"{os.cpu_count()} CPUs, {platform.machine()}, seed {args.seed}; "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    all_cases = [] if args.shape or args.case == ["none"] else cases(args)
    if args.case and args.case != ["none"] and not all_cases:
        sys.exit(f"no case named {args.case}")
    import tempfile
    ok = True
    floors: dict[int, dict] = {}
    plugin: dict = {}
    with tempfile.TemporaryDirectory(prefix="lockcheck-bench-") as tmp:
        keep_dir = OUT if args.keep else Path(tmp)
        OUT.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "lockcheck")], env=_child_env(),
                       stdout=subprocess.DEVNULL, check=False)
        base = measure([sys.executable, "-c", "import lockcheck.commands.cli"], Path(tmp) / "base.out",
                       Path(tmp) / "base.err", 120)
        if base.status == 0:
            print(f"start-up (python + import lockcheck.commands.cli): {base.wall:.2f}s, {base.rss_mb:.1f} MB", flush=True)
        else:
            loud("`import lockcheck.commands.cli` fails: the checker does not exist yet or is broken:\n"
                 + base.stderr.strip()[-800:])
        if all_cases:
            lt = next((c for c in all_cases if c.name.startswith("lt")), None) or lt_case(args.gzip)
            floors = run_floors(lt, args, keep_dir)
            for case in all_cases:
                ok &= run_case(case, args, keep_dir)
        shape_results = {}
        if args.shapes != "none" or args.shape:
            sys.path.insert(0, str(HERE))
            import shapes

            shape_sizes = dict(shapes.QUICK_SIZES if args.shapes == "quick" else shapes.SIZES)
            if args.shape:
                shape_sizes = {name: shapes.SIZES[name] for name in args.shape}
            shape_results = run_shapes(shape_sizes, keep_dir, min(args.timeout, 300))
            ok &= all(row["ok"] for rows in shape_results.values() for row in rows)
        if not (args.no_plugin or args.shape or args.case):
            print()
            plugin = run_plugin(args, keep_dir)
    if all_cases:
        ok &= report(all_cases, floors, plugin)
    if plugin:
        print("plugin overhead (instrumented / plain, target < 2x): "
              + ", ".join(f"{name} {value:.2f}x" if value else f"{name} failed" for name, value in plugin.items()))
    total = time.perf_counter() - began
    print(f"benchmark wall time: {total:.0f}s (budget 600s); load average now "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    summary = {"python": platform.python_version(), "cpus": os.cpu_count(), "seed": args.seed,
               "startup_s": base.wall, "startup_rss_mb": base.rss_mb, "floors": floors,
               "cases": {c.name: c.results for c in all_cases}, "shapes": shape_results,
               "plugin": plugin, "wall_s": total}
    (OUT / "last-run.json").write_text(json.dumps(summary, indent=2) + "\n")
    if not ok:
        loud("benchmark FAILED: the checker did not exit 0 on a clean trace (see above)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
