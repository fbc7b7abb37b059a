"""Saving and loading dependency graphs: JSON (ours), GraphML (networkx), DOT (pictures).

The JSON layout is lockcheck's stable, versioned graph format, documented
in docs/graph-format.md; a saved graph is what `check --baseline` and
`diff` read back, so runs on different machines and days can be merged::

    {"lockcheck-graph": 1,
     "generator": "lockcheck 0.1.0",
     "classes": [{"name": "A", "usage": ["INITIAL USE"], "usage_traces": {...}}],
     "dependencies": [{"from": "A", "to": "B", "dep": ["EN"], "distance": 1,
                       "evidence": {"file": "t.lt", "line": 3, "task": "T1"}, ...}],
     "findings": [{"kind": "circular-dependency", "cycle": ["A", "B"], ...}]}

Classes and dependencies are written in first-seen order and read back in
that order, so a loaded graph searches dependencies in the same order as
the graph that was saved (lockdep's list walk).

GraphML flattens every attribute to a scalar (`evidence_file`,
`evidence_line`, ... and `usage_traces` as a JSON string) so other tools
read it; DOT is for people: render it with `dot -Tsvg`.

>>> from lockcheck.lockdep.graph import DepGraph, DEP_EN
>>> g = DepGraph(); _ = g.add_dependency("A", "B", DEP_EN, Evidence("t.lt", 3, "T1"))
>>> graph_from_json(graph_to_json(g)).nx.edges["A", "B"]["evidence"]
Evidence(file='t.lt', line=3, task='T1', at=None, ts=None)
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from typing import Any, Iterable, Optional, TextIO

import networkx as nx

from lockcheck.util.version import __version__
from lockcheck.errors import TraceError, UsageError
from lockcheck.util.escape import dot_lines, dot_string, xml_text, xml_untext
from lockcheck.util.output import stdout_stream, write_file
from lockcheck.lockdep.findings import CIRCULAR, Evidence, Finding
from lockcheck.lockdep.graph import DEP_NAMES, DepGraph, dep_text
from lockcheck.store.schema import (MAX_DEP, MAX_USAGE, SchemaError, check_class_props, check_evidence, check_int,
                                    check_json)
from lockcheck.util.jsontext import JsonError, loads, locate
from lockcheck.util.textfile import read_text
from lockcheck.lockdep.usage import USED_READ, usage_str
from lockcheck.lockdep.rules import LD_LOCK_NORMAL, LD_WAIT_INV, print_waits
from lockcheck.readers.lockdep_keys import LOCK_TYPE_NAMES, LOCK_TYPES, format_wait, parse_wait

#: the value of the `lockcheck-graph` key: bump on an incompatible change
SCHEMA_VERSION = 1
FORMATS = ("json", "graphml", "dot")
#: the graph attribute that says a GraphML file's names and strings are `xml_text`-escaped
ESCAPE_MARK = "backslash-u"

_DEP_BITS = {name: bit for bit, name in DEP_NAMES.items()}
_USAGE_BITS = {usage_str(bit): bit for bit in range(USED_READ + 1)}
_EVIDENCE_KEYS = ("file", "line", "task", "at", "ts")


# -- choosing a format -------------------------------------------------------------


def format_of(path: str, fmt: Optional[str] = None) -> str:
    """`json`, `graphml` or `dot`, from `fmt` or the file's extension."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise UsageError(f"unknown graph format {fmt!r} (choose from {', '.join(FORMATS)})")
        return fmt
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext in ("gv", "dot"):
        return "dot"
    if ext in ("graphml", "xml"):
        return "graphml"
    if ext == "json" or path == "-":
        return "json"
    raise UsageError(f"{path}: cannot tell the graph format from the extension (use .json, .graphml or .dot)")


def save_graph(graph: DepGraph, path: str, findings: Iterable[Finding] = (), fmt: Optional[str] = None,
               stdout: Optional[TextIO] = None) -> None:
    """Write `graph` to `path` (`-`: `stdout`, default sys.stdout) in the format its extension names.

    `findings` are the problems the run reported: JSON keeps them (so a
    baseline remembers the cycles it already had) and DOT draws them.
    """
    kind = format_of(path, fmt)
    findings = list(findings)
    buf = io.StringIO()
    if kind == "json":
        json.dump(graph_to_json(graph, findings), buf, indent=1, allow_nan=False)
        buf.write("\n")
    elif kind == "graphml":
        buf.write(graph_to_graphml(graph))
    else:
        write_dot(graph, buf, findings)
    if path == "-":
        out = stdout_stream(stdout if stdout is not None else sys.stdout)
        out.write(buf.getvalue())
        out.flush()  # a closed pipe fails here, before anything says the graph was written
        return
    write_file(path, buf.getvalue())  # atomic: the old graph survives a full disk or a kill


