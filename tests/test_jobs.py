"""`--jobs N` and `--dask`: a check split over processes reports what `--jobs 1` reports.

The split (`lockcheck.jobs`) checks files, or one file's tasks, in worker
processes and replays the events that can change the shared state into
one checker, in trace order.  These tests hold it to the sequential run's
JSON document (findings with every field, summary, notes, errors) on every
trace the suite has, in pure Python and with the compiled core, and on
generated traces; and check that the split really ran where it should
(`CheckSession.parallel_fallback` is None) and fell back where it must.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lockcheck.engine import fast_lt as hotpath
from lockcheck import jobs
from lockcheck.commands.cli import main
from lockcheck.commands.check import CheckSession, SessionOptions
from test_cli import E2E
from test_hotpath import traces
from testdata import ROOT

#: every file of the suite's data that a check reads as an input (traces of every format, compressed
#: captures, kernel logs, dumps); the rest (expectations, sources, a schema, READMEs) are no traces
_INPUT_SUFFIXES = (".lt", ".ftrace", ".perf", ".jsonl", ".log", ".xz", ".gz", ".zst", ".txt")


def _suite_inputs() -> list[Path]:
    found = []
    for root in (ROOT / "traces", ROOT / "tests" / "data"):
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.suffix in _INPUT_SUFFIXES:
                found.append(path)
    return found


def _check(paths: list[str], jobs_n: int, **options) -> tuple[int, dict, str, CheckSession, str]:
    """One check in this process: exit status, JSON document, stderr, the session, the saved graph."""
    stderr = io.StringIO()
    with tempfile.TemporaryDirectory() as folder:
        graph = Path(folder) / "graph.json"
        session = CheckSession(SessionOptions(output_format="json", jobs=jobs_n, progress=False,
                                              save_graph=str(graph), **options), stderr=stderr)
        out = io.StringIO()
        status = session.run(paths, out)
        saved = graph.read_text() if graph.exists() else ""
    return status, json.loads(out.getvalue()), stderr.getvalue(), session, saved


def _visible(result: tuple) -> tuple:
    """What a user sees of a `_check`: status, JSON document, stderr, saved graph."""
    status, doc, err, _, graph = result
    return status, doc, err, graph


def _same(paths: list[str], monkeypatch, pure_too: bool = True, **options) -> CheckSession:
    """Pure Python and compiled, `--jobs 1` and `--jobs 2` (the latter twice: where the summaries
    cannot vouch, checked in one process, and replayed exactly): six identical results (report,
    stderr and saved graph); the split session that replays exactly.

    `pure_too=False`: the compiled runs only, for inputs that are not `.lt` (`LOCKCHECK_PURE`
    chooses between the two `.lt` fast paths; other formats have one path).
    """
    results = []
    split = None
    for pure in ("1", "0") if pure_too else ("0",):
        monkeypatch.setenv("LOCKCHECK_PURE", pure)
        for n, replay in ((1, False), (2, False), (2, True)):
            monkeypatch.setattr(jobs, "REPLAY_LOCALLY", replay)
            status, doc, err, session, graph = _check(paths, n, **options)
            results.append((status, doc, err, graph))
            if replay:
                split = session
    assert hotpath.compiled(), "the compiled core is not built: the compiled runs would be pure Python"
    assert results[1:] == results[:1] * (len(results) - 1)
    return split


def _splits(path: Path) -> bool:
    """Whether the split must serve this input: a trace read without annotations (no capture)."""
    return path.suffix in (".lt", ".jsonl") and path.name != "malformed.lt" and "lost" not in path.name


@pytest.mark.slow
@pytest.mark.parametrize("path", _suite_inputs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_suite_input_gives_the_same_findings_split(path, monkeypatch) -> None:
    session = _same([str(path)], monkeypatch, pure_too=path.suffix == ".lt")
    if _splits(path):
        reason = session.parallel_fallback
        if reason is not None and any(text in reason for text in _ONE_PROCESS_BY_DESIGN):
            return  # docs/trace-format.md: `--jobs` checks a trace that uses "the rest of lockdep" in one process
        if path.name in _USAGE_FALLBACKS:
            # docs/cli.md: "a usage bit ... a worker set that the merged checker refused -- the check
            # goes to one process too"; the same findings (`_same` above), one process, said why
            assert reason is not None and "differs in the merged run" in reason, reason
            return
        assert reason is None


#: the fallbacks the split takes on purpose (the coverage table's inputs use these features)
_ONE_PROCESS_BY_DESIGN = ("with what 'The rest of lockdep' adds", "an unregistered class is forgotten by every part")
#: coverage inputs whose exact replay falls back, as docs/cli.md says it does: an inconsistent lock
#: state found when a lock already used in an irq is taken with irqs on (the merged run marks fewer
#: usage bits than the part assumed, mark_usage() stopping at the refused bit as the kernel's does)
_USAGE_FALLBACKS = frozenset({"17-inconsistent.lt", "20-usage-read-states.lt", "21-irqs-on-held.lt",
                              "22-trylock-usage.lt"})


@pytest.mark.parametrize("folder", ["traces", "tests/data/examples"])
def test_folders_of_traces_give_the_same_findings_split(folder, monkeypatch) -> None:
    _same([str(ROOT / folder)], monkeypatch)


def test_the_examples_as_files_are_split_by_file(monkeypatch) -> None:
    """Many files, two workers: whole files in parallel, findings in the order one process finds them."""
    files = sorted(str(p) for p in (ROOT / "tests" / "data" / "examples").glob("*.lt") if p.name != "malformed.lt")
    session = _same(files, monkeypatch)
    assert session.parallel_fallback is None


@pytest.mark.parametrize("name", sorted(E2E))
def test_the_end_to_end_traces_give_the_same_findings_split(name, tmp_path, monkeypatch) -> None:
    path = tmp_path / f"{name}.lt"
    path.write_text(E2E[name])
    session = _same([str(path)], monkeypatch)
    assert session.parallel_fallback is None


def _tasks_of_both_parts(count: int = 2) -> tuple[list[str], list[str]]:
    """Task names that part 0 and part 1 of a two-way split own."""
    names = [f"T{i}" for i in range(40)]
    return ([n for n in names if jobs.owner(n, 2) == 0][:count], [n for n in names if jobs.owner(n, 2) == 1][:count])


def test_a_cycle_across_files_is_found_split(tmp_path, monkeypatch) -> None:
    """Each file a run of its own, in a process of its own: their orders still meet in the graph."""
    (tmp_path / "a.lt").write_text("T1 acquire A at=a.c:1\nT1 acquire B at=a.c:2\nT1 release B\nT1 release A\n")
    (tmp_path / "b.lt").write_text("T1 acquire B at=b.c:1\nT1 acquire A at=b.c:2\nT1 release A\nT1 release B\n")
    session = _same([str(tmp_path / "a.lt"), str(tmp_path / "b.lt")], monkeypatch)
    assert session.parallel_fallback is None
    _, doc, *_ = _check([str(tmp_path / "a.lt"), str(tmp_path / "b.lt")], 2)
    [finding] = doc["findings"]
    assert finding["kind"] == "circular-dependency" and finding["location"].endswith("b.lt:2")
    assert doc["stats"]["tasks"] == 2  # T1 of each file: two runs, two tasks


def test_the_first_dependency_that_closes_a_cycle_is_the_one_reported(tmp_path, monkeypatch) -> None:
    """Two tasks of different parts both close A -> B -> A; the one earlier in the trace is reported,
    with the evidence of the dependency seen first, as in one process."""
    (p0, q0), (p1, q1) = _tasks_of_both_parts()
    lines = [f"{p0} acquire A at=f:1", f"{p0} acquire B at=f:2", f"{p0} release B", f"{p0} release A",
             f"{q1} acquire A at=g:1", f"{q1} acquire B at=g:2", f"{q1} release B", f"{q1} release A",
             f"{p1} acquire B at=h:1", f"{q0} acquire B at=k:1", f"{p1} acquire A at=h:2",
             f"{q0} acquire A at=k:2"]
    path = tmp_path / "t.lt"
    path.write_text("\n".join(lines) + "\n")
    session = _same([str(path)], monkeypatch)
    assert session.parallel_fallback is None
    assert session.parallel_unsure is not None  # the cycle closes where the parts meet: replayed exactly
    monkeypatch.setattr(jobs, "REPLAY_LOCALLY", False)
    _, doc, _, local, _ = _check([str(path)], 2)
    assert "where the parts meet" in local.parallel_fallback  # by default: checked in one process
    [finding] = doc["findings"]
    assert finding["location"].endswith("t.lt:11") and finding["task"] == p1
    assert finding["chain"][0]["evidence"]["line"] == 2  # A -> B as first seen, by p0


@pytest.mark.parametrize("trylock_first", [True, False])
def test_a_clean_trace_is_merged_from_the_parts_summaries(trylock_first, tmp_path, monkeypatch) -> None:
    """No finding: the parts' summaries serve, and give the graph one process builds.

    Two tasks of different parts build one chain key (A, X, B) -- a trylock is not part of the
    key -- with different dependencies: under a trylock X, B depends on A too.  Only the task
    that builds it first validates it, so which dependencies exist depends on the order across
    parts; and each dependency keeps the evidence of whichever part saw it first."""
    (p0, q0), (p1, q1) = _tasks_of_both_parts()
    tried = [f"{p1} acquire A at=t:1", f"{p1} acquire X try at=t:2", f"{p1} acquire B at=t:3",
             f"{p1} release B", f"{p1} release X", f"{p1} release A"]
    plain = [f"{p0} acquire A at=p:1", f"{p0} acquire X at=p:2", f"{p0} acquire B at=p:3",
             f"{p0} release B", f"{p0} release X", f"{p0} release A"]
    later = [f"{q1} acquire C at=q1:1", f"{q0} acquire C at=q0:1", f"{q0} acquire D at=q0:2",
             f"{q1} acquire D at=q1:2", f"{q0} release D", f"{q1} release D", f"{q0} release C", f"{q1} release C"]
    lines = (tried + plain if trylock_first else plain + tried) + later
    path = tmp_path / "t.lt"
    path.write_text("\n".join(lines) + "\n")
    session = _same([str(path)], monkeypatch)
    assert session.parallel_fallback is None and session.parallel_unsure is None
    *_, graph = _check([str(path)], 2)
    edges = {(d["from"], d["to"]): d for d in json.loads(graph)["dependencies"]}
    assert (("A", "B") in edges) == trylock_first
    assert edges[("C", "D")]["evidence"]["task"] == q0 and edges[("C", "D")]["evidence"]["at"] == "q0:2"


def test_first_is_checked_in_one_process(tmp_path, monkeypatch) -> None:
    """--first reads no further than the first finding: a split would read everything to report it."""
    (a0, b0), (a1, b1) = _tasks_of_both_parts()
    lines = [f"{a0} acquire A", f"{a0} acquire B", f"{a0} release B", f"{a0} release A", f"{a1} acquire X",
             f"{a1} acquire X", f"{b1} acquire B", f"{b1} acquire A", f"{b0} release Q"]
    path = tmp_path / "t.lt"
    path.write_text("\n".join(lines) + "\n")
    session = _same([str(path)], monkeypatch, first=True)
    assert "--first" in session.parallel_fallback
    _, doc, *_ = _check([str(path)], 2, first=True)
    assert [f["kind"] for f in doc["findings"]] == ["recursive-locking"] and doc["stats"]["events"] == 6


def test_irq_usage_findings_split(tmp_path, monkeypatch) -> None:
    """Usage bits set by tasks of different parts meet in the merge: the inconsistency is found
    there, and the part whose assumption it broke has its run checked again in one process."""
    (h0, _), (p1, _) = _tasks_of_both_parts()
    lines = [f"{h0} hardirq-enter", f"{h0} acquire L at=irq:1", f"{h0} release L", f"{h0} hardirq-exit",
             f"{p1} acquire L at=proc:1", f"{p1} release L", f"{p1} acquire L at=proc:2", f"{p1} release L"]
    path = tmp_path / "t.lt"
    path.write_text("\n".join(lines) + "\n")
    session = _same([str(path)], monkeypatch)
    _, doc, *_ = _check([str(path)], 2)
    assert [f["kind"] for f in doc["findings"]] == ["inconsistent-lock-state"]
    assert session.parallel_fallback is not None and "usage" in session.parallel_fallback


@pytest.mark.parametrize("text, reason", [
    ("T1 acquire A\n#lockcheck-lost-events cpu=0\nT1 acquire B\n", "lost events"),
    ("T1 acquire A\nT1 aquire B\n", "unknown op"),
])
def test_what_the_split_cannot_follow_is_checked_in_one_process(text, reason, tmp_path, monkeypatch) -> None:
    path = tmp_path / "t.lt"
    path.write_text(text)
    session = _same([str(path)], monkeypatch)
    assert reason in session.parallel_fallback


def test_a_declared_order_is_checked_in_one_process(tmp_path, monkeypatch) -> None:
    order = tmp_path / "lockcheck.order"
    order.write_text("A < B\n")
    path = tmp_path / "t.lt"
    path.write_text("T1 acquire B\nT1 acquire A\n")
    session = _same([str(path)], monkeypatch, order=str(order))
    assert session.parallel_fallback is not None


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=traces())
def test_generated_traces_give_the_same_findings_split(lines, tmp_path_factory) -> None:
    """Random interleavings of tasks (nest bursts, out-of-order releases, irq events, lost events,
    bad lines): the split, its parts checked in this process, against one checker."""
    _same_in_process(lines, tmp_path_factory)


def _same_in_process(lines: list[str], tmp_path_factory) -> list[CheckSession]:
    """`lines` checked by one process, then split in 2 and 3 parts mapped in this process: the
    same result each time; the split sessions."""
    path = tmp_path_factory.mktemp("gen") / "t.lt"
    path.write_text("\n".join(lines) + "\n")
    expected = _visible(_check([str(path)], 1))
    sessions = []
    real = jobs.run_pool, jobs.stream_pool, jobs.stop_streams, jobs.REPLAY_LOCALLY
    jobs.REPLAY_LOCALLY = True
    jobs.run_pool = lambda options, groups, summary=False: [jobs.map_shards(options, group, summary=summary)
                                                            for group in groups]
    jobs.stream_pool = lambda options, groups, summary=False: [_InProcess(jobs.map_shards(options, group,
                                                                                          summary=summary))
                                                               for group in groups]
    jobs.stop_streams = lambda streams: None
    try:
        for n in (2, 3):
            result = _check([str(path)], n)
            assert _visible(result) == expected
            sessions.append(result[3])
    finally:
        jobs.run_pool, jobs.stream_pool, jobs.stop_streams, jobs.REPLAY_LOCALLY = real
    return sessions


#: tasks for `ordered_traces`: both parts of a two-way split own some (`jobs.owner`)
_GEN_TASKS = ["T1", "T2", "T3", "T4", "T5", "kworker/0:1/7"]
#: lock classes for `ordered_traces`, in the order tasks mostly take them
_GEN_LOCKS = ["A", "B", "C", "D", "&mm->lock", "E"]


@st.composite
def _section(draw, task: str) -> list[str]:
    """One stretch of a task's work: maybe in an irq context, locks taken mostly in one global
    order (sometimes not), in every mode, then released in order or not."""
    lines = []
    context = draw(st.sampled_from(["", "", "", "hardirq", "softirq", "irqs-off", "softirqs-off"]))
    if context in ("hardirq", "softirq"):
        lines.append(f"{task} {context}-enter")
    elif context:
        lines.append(f"{task} {context}")
    picks = draw(st.lists(st.integers(0, len(_GEN_LOCKS) - 1), unique=True, min_size=1, max_size=4))
    if draw(st.integers(0, 7)):
        picks.sort()  # the global order, mostly: most examples are clean
    taken = []
    for i in picks:
        lock = _GEN_LOCKS[i] + draw(st.sampled_from(["", "", "@1", "@2"]))
        mode = draw(st.sampled_from(["", "", "", " read", " rread", " try", " nocheck", " subclass=1"]))
        if taken and draw(st.integers(0, 9)) == 0:
            mode += f" nest={taken[0]}"
        lines.append(f"{task} acquire {lock}{mode} at=site{draw(st.integers(0, 3))}+0x1/0x8")
        taken.append(lock)
    if draw(st.integers(0, 3)) == 0:
        taken = draw(st.permutations(taken))  # out-of-order releases: what is above is re-acquired
    else:
        taken.reverse()
    lines += [f"{task} release {lock}" for lock in taken]
    if context in ("hardirq", "softirq"):
        lines.append(f"{task} {context}-exit")
    elif context == "irqs-off":
        lines.append(f"{task} irqs-on")
    elif context:
        lines.append(f"{task} softirqs-on")
    return lines


@st.composite
def ordered_traces(draw) -> list[str]:
    """Several tasks, each a few `_section`s (sometimes ending in `exit`), interleaved at random:
    mostly traces without findings -- the split's summaries serve those -- with some cycles, irq
    inversions and recursions between tasks of different parts."""
    tasks = draw(st.lists(st.sampled_from(_GEN_TASKS), min_size=2, max_size=5, unique=True))
    queues = {}
    for task in tasks:
        lines = []
        for _ in range(draw(st.integers(1, 4))):
            lines += draw(_section(task))
        if draw(st.integers(0, 4)) == 0:
            lines.append(f"{task} exit")
        queues[task] = lines
    order = draw(st.permutations([task for task in tasks for _ in queues[task]]))
    return [queues[task].pop(0) for task in order]


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=ordered_traces())
def test_generated_multi_task_traces_give_the_same_result_split(lines, tmp_path_factory) -> None:
    """The summaries' merge (or, where they cannot vouch, the exact replay) against one process:
    the same findings, summary, notes and saved graph -- first-seen evidence, which dependency
    closes a cycle, report order."""
    for session in _same_in_process(lines, tmp_path_factory):
        # the exact replay's own limit: a usage bit or chain one part set and the merged checker refused
        assert session.parallel_fallback is None or "in the merged run" in session.parallel_fallback
        event("summaries served" if session.parallel_unsure is None else "replayed exactly")
    path = tmp_path_factory.mktemp("state") / "t.lt"
    path.write_text("\n".join(lines) + "\n")
    _same_state_merged(str(path))


def _same_state_merged(path: str) -> None:
    """Where the summaries of a two-way split serve, the merged checker's state is the one-process
    checker's, beyond what a report shows: the chain cache, the order classes and dependencies were
    added in, the counts of chains validated and cache hits."""
    from lockcheck.lockdep.checker import Checker

    options = SessionOptions(progress=False)
    one, _, _ = CheckSession(options, stderr=io.StringIO()).check([path])
    results = [jobs.map_shards(options, [jobs.Shard(0, path, part, 2)], summary=True) for part in (0, 1)]
    if any(r.unsure is not None or r.fallback is not None for r in results):
        return
    merged = Checker()
    try:
        chains = jobs.merge_summaries(results, merged, lambda name, module: merged.open_trace(False))
    except jobs.Unsure:
        return
    jobs.finish(results, merged, None, sum(r.tasks for r in results), chains)
    assert merged.chain_cache == one.chain_cache
    assert (merged.stats.chains, merged.stats.chain_hits, merged.stats.events) == \
        (one.stats.chains, one.stats.chain_hits, one.stats.events)
    assert list(merged.graph.nx.nodes(data=True)) == list(one.graph.nx.nodes(data=True))
    assert [(cls, list(after.items())) for cls, after in merged.graph.nx.adjacency()] == \
        [(cls, list(after.items())) for cls, after in one.graph.nx.adjacency()]


class _InProcess:
    """A `jobs.MapStream` of a map done in this process (the same candidates, no worker)."""

    def __init__(self, result: jobs.MapResult) -> None:
        self.candidates = result.candidates
        self.records = result.records
        if result.fallback is not None:
            self.candidates = self.records = self._raise(jobs.Fallback(result.fallback))
        elif result.unsure is not None:
            self.candidates = self.records = self._raise(jobs.Unsure(result.unsure))
        self.result = result

    @staticmethod
    def _raise(why: Exception):
        raise why
        yield


def test_the_command_takes_jobs(tmp_path, capsys) -> None:
    path = tmp_path / "abba.lt"
    path.write_text(E2E["abba"])
    assert main(["check", "--jobs", "2", "--format", "json", str(path)]) == 1
    assert json.loads(capsys.readouterr().out)["findings"][0]["kind"] == "circular-dependency"
    graph = tmp_path / "g.json"
    assert main(["graph", "-j", "2", str(path), "-o", str(graph)]) == 0
    assert json.loads(graph.read_text())["classes"]


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_a_bad_jobs_value_is_a_usage_error(value, capsys) -> None:
    assert main(["check", "--jobs", value, "x.lt"]) == 2
    err = capsys.readouterr().err
    assert "not a number of processes" in err and len(err.strip().splitlines()) == 1


#: a check on a Dask LocalCluster, run in a child process: Dask's event loop and the asyncio locks it
#: leaves behind must not meet the pytest plugin's tests that walk every live lock (tests/test_plugin_deadlock.py)
_DASK_CHECK = """
import io, json, sys
import distributed
from lockcheck.commands.check import CheckSession, SessionOptions
paths = json.loads(sys.argv[1])
with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
    out, err = io.StringIO(), io.StringIO()
    session = CheckSession(SessionOptions(output_format="json", progress=False, dask=cluster.scheduler_address),
                           stderr=err)
    status = session.run(paths, out)
