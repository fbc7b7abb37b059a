"""Fast tests of the benchmark trace generator (benchmarks/gen_trace.py).

The generator promises CLEAN traces: a lockdep-faithful checker reports
nothing on them.  These tests check that promise with an independent,
deliberately simple simulation of held-lock stacks (no lockcheck code),
and, when the project's reader exists, that the reader accepts the output.
"""

from __future__ import annotations

import graphlib
import importlib.util
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GEN = ROOT / "benchmarks" / "gen_trace.py"


def _load_gen():
    spec = importlib.util.spec_from_file_location("gen_trace", GEN)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_trace", module)
    spec.loader.exec_module(module)
    return module


gen_trace = _load_gen()

SMALL = dict(events=6000, classes=300, paths=200, tasks=12)


def generate(seed: int = 1, bad: int = 0, **kw) -> str:
    params = {**SMALL, **kw}
    out = io.StringIO()
    gen_trace.generate(out, params["events"], seed, params["classes"], params["paths"], params["tasks"], bad)
    return out.getvalue()


# -- an independent model of the `.lt` lines the generator writes --------------------------
_KEYS = ("subclass", "nest", "at", "ts", "cpu")


def parse_line(line: str) -> dict:
    fields = line.split()
    ev = {"task": fields[0], "op": fields[1], "mode": "write", "try": False, "subclass": 0, "nest": None}
    rest = fields[2:]
    if ev["op"] in ("acquire", "release", "contended", "acquired", "free"):
        ev["lock"] = rest.pop(0)
        ev["class"] = ev["lock"].split("@", 1)[0]
    for tok in rest:
        if "=" in tok:
            key, value = tok.split("=", 1)
            assert key in _KEYS, line
            ev[key] = int(value) if key in ("subclass", "cpu") else value
        elif tok in ("read", "rread"):
            ev["mode"] = tok
        elif tok == "try":
            ev["try"] = True
        else:
            raise AssertionError(f"unexpected token {tok!r} in {line!r}")
    return ev


def events(text: str):
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            yield parse_line(line)


def simulate(text: str):
    """Check the held-lock discipline; return the class dependency edges (lockdep's, widened).

    Edges: every held lock's validation class -> the acquired one, for every
    non-trylock acquisition (lockdep adds a subset of these whose closure is
    the same); same-class nesting under `nest=` adds none (lockdep returns 2).
    """
    held: dict[str, list[dict]] = {}
    edges: set[tuple[str, str]] = set()
    for ev in events(text):
        stack = held.setdefault(ev["task"], [])
        op = ev["op"]
        if op == "acquire":
            vclass = ev["class"] + (f"/{ev['subclass']}" if ev["subclass"] else "")
            assert all(h["lock"] != ev["lock"] for h in stack), f"self-deadlock {ev}"
            if ev["nest"] is not None:
                assert any(h["lock"] == ev["nest"] for h in stack), f"nest lock not held: {ev}"
            for h in stack:
                if h["vclass"] == vclass:
                    both_rread = h["mode"] == "rread" and ev["mode"] == "rread"
                    assert ev["nest"] is not None or both_rread or ev["try"], f"recursive locking: {ev}"
            if not ev["try"]:
                for h in stack:
                    if h["vclass"] != vclass:
                        edges.add((h["vclass"], vclass))
            stack.append({**ev, "vclass": vclass})
        elif op == "release":
            idx = [i for i, h in enumerate(stack) if h["lock"] == ev["lock"]]
            assert idx, f"release of a lock not held: {ev}"
            gone = stack.pop(idx[-1])
            for h in stack:  # a nest lock is never released before the locks it serialises
                assert h["nest"] != gone["lock"], f"nest lock released first: {ev}"
        elif op in ("contended", "acquired"):
            assert any(h["lock"] == ev["lock"] for h in stack), ev
        elif op == "exit":
            assert not stack, f"exit holding locks: {ev}"
    for task, stack in held.items():
        assert not stack, f"{task} ends holding {[h['lock'] for h in stack]}"
    return edges


def has_cycle(edges) -> bool:
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(b, set()).add(a)
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError:
        return True
    return False


# -- tests -------------------------------------------------------------------------------------
def test_deterministic_for_a_seed():
    assert generate(seed=7) == generate(seed=7)
    assert generate(seed=7) != generate(seed=8)