def load_graph(path: str) -> DepGraph:
    """Read a graph saved as JSON or GraphML (told apart by the first character)."""
    return load_graph_with_findings(path)[0]


def load_graph_with_findings(path: str) -> tuple[DepGraph, list[dict[str, Any]]]:
    """The graph and the `findings` records saved with it (JSON only; [] otherwise).

    The file is checked against the schema before anything is built
    (`lockcheck.store.schema`); every problem is one TraceError with the
    line and column of the offending value.
    """
    text = read_text(path, "graph")
    head = text.lstrip()[:1]
    if head == "<":
        return graph_from_graphml(text, path), []
    try:
        doc = loads(text)
    except JsonError as err:
        raise TraceError(path, err.line, err.col, f"not a lockcheck graph: {err.message}") from None
    graph = graph_from_json(doc, path, text)
    return graph, list(doc.get("findings", []))


def is_graph_file(path: str) -> bool:
    """Whether `path` is a saved graph (JSON with the schema key, or GraphML) rather than a trace."""
    if not os.path.isfile(path):
        return False
    ext = os.path.splitext(path)[1].lower()
    if ext in (".json", ".graphml"):
        try:
            with open(path, encoding="utf-8", errors="replace") as stream:
                head = stream.read(4096)
        except OSError:
            return False
        return ext == ".graphml" or '"lockcheck-graph"' in head
    return False


# -- JSON ----------------------------------------------------------------------------


def graph_to_json(graph: DepGraph, findings: Iterable[Finding] = ()) -> dict[str, Any]:
    """The graph as the documented JSON document (plain Python objects)."""
    classes = []
    for name, data in graph.nx.nodes(data=True):
        usage = data.get("usage", 0)
        entry: dict[str, Any] = {"name": name, "usage": [usage_str(b) for b in range(USED_READ + 1) if usage >> b & 1]}
        traces = data.get("usage_traces") or {}
        if traces:
            entry["usage_traces"] = {usage_str(bit): ev.to_json() for bit, ev in sorted(traces.items())}
        entry.update(class_props_json(data))
        classes.append(entry)
    deps = []
    for prev, nxt, data in graph.nx.edges(data=True):
        entry = {
            "from": prev,
            "to": nxt,
            "dep": [name for bit, name in sorted(DEP_NAMES.items(), reverse=True) if data["dep"] & bit],
            "distance": data.get("distance", 1),
            "evidence": data["evidence"].to_json(),
        }
        if data.get("held") is not None:
            entry["held"] = data["held"].to_json()
        if data.get("origin") is not None:
            entry["origin"] = data["origin"]
        deps.append(entry)
    doc: dict[str, Any] = {
        "lockcheck-graph": SCHEMA_VERSION,
        "generator": f"lockcheck {__version__}",
        "classes": classes,
        "dependencies": deps,
    }
    recorded = [finding_record(f) for f in findings]
    if recorded:
        doc["findings"] = recorded
    return doc


def finding_record(finding: Finding) -> dict[str, Any]:
    """What a saved graph remembers of a finding: enough to recognise it again (`Finding.key`)."""
    record: dict[str, Any] = {"kind": finding.kind, "lock": finding.lock, "held": finding.held,
                              "location": finding.location}
    if finding.cycle:
        record["cycle"] = list(finding.cycle)
    dedup = finding.details.get("dedup")
    if isinstance(dedup, (str, int, float)):
        record["dedup"] = dedup
    if finding.report is not None:  # keyed as kernel reports are grouped
        record["report_key"] = json.loads(json.dumps(finding.key()))
    return record


def record_key(record: dict[str, Any]) -> tuple:
    """`Finding.key()` of a saved finding record."""
    if isinstance(record.get("report_key"), list):
        return _tuples(record["report_key"])
    cycle = record.get("cycle")
    if cycle:
        return Finding(kind=record["kind"], task="", lock=record.get("lock", ""), location="", cycle=list(cycle)).key()
    return (record["kind"], record.get("lock"), record.get("held"), record.get("dedup"))