print(json.dumps([status, json.loads(out.getvalue()), err.getvalue(), session.parallel_fallback]))
"""


def _dask_check(paths: list[str]) -> tuple[int, dict, str, object]:
    proc = subprocess.run([sys.executable, "-c", _DASK_CHECK, json.dumps(paths)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    status, doc, err, fallback = json.loads(proc.stdout.strip().splitlines()[-1])
    return status, doc, err, fallback


def test_a_dask_cluster_gives_the_same_findings() -> None:
    """The same map on a Dask LocalCluster (in-process workers), merged here: files in parallel.

    The [test] extra installs pylockdep[dask]'s dependency, so this never skips."""
    paths = sorted(str(p) for p in (ROOT / "tests" / "data" / "examples").glob("*.lt") if p.name != "malformed.lt")
    status, doc, err, fallback = _dask_check(paths)
    assert (status, doc, err) == _check(paths, 1)[:3] and fallback is None


def test_a_dask_cluster_splits_one_file_by_task(tmp_path) -> None:
    path = tmp_path / "t.lt"
    path.write_text(E2E["abcd_chain"] + E2E["rread_cycle"].replace("T1", "T8").replace("T2", "T9"))
    status, doc, err, fallback = _dask_check([str(path)])
    assert (status, doc, err) == _check([str(path)], 1)[:3] and fallback is None


