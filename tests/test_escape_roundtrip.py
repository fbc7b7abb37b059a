"""One escaping function per output format, round-tripped: any name, every code point class.

GraphML wrote control characters raw (not XML: lockcheck could not read its
own graph back as `--baseline`); DOT escaped quotes but not backslashes, so
a path holding `\\"` closed a label and a crafted one added nodes.  Each
property parses the output back: expat for GraphML (and lockcheck's own
GraphML reader, through `--baseline`), a DOT string reader that follows
Graphviz's rules for DOT.
"""

from __future__ import annotations

import io
import json
import re
import xml.dom.minidom

from hypothesis import given, settings, strategies as st

from lockcheck.commands.cli import main
from lockcheck.store.graphfile import graph_from_graphml, graph_to_graphml, write_dot
from lockcheck.lockdep.graph import DepGraph
from lockcheck.lockdep.findings import Evidence
from lockcheck.util.escape import dot_lines, dot_string, visible, xml_text, xml_untext

#: every code point class: controls, surrogates, private use, unassigned, format, any script
NAMES = st.text(st.characters(codec=None, exclude_categories=()), min_size=1, max_size=12)
#: evidence strings (a trace's path, a task name): text as a reader decodes it, so no lone surrogate
#: (the graph reader refuses one in evidence as "not text"; lock names may hold anything)
TEXT = st.text(st.characters(codec=None, exclude_categories=("Cs",)), min_size=1, max_size=12)


def _dot_unquote(token: str) -> str:
    """What Graphviz shows for a quoted DOT string used as a label: `\\"` is `"` (the DOT
    lexer), then `\\\\` is `\\` and `\\n` a line break (the label's escString)."""
    assert token[0] == '"' and token[-1] == '"'
    body = token[1:-1]
    out, i = [], 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append({'"': '"', "\\": "\\", "n": "\n"}.get(nxt, "\\" + nxt))
            i += 2
        else:
            assert body[i] != '"', f"an unescaped quote closes the string: {token!r}"
            out.append(body[i])
            i += 1
    return "".join(out)


_DOT_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)


@given(NAMES)
def test_dot_string_round_trip(name):
    quoted = dot_string(name)
    assert _DOT_STRING.fullmatch(quoted), quoted  # one DOT string, nothing after it
    assert "\n" not in quoted and "\r" not in quoted
    assert _dot_unquote(quoted) == visible(name)


@given(st.lists(NAMES, min_size=1, max_size=4))
def test_dot_lines_round_trip(parts):
    assert _dot_unquote(dot_lines(parts)) == "\n".join(visible(part) for part in parts)


@given(NAMES)
def test_xml_text_round_trip(name):
    escaped = xml_text(name)
    assert xml_untext(escaped) == name
    doc = xml.dom.minidom.parseString(f'<a b="{_attr(escaped)}">{_attr(escaped)}</a>'.encode("utf-8", "surrogatepass"))
    assert doc.documentElement.getAttribute("b") == escaped  # XML carries it unchanged
    assert xml_untext(doc.documentElement.getAttribute("b")) == name


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;").replace(">", "&gt;")


@settings(max_examples=60, deadline=None)
@given(st.lists(NAMES, min_size=2, max_size=4, unique=True), TEXT)
def test_graphml_round_trip(names, where):
    graph = DepGraph()
    for a, b in zip(names, names[1:]):
        graph.add_dependency(a, b, 3, Evidence(where, 7, "T\x01" + where))
    text = graph_to_graphml(graph)
    xml.dom.minidom.parseString(text.encode("utf-8"))  # well-formed XML
    back = graph_from_graphml(text, "g.graphml")
    assert sorted(back.nx.edges) == sorted(graph.nx.edges)
    for a, b in zip(names, names[1:]):
        ev = back.nx.edges[a, b]["evidence"]
        assert (ev.file, ev.line, ev.task) == (where, 7, "T\x01" + where)


@settings(max_examples=40, deadline=None)
@given(st.lists(NAMES, min_size=2, max_size=4, unique=True), NAMES)
def test_dot_output_holds_no_forged_statement(names, where):
    graph = DepGraph()
    for a, b in zip(names, names[1:]):
        graph.add_dependency(a, b, 3, Evidence(where, 7, "T"))
    out = io.StringIO()
    write_dot(graph, out)
    body = out.getvalue().splitlines()[4:-1]
    assert len(body) == len(names) + len(names) - 1  # one line per node and per edge
    for line in body:
        rest = _DOT_STRING.sub("S", line)  # what is left outside the strings is DOT syntax only
        assert re.fullmatch(r"  S( -> S)? \[label=S(, [a-z]+=[a-z0-9]+)*\];", rest), line


def test_graphml_with_control_characters_is_a_baseline(tmp_path):
    """lockcheck reads back its own GraphML as --baseline, names with controls included."""
    trace = tmp_path / "t.jsonl"
    events = [("T1", "acquire", "A\x01\x1b[2J"), ("T1", "acquire", "B\\u0041"), ("T1", "release", "B\\u0041"),
              ("T1", "release", "A\x01\x1b[2J")]
    trace.write_text("".join(json.dumps({"task": t, "op": op, "lock": lock}) + "\n" for t, op, lock in events))
    graph = tmp_path / "g.graphml"
    assert main(["graph", "--no-progress", str(trace), "-o", str(graph)], stdout=io.StringIO(), stderr=io.StringIO()) == 0
    xml.dom.minidom.parse(str(graph))
    inverted = tmp_path / "u.jsonl"
    inverted.write_text("".join(json.dumps({"task": "T2", "op": op, "lock": lock}) + "\n" for op, lock in (
        ("acquire", "B\\u0041"), ("acquire", "A\x01\x1b[2J"), ("release", "A\x01\x1b[2J"), ("release", "B\\u0041"))))
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--no-config", "--no-progress", "--format", "json", "--baseline", str(graph), str(inverted)],
                  stdout=out, stderr=err)
    assert status == 1, err.getvalue()
    (finding,) = json.loads(out.getvalue())["findings"]
    assert finding["kind"] == "circular-dependency" and set(finding["cycle"]) == {"A\x01\x1b[2J", "B\\u0041"}


# -- HTML (the `--format html` report) ---------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(NAMES)
def test_html_text_shows_what_visible_shows_and_opens_no_markup(name):
    """Parsed back by html.parser, element content and a quoted attribute both give exactly
    `visible(name)`; no `<`, `>`, quote or raw control survives."""
    import html
    import html.parser

    from lockcheck.util.escape import html_text

    escaped = html_text(name)
    assert not set(escaped) & set("<>\"'") and escaped.isprintable()
    assert html.unescape(escaped) == visible(name)

    class Reader(html.parser.HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.data, self.attrs, self.tags = [], [], []

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)
            self.attrs.extend(attrs)

        def handle_data(self, data):
            self.data.append(data)

    reader = Reader()
    reader.feed(f'<p title="{escaped}">{escaped}</p>')
    reader.close()
    assert reader.tags == ["p"] and reader.attrs == [("title", visible(name))]
    assert "".join(reader.data) == visible(name)
