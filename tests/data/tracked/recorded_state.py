"""What the two workloads here (scenario.py, async_scenario.py) print, written once: the events
the Python path was handed (`fed`, counted from import on) and everything the recorder holds
after the run, as JSON for tests/test_trackedcore.py to compare across the compiled and the
pure hit path."""

import io
import json
import sys

from lockcheck.python import tracked
from lockcheck.python.recorder import Recorder

fed = [0]
_feed = Recorder.feed


def _counting_feed(self, ev, frame=None, orphan=None):
    fed[0] += 1
    return _feed(self, ev, frame, orphan)


Recorder.feed = _counting_feed


def print_recorded(rec, chain_keys=False):
    """The report, findings, graph, statistics and held stacks of `rec`; `chain_keys`: each
    task's chain key and each held lock's read mode too (asyncio's run leaves no stale key)."""
    out = io.StringIO()
    rec.render(out)
    graph = rec.checker.graph.nx
    deps = sorted(
        (src, dst, attrs.get("dep"), attrs.get("distance"), repr(attrs.get("evidence")), repr(attrs.get("held")))
        for src, dst, attrs in graph.edges(data=True)
    )
    usage = sorted((cls, data.get("usage")) for cls, data in graph.nodes(data=True))
    stats = rec.checker.stats
    if chain_keys:
        held = sorted((key, state.chain_key, [(h.cls, h.instance, h.read, h.event.at, h.event.comm)
                                              for h in state.held])
                      for key, state in rec.checker.tasks.items())
    else:
        held = sorted((key, [(h.cls, h.instance, h.event.at, h.event.comm) for h in state.held])
                      for key, state in rec.checker.tasks.items())
    json.dump({
        "core": tracked._core is not None,
        "report": out.getvalue(),
        "findings": [(f.kind, context) for f, context in rec.findings],
        "dependencies": deps,
        "usage": usage,
        "stats": [stats.events, stats.chain_hits, stats.chains],
        "held": held,
        "fed": fed[0],
    }, sys.stdout)