def test_cli_matches_library_and_counts_events(tmp_path):
    out = tmp_path / "t.lt"
    meta = tmp_path / "t.json"
    subprocess.run([sys.executable, str(GEN), "--events", "2000", "--seed", "3", "--classes", "300",
                    "--paths", "200", "--tasks", "12", "-o", str(out), "--meta", str(meta)], check=True)
    text = out.read_text()
    assert text == generate(seed=3, events=2000)
    import json
    n = json.loads(meta.read_text())["events"]
    assert n == sum(1 for _ in events(text))
    assert 2000 <= n < 2000 + 12 * 60  # the drain at the end adds a little


def test_gzip_output(tmp_path):
    import gzip
    out = tmp_path / "t.lt.gz"
    subprocess.run([sys.executable, str(GEN), "--events", "1000", "--classes", "300", "--paths", "200",
                    "--tasks", "12", "--gzip", "-o", str(out)], check=True)
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    assert gzip.decompress(out.read_bytes()).decode() == generate(seed=1, events=1000)


def test_clean_discipline_and_global_order():
    text = generate(seed=1)
    edges = simulate(text)
    assert edges and not has_cycle(edges)
    # the generator's own ranks: every dependency goes up in rank (subclass 1 sits just above its class)
    world = gen_trace.World(1, SMALL["classes"], SMALL["paths"], SMALL["tasks"])

    def rank(vclass: str) -> float:
        name, _, sub = vclass.rpartition("/") if re.search(r"/\d$", vclass) else (vclass, "", "")
        return world.rank[name] + (0.5 if sub else 0.0)

    bad = [(a, b) for a, b in edges if not rank(a) < rank(b)]
    assert not bad, bad[:5]


def test_realism_features_present():
    text = generate(seed=2, events=20000)
    evs = list(events(text))
    acq = [e for e in evs if e["op"] == "acquire"]
    assert any(e["try"] for e in acq)
    assert any(e["mode"] == "read" for e in acq) and any(e["mode"] == "rread" for e in acq)
    assert any(e["subclass"] == 1 for e in acq)
    assert any(e["nest"] for e in acq)
    assert any("at" in e for e in acq) and any("ts" in e for e in evs)
    assert any("@0xffff" in e["lock"] for e in acq) and any("@" not in e["lock"] for e in acq)
    assert len({e["task"] for e in evs}) >= 12
    # nest bursts: 5..40 same-class instances under one nest lock
    bursts: dict[tuple, set] = {}
    for e in acq:
        if e["nest"]:
            bursts.setdefault((e["task"], e["nest"]), set()).add(e["lock"])
    assert bursts and max(len(v) for v in bursts.values()) >= 5
    # depth up to 8 (plus bursts), interleaving of tasks
    switches = sum(1 for a, b in zip(evs, evs[1:]) if a["task"] != b["task"])
    assert switches > len(evs) // 10


@pytest.mark.parametrize("bad", [
    "T acquire A@1\nT acquire A@2\nT release A@2\nT release A@1\n",  # unannotated same class
    "T acquire S\nT acquire N@1 nest=X\nT release N@1\nT release S\n",  # nest lock not held
    "T acquire S\nT acquire N@1 nest=S\nT release S\nT release N@1\n",  # nest lock released first
    "T acquire A\nT release B\n",  # release of what is not held
    "T acquire A\nT exit\nT release A\n",  # exit holding a lock
    "T acquire A\n",  # held at the end
])
def test_simulator_rejects_dirty_traces(bad):
    with pytest.raises(AssertionError):
        simulate(bad)


def test_bad_injects_an_inversion():
    clean = simulate(generate(seed=5))
    assert not has_cycle(clean)
    edges = simulate(generate(seed=5, bad=1))
    assert has_cycle(edges)
    bad_edges = {(a, b) for a, b in edges if (b, a) in edges}
    assert bad_edges


def test_reader_accepts_generated_trace(tmp_path):
    from lockcheck import readers

    path = tmp_path / "t.lt"
    text = generate(seed=4, events=3000)
    path.write_text(text)
    got = list(readers.read(str(path)))
    expected = list(events(text))
    assert len(got) == len(expected)
    for ev, exp in zip(got, expected):
        assert ev.task == exp["task"] and ev.op == exp["op"]
        if "lock" in exp:
            cls, _, inst = exp["lock"].partition("@")
            assert ev.lock == cls and ev.instance == (inst or None)
        if exp["op"] == "acquire":
            assert ev.trylock == exp["try"] and ev.subclass == exp["subclass"]
            assert ev.mode == {"write": 0, "read": 1, "rread": 2}[exp["mode"]]
            if exp["nest"]:
                ncls, _, ninst = exp["nest"].partition("@")
                assert ev.nest == (ncls, ninst or None)