def record_finding(record: dict[str, Any], path: str) -> Optional[Finding]:
    """A saved finding record as a finding of the graph file `path` (its key is `record_key`'s);
    None for a kernel report's record, whose layout the record does not keep."""
    if isinstance(record.get("report_key"), list) or not isinstance(record.get("kind"), str):
        return None
    details: dict[str, Any] = {"saved_in": path}
    if "dedup" in record:
        details["dedup"] = record["dedup"]
    cycle = record.get("cycle")
    return Finding(kind=record["kind"], task="?", lock=str(record.get("lock") or ""), held=record.get("held"),
                   location=str(record.get("location") or path), cycle=list(cycle) if cycle else None,
                   details=details)


def _tuples(value: Any) -> Any:
    """JSON lists back into the tuples a key is made of."""
    return tuple(_tuples(item) for item in value) if isinstance(value, list) else value


def graph_from_json(doc: Any, file: str = "<graph>", text: Optional[str] = None) -> DepGraph:
    """Build a DepGraph from a JSON document; `TraceError` naming the bad entry otherwise.

    `text`, the document's source, lets the error give the line and column
    of the value; without it the error names the value's path only.
    """
    try:
        check_json(doc)
    except SchemaError as err:
        line, col = locate(text, err.path) if text is not None else (None, None)
        raise TraceError(file, line, col, str(err)) from None
    graph = DepGraph()
    for entry in doc.get("classes", []):
        name = entry["name"]
        graph.add_class(name)
        node = graph.nx._node[name]
        node["usage"] = _usage_mask(entry.get("usage", 0))
        for bit_name, ev in (entry.get("usage_traces") or {}).items():
            node["usage_traces"][_USAGE_BITS[bit_name]] = Evidence.from_json(ev)
        set_class_props(node, entry.get("wait"), entry.get("type"))
    for entry in doc.get("dependencies", []):
        held = entry.get("held")
        graph.add_dependency(entry["from"], entry["to"], _dep_mask(entry["dep"]), Evidence.from_json(entry["evidence"]),
                             distance=entry.get("distance", 1),
                             held=Evidence.from_json(held) if held is not None else None,
                             origin=entry.get("origin"))
    return graph


def class_props_json(node: dict) -> dict[str, str]:
    """A node's `wait` (`OUTER:INNER`, as the trace gave it) and `type` (when not normal), the keys
    of a saved class; {} for a class whose trace said neither (a graph without them stays as it was)."""
    props: dict[str, str] = {}
    if node.get("wait") is not None:
        props["wait"] = format_wait(node["wait"])
    if node.get("lock_type") is not None:
        props["type"] = LOCK_TYPE_NAMES[node["lock_type"][0]]
    return props


def set_class_props(node: dict, wait: Optional[str], lock_type: Optional[str]) -> None:
    """A saved class's checked `wait` and `type` as the checker keeps them on a node
    (`lockcheck.lockdep.waits`: `wait`, `waits`, `lock_type`); nothing for a key left out."""
    pair = parse_wait(wait) if wait is not None else None
    if pair is not None and pair[1]:
        node["wait"] = pair
        node["waits"] = print_waits(*pair)
    if lock_type is not None and LOCK_TYPES[lock_type] != LD_LOCK_NORMAL:
        node["lock_type"] = (LOCK_TYPES[lock_type], pair[1] if pair is not None else LD_WAIT_INV)


def _dep_mask(value: Any) -> int:
    """A checked `dep`: an integer mask or a list of type names."""
    if isinstance(value, int):
        return value
    mask = 0
    for name in value:
        mask |= _DEP_BITS[name]
    return mask


def _usage_mask(value: Any) -> int:
    """A checked `usage`: an integer mask or a list of usage bit names."""
    if isinstance(value, int):
        return value
    mask = 0
    for name in value:
        mask |= 1 << _USAGE_BITS[name]
    return mask


# -- GraphML -------------------------------------------------------------------------