def test_a_dask_scheduler_that_does_not_answer_is_one_line(tmp_path) -> None:
    path = tmp_path / "t.lt"
    path.write_text(E2E["abba"])
    code = ("import sys; from lockcheck import jobs; from lockcheck.commands.cli import main; jobs.cluster.DASK_TIMEOUT = 1; "
            "sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", code, "check", "--dask", "tcp://127.0.0.1:9", str(path)],
                          capture_output=True, text=True, timeout=300)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1
    assert "--dask tcp://127.0.0.1:9: cannot reach the scheduler" in err[0]


def _diff(base: str, new: str, jobs_n: int) -> tuple[str, object]:
    from lockcheck.commands.diff import document, run_diff

    options = SessionOptions(use_pyproject=False)
    result = run_diff(base, new, jobs=jobs_n, options=options)
    return json.dumps(document(result), sort_keys=True), result


def _examples(tmp_path: Path) -> str:
    """The examples folder without its malformed trace (which stops a diff)."""
    folder = tmp_path / "examples"
    folder.mkdir()
    for path in (ROOT / "tests" / "data" / "examples").iterdir():
        if path.name != "malformed.lt":
            (folder / path.name).write_bytes(path.read_bytes())
    return str(folder)


@pytest.mark.parametrize("base, new", [
    ("traces/abba.lt", "EXAMPLES"),
    ("tests/data/examples/abba.lt", "tests/data/examples/abcd-chain.lt"),
    ("tests/data/examples/subclass-inversion.lt", "tests/data/examples/mm_take_all_locks-nest.lt"),
])
def test_diff_split_gives_the_same_result(base, new, tmp_path) -> None:
    """`diff --jobs 2`: both sides mapped by workers at once, BASE and NEW's two checkers fed by merges."""
    new = _examples(tmp_path) if new == "EXAMPLES" else str(ROOT / new)
    expected, _ = _diff(str(ROOT / base), new, 1)
    got, result = _diff(str(ROOT / base), new, 2)
    assert got == expected
    assert result.base.split is not None and result.new.split is not None


