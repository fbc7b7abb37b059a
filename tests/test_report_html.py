"""`check --format html` (or `-o FILE.html`): one self-contained page with every finding, its
chain and an SVG of its cycle; names from traces cannot add markup."""

from __future__ import annotations

import html.parser
import io
from pathlib import Path

from lockcheck.commands.cli import main

from testdata import TRACES


class Page(html.parser.HTMLParser):
    """The parts of the page the tests look at: tags, sections' ids, text, external references."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.ids: list[str] = []
        self.text: list[str] = []
        self.refs: list[str] = []
        self.svg_text: list[str] = []
        self._in_svg_text = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        for key in ("src", "href"):
            if key in attrs:
                self.refs.append(attrs[key])
        self._in_svg_text = tag == "text"

    def handle_endtag(self, tag):
        self._in_svg_text = False

    def handle_data(self, data):
        self.text.append(data)
        if self._in_svg_text:
            self.svg_text.append(data)


def check_html(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--no-config", "--no-progress", *args], stdout=out, stderr=err)
    return status, out.getvalue() + err.getvalue()


def parsed(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    return page


def test_html_report_holds_every_finding_with_its_chain_and_cycle(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    status, err = check_html(str(TRACES), "-o", str(report))  # the extension picks the format
    assert status == 1, err
    text = report.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    page = parsed(text)
    # self-contained: no script, nothing fetched; links only within the page
    assert "script" not in page.tags and "link" not in page.tags and "img" not in page.tags
    assert all(ref.startswith("#") for ref in page.refs), page.refs
    # the same findings as the JSON report, each a section
    out = io.StringIO()
    main(["check", "--no-config", "--no-progress", "--format", "json", str(TRACES)], stdout=out, stderr=io.StringIO())
    import json

    findings = json.loads(out.getvalue())["findings"]
    assert [i for i in page.ids if i.startswith("finding-")] == [f"finding-{n}" for n in range(1, len(findings) + 1)]
    body = "".join(page.text)
    for finding in findings:
        assert finding["kind"] in body and finding["lock"] in body
    # the AB-BA's cycle is drawn, its classes named in the SVG
    assert page.tags.count("svg") == sum(1 for f in findings if f["kind"] == "circular-dependency") >= 2
    assert {"&dev->lock", "&queue->lock"} <= set(page.svg_text)
    # its chain, with where each link was first seen
    assert "abba.lt:5" in body and "WARNING: possible circular locking dependency detected" in body
    # the summary table: findings per kind
    assert "kinds" in page.ids and "summary" in page.ids


def test_format_html_on_stdout_and_clean_run() -> None:
    status, text = check_html("--format", "html", str(TRACES / "sample.jsonl"))
    page = parsed(text)
    assert page.tags[0] == "html" and "section" in page.tags
    # a clean trace: no finding section, the verdict in the title
    status, text = check_html("--format", "html", str(TRACES / "contention" / "after" / "run1.lt"))
    assert status == 0
    page = parsed(text)
    assert "section" not in page.tags and "lockcheck: no problems found" in "".join(page.text)


def test_crafted_names_add_no_markup(tmp_path: Path) -> None:
    import json

    trace = tmp_path / "evil.jsonl"
    evil_a, evil_b = "<script>alert(1)</script>", "&b\"onmouseover='x'\u202e\n<p>"
    ops = [("1", "acquire", evil_a), ("1", "acquire", evil_b), ("1", "release", evil_b), ("1", "release", evil_a),
           ("2", "acquire", evil_b), ("2", "acquire", evil_a)]
    trace.write_text("".join(json.dumps({"task": t, "op": op, "lock": lock}) + "\n" for t, op, lock in ops))
    status, text = check_html("--format", "html", str(trace))
    assert status == 1
    page = parsed(text)
    assert "script" not in page.tags and "\u202e" not in text
    assert evil_a in page.svg_text and "&b\"onmouseover='x'\\u202e\\n<p>" in page.svg_text
    import re

    assert page.tags.count("p") == len(re.findall(r"<p[ >]", text)) == 3  # lockcheck's own <p>s only