def graph_to_graphml(graph: DepGraph) -> str:
    """GraphML text with every attribute flattened to a string or number."""
    flat = nx.DiGraph()
    flat.graph["lockcheck_graph"] = SCHEMA_VERSION
    # names and strings go through xml_text (controls as `\uXXXX`, which XML cannot hold): the
    # graph says so, and graph_from_graphml reads them back (older files have no escapes)
    flat.graph["lockcheck_escape"] = ESCAPE_MARK
    for name, data in graph.nx.nodes(data=True):
        traces = {usage_str(bit): ev.to_json() for bit, ev in sorted((data.get("usage_traces") or {}).items())}
        flat.add_node(xml_text(name), usage=data.get("usage", 0), usage_traces=json.dumps(traces, sort_keys=True),
                      **class_props_json(data))
    for prev, nxt, data in graph.nx.edges(data=True):
        attrs: dict[str, Any] = {"dep": data["dep"], "dep_text": dep_text(data["dep"]),
                                 "distance": data.get("distance", 1)}
        for prefix in ("evidence", "held"):
            ev = data.get(prefix)
            if ev is None:
                continue
            for key, value in ev.to_json().items():
                # GraphML attributes are scalars: a Python stack goes as its JSON text
                attrs[f"{prefix}_{key}"] = json.dumps(value) if key == "stack" else value
        if data.get("origin") is not None:
            attrs["origin"] = data["origin"]
        flat.add_edge(xml_text(prev), xml_text(nxt),
                      **{key: xml_text(value) if isinstance(value, str) else value for key, value in attrs.items()})
    buf = io.BytesIO()
    nx.write_graphml(flat, buf, encoding="utf-8")
    return buf.getvalue().decode("utf-8")


def graph_from_graphml(text: str, file: str = "<graph>") -> DepGraph:
    """Read back what `graph_to_graphml` wrote, checking every attribute as the JSON schema does.

    networkx converts attributes by their declared GraphML types; a wrong
    type, a missing evidence key or a number out of range is one
    TraceError at the element's line (found in the text by its id).
    """
    try:
        flat = nx.read_graphml(io.BytesIO(text.encode("utf-8")), node_type=str)
    except Exception as err:  # noqa: BLE001 - networkx raises bare XML, key and value errors for bad input
        line, col = getattr(err, "position", (None, None))
        if line is not None:
            col += 1  # expat counts columns from 0
        else:  # a value networkx could not convert: a number of thousands of digits, or no place at all
            long_number = re.search(r"[0-9]{1000,}", text)
            line, col = _offset_position(text, long_number.start()) if long_number else (1, 1)
        message = str(err).split("\n")[0].split(": value has")[0][:200] or type(err).__name__
        raise TraceError(file, line, col, f"not a GraphML graph: {message}") from None
    if flat.graph.get("lockcheck_escape") == ESCAPE_MARK:
        flat = _unescaped(flat)
    graph = DepGraph()
    for name, data in flat.nodes(data=True):
        try:
            _checked_node(graph, name, data)
        except SchemaError as err:
            line, col = _xml_position(text, f'<node id="{_xml_attr(name)}"')
            raise TraceError(file, line, col, f"node {name!r}: {err}") from None
    for prev, nxt, data in flat.edges(data=True):
        try:
            _checked_edge(graph, prev, nxt, data)
        except SchemaError as err:
            line, col = _xml_position(text, f'source="{_xml_attr(prev)}" target="{_xml_attr(nxt)}"')
            raise TraceError(file, line, col, f"edge {prev!r} -> {nxt!r}: {err}") from None
    return graph


def _unescaped(flat: nx.DiGraph) -> nx.DiGraph:
    """The graph `graph_to_graphml` escaped, with its names and strings as they were."""
    plain = nx.DiGraph()
    plain.graph.update(flat.graph)
    for name, data in flat.nodes(data=True):
        plain.add_node(xml_untext(name), **data)
    for prev, nxt, data in flat.edges(data=True):
        plain.add_edge(xml_untext(prev), xml_untext(nxt),
                       **{key: xml_untext(value) if isinstance(value, str) else value for key, value in data.items()})
    return plain


def _checked_node(graph: DepGraph, name: str, data: dict) -> None:
    graph.add_class(name)
    node = graph.nx._node[name]
    node["usage"] = check_int(data.get("usage", 0), ["usage"], 0, MAX_USAGE)
    raw = data.get("usage_traces") or "{}"
    if not isinstance(raw, str):
        raise SchemaError(["usage_traces"], "expected a JSON object in a string")
    try:
        traces = loads(raw)
    except JsonError as err:
        raise SchemaError(["usage_traces"], f"not JSON: {err.message}") from None
    if not isinstance(traces, dict):
        raise SchemaError(["usage_traces"], "expected a JSON object of usage bit -> evidence")
    for bit_name, ev in traces.items():
        if bit_name not in _USAGE_BITS:
            raise SchemaError(["usage_traces", bit_name], f"unknown usage bit {bit_name!r}")
        check_evidence(ev, ["usage_traces", bit_name])
        node["usage_traces"][_USAGE_BITS[bit_name]] = Evidence.from_json(ev)
    check_class_props(data, [])  # (the caller names the node)
    set_class_props(node, data.get("wait"), data.get("type"))