def test_diff_split_against_a_saved_graph(tmp_path, capsys) -> None:
    graph = tmp_path / "base.json"
    assert main(["graph", str(ROOT / "traces" / "abba.lt"), "-o", str(graph), "--quiet"]) == 0
    runs = []
    examples = _examples(tmp_path)
    for n in ("1", "2"):
        status = main(["diff", "--format", "json", "--jobs", n, str(graph), examples])
        runs.append((status, capsys.readouterr()))
    assert runs[0] == runs[1] and runs[0][0] == 1


def test_runs_inside_one_file_stay_runs_split(tmp_path, monkeypatch, capsys) -> None:
    """A `convert`ed file holds one run per input (`#lockcheck-run`): every part starts each run."""
    out = tmp_path / "runs.lt"
    sources = [ROOT / "traces" / "abba.lt"] + [ROOT / "tests" / "data" / "examples" / f"{name}.lt" for name in
                                               ("abcd-chain", "irq-inconsistent", "trylock", "unlock-imbalance")]
    assert main(["convert", *map(str, sources), "-o", str(out)]) == 0
    capsys.readouterr()
    session = _same([str(out)], monkeypatch)
    assert session.parallel_fallback is None
    _, doc, *_ = _check([str(out)], 3)
    assert doc["stats"]["tasks"] == _check([str(out)], 1)[1]["stats"]["tasks"]


@pytest.mark.slow
def test_a_capture_is_checked_in_one_process_and_its_idle_tasks_forget_alike(monkeypatch) -> None:
    """A capture's reader and annotator follow every task (docs/cli.md says why it is not split):
    `--jobs 2` checks it in one process, with the reason, and gives what `--jobs 1` gives -- here
    with its idle tasks forgetting their recent locks after 64 events, so that forgetting runs."""
    from lockcheck.lockdep import trace_runs

    monkeypatch.setattr(trace_runs, "IDLE_EVENTS", 64)
    capture = ROOT / "tests" / "data" / "kernel-6.1" / "clean" / "trace.ftrace.xz"
    session = _same([str(capture)], monkeypatch, pure_too=False)
    assert session.parallel_fallback is not None and "annotations apply" in session.parallel_fallback