def _checked_edge(graph: DepGraph, prev: str, nxt: str, data: dict) -> None:
    if "evidence_file" not in data:
        raise SchemaError(["evidence_file"], "missing")
    evidence = _flat_evidence(data, "evidence")
    held = _flat_evidence(data, "held")
    origin = data.get("origin")
    if origin is not None and not isinstance(origin, str):
        raise SchemaError(["origin"], "expected a string")
    graph.add_dependency(prev, nxt, check_int(data.get("dep"), ["dep"], 1, MAX_DEP), evidence,
                         distance=check_int(data.get("distance", 1), ["distance"], 1), held=held, origin=origin)


def _flat_evidence(data: dict, prefix: str) -> Optional[Evidence]:
    if f"{prefix}_file" not in data:
        return None
    doc = {key: data[f"{prefix}_{key}"] for key in _EVIDENCE_KEYS if f"{prefix}_{key}" in data}
    if f"{prefix}_stack" in data:
        try:
            doc["stack"] = json.loads(data[f"{prefix}_stack"])
        except (TypeError, ValueError):
            raise SchemaError([f"{prefix}_stack"], "expected a JSON list of frames") from None
    check_evidence(doc, [prefix])
    return Evidence.from_json(doc)


def _xml_attr(value: str) -> str:
    """`value` as an XML attribute writes it (what to search the text for)."""
    from xml.sax.saxutils import quoteattr

    return quoteattr(xml_text(value))[1:-1]


def _xml_position(text: str, needle: str) -> tuple[int, int]:
    """Where the element containing `needle` starts (1, 1 when it cannot be found)."""
    at = text.find(needle)
    return _offset_position(text, text.rfind("<", 0, at + 1)) if at >= 0 else (1, 1)


def _offset_position(text: str, offset: int) -> tuple[int, int]:
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


# -- DOT -----------------------------------------------------------------------------


def write_dot(graph: DepGraph, out: TextIO, findings: Iterable[Finding] = ()) -> None:
    """Graphviz DOT: classes as boxes, dependencies as arrows labelled with type and first sighting.

    Dependencies on a cycle (a strongly connected component of the graph,
    as a merged graph may have, or a reported circular finding) are red;
    the dependency a circular finding refused to add is drawn dashed.
    """
    hot_edges: set[tuple[str, str]] = set()
    closing: list[tuple[str, str, Finding]] = []
    for component in nx.strongly_connected_components(graph.nx):
        if len(component) > 1:
            hot_edges.update((u, v) for u, v in graph.nx.subgraph(component).edges)
    for finding in findings:
        if finding.kind == CIRCULAR and finding.cycle and finding.held is not None:
            cycle = list(finding.cycle)
            hot_edges.update(zip(cycle, cycle[1:]))
            closing.append((finding.held, finding.lock, finding))
    hot_nodes = {n for edge in hot_edges for n in edge} | {n for c in closing for n in c[:2]}
    out.write("digraph lockcheck {\n")
    out.write('  graph [rankdir=LR, fontname="monospace", label="lockcheck dependency graph: '
              'A -> B means B was taken while A was held"];\n')
    out.write('  node [shape=box, fontname="monospace"];\n  edge [fontname="monospace", fontsize=10];\n')
    for name in graph.nx.nodes:
        style = ', color=red, penwidth=2' if name in hot_nodes else ""
        waits = graph.nx._node[name].get("waits")
        label = f"{name}-{{{waits}}}" if waits else name  # as the kernel prints a class
        out.write(f"  {dot_string(name)} [label={dot_string(label)}{style}];\n")
    for prev, nxt, data in graph.nx.edges(data=True):
        ev: Evidence = data["evidence"]
        lines = [dep_text(data["dep"]), ev.location] + ([data["origin"]] if data.get("origin") else [])
        style = ", color=red, penwidth=2" if (prev, nxt) in hot_edges else ""
        out.write(f"  {dot_string(prev)} -> {dot_string(nxt)} [label={dot_lines(lines)}{style}];\n")
    for prev, nxt, finding in closing:
        out.write(f"  {dot_string(prev)} -> {dot_string(nxt)} [label={dot_lines([finding.kind, finding.location])}, "
                  f"color=red, fontcolor=red, style=dashed, penwidth=2];\n")
    out.write("}\n")
