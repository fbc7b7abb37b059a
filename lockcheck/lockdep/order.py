"""A declared lock order (`lockcheck.order`), like WITNESS's `order_lists` and Go's lockrank.

The file's syntax is grammars/annotations.lark (read it first: it is the
documentation).  `parse_order` turns it into an `OrderFile`; `check
--order FILE` then

1. seeds the dependency graph with every declared dependency between real
   classes (`seed`), with the order file's line as evidence, so the first
   observed inversion closes a cycle and is reported as
   `circular-dependency` even if the declared direction never occurs in
   the trace;
2. runs an `OrderChecker`, which reports every observed dependency that
   contradicts the declared order as `order-violation` (lockdep has no such
   report; it is WITNESS's "lock order reversal"), and lets classes declared
   `nestable C by address` be held several at a time when taken in
   increasing address order.

The annotation rules (`nest C under P`, `subclass C by address order`,
`recursive-read C`, `no-check C`, `no-check like "P"`) are parsed and exposed as data (`OrderFile.nest_under`,
`.subclass_by_address`, `.recursive_read`) for the checker's annotation
support; this module does not act on them.

>>> order = parse_order("A < B < C\\nnestable D by address\\n", "lockcheck.order")
>>> sorted(order.declared_pairs())
[('A', 'B', 1), ('B', 'C', 1)]
>>> order.before("A", "C")
True
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from lockcheck.lockdep import findings as F
from lockcheck.lockdep.checker import Checker, CheckerOptions
from lockcheck.lockdep.tasks import HeldLock, TaskState
from lockcheck.errors import TraceError
from lockcheck.events import Event
from lockcheck.lockdep.findings import Evidence
from lockcheck.lockdep.graph import DEP_EN, DepGraph
from lockcheck.lockdep.order_text import Rule, source_line, statements

if TYPE_CHECKING:  # lark: only order_text builds a parser, when a file needs one; networkx is imported where
    import networkx as nx  # the declared order is looked at as a graph: a file of rules alone
    from lark import Token  # (kernel.annotations, read by every capture check) needs neither

#: the task name a declared dependency's evidence carries
DECLARED_TASK = "declared"


#: `OrderFile.before` answers kept (a search each; the checker asks once per new dependency)
_MAX_ANSWERS = 1 << 16


@dataclass
class OrderFile:
    """A parsed order file.

    `edges` are the declared `A < B` pairs between names (classes, group
    members and pseudo ranks) with the line declaring each; `pseudo` the
    names that are ranks, not locks; `groups` name -> members; `nestable`
    class -> line; the annotation rules are in `rules`.
    """

    file: str
    edges: dict[tuple[str, str], int] = field(default_factory=dict)
    pseudo: dict[str, int] = field(default_factory=dict)
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    nestable: dict[str, int] = field(default_factory=dict)
    rules: list[Rule] = field(default_factory=list)

    # -- the annotation rules, as data ------------------------------------
    @property
    def nest_under(self) -> list[tuple[str, str, int]]:
        """`nest C under P`: (C, P, line) -- C is only taken with P held (a nest_lock)."""
        return [(r.classes[0], r.classes[1], r.line) for r in self.rules if r.kind == "nest-under"]

    @property
    def subclass_by_address(self) -> dict[str, int]:
        """`subclass C by address order`: C -> line -- same-class locks get subclasses by address."""
        return {r.classes[0]: r.line for r in self.rules if r.kind == "subclass-by-address"}

    @property
    def recursive_read(self) -> dict[str, int]:
        """`recursive-read C`: C -> line -- read acquisitions of C are recursive reads."""
        return {r.classes[0]: r.line for r in self.rules if r.kind == "recursive-read"}

    @property
    def no_check(self) -> dict[str, int]:
        """`no-check C`: C -> line -- C is acquired with check=0 (not validated)."""
        return {r.classes[0]: r.line for r in self.rules if r.kind == "no-check"}

    @property
    def no_check_like(self) -> dict[str, int]:
        """`no-check like "P"`: pattern -> line -- every class matching P (`*`: any run) has check=0."""
        return {r.classes[0]: r.line for r in self.rules if r.kind == "no-check-like"}

    # -- the order -----------------------------------------------------------
    @functools.cached_property
    def rank_graph(self) -> nx.DiGraph:
        """The declared order as a DAG over names (pseudo ranks included)."""
        import networkx as nx

        graph = nx.DiGraph()
        for (a, b), line in self.edges.items():
            graph.add_edge(a, b, line=line)
        return graph

    @functools.cached_property
    def _rank(self) -> dict[str, int]:
        """Each name's position in a topological order of the declared DAG: `a` can be declared
        before `b` only if its rank is lower (the order is checked acyclic when it is read)."""
        import networkx as nx

        return {name: i for i, name in enumerate(nx.topological_sort(self.rank_graph))}

    def before(self, a: str, b: str) -> bool:
        """Whether the order declares `a` taken before `b` (transitively).

        A search from `a` that never steps past `b`'s topological rank, not
        a transitive closure: the closure of a declared chain of 8,000
        classes held 32M pairs (2.1 GB); this holds the ranks (linear) and the
        answers of the pairs asked (bounded).
        """
        a, b = self._name(a), self._name(b)
        answers = self._answers
        found = answers.get((a, b))
        if found is None:
            if len(answers) >= _MAX_ANSWERS:
                answers.clear()
            found = answers[(a, b)] = self._reaches(a, b)
        return found

    @functools.cached_property
    def _answers(self) -> dict[tuple[str, str], bool]:
        return {}

    def _reaches(self, a: str, b: str) -> bool:
        rank = self._rank
        limit = rank.get(b)
        if limit is None or rank.get(a, limit) >= limit:
            return False  # unknown, the same, or after `b` in a topological order: no path
        succ = self.rank_graph._succ
        seen = {a}
        stack = [a]
        while stack:
            for c in succ[stack.pop()]:
                if c == b:
                    return True
                if c not in seen and rank[c] < limit:
                    seen.add(c)
                    stack.append(c)
        return False

    def _name(self, cls: str) -> str:
        """The declared name for a class: itself, or without its `/N` subclass."""
        return cls if cls in self.rank_graph else _base(cls)

    def declared_path(self, a: str, b: str) -> list[str]:
        """The declared chain from `a` to `b` (shortest), names as declared."""
        import networkx as nx

        return nx.shortest_path(self.rank_graph, self._name(a), self._name(b))

    def line_of(self, a: str, b: str) -> int:
        return self.edges[(a, b)]

    def declared_pairs(self) -> list[tuple[str, str, int]]:
        """Dependencies between real classes that the order implies, with the line of the first link.

        Direct `A < B` pairs as declared, plus `A < PSEUDO < ... < B`
        paths through pseudo ranks collapsed into `A -> B` (orders through
        real classes need no closure: the graph search follows them).
        """
        pairs: dict[tuple[str, str], int] = {}
        graph = self.rank_graph
        for a in graph:
            if a in self.pseudo:
                continue
            stack = [(b, graph.edges[a, b]["line"]) for b in graph.successors(a)]
            seen: set[str] = set()
            while stack:
                b, line = stack.pop()
                if b in seen:
                    continue
                seen.add(b)
                if b in self.pseudo:
                    stack.extend((c, line) for c in graph.successors(b))
                else:
                    pairs.setdefault((a, b), line)
        return [(a, b, line) for (a, b), line in pairs.items()]

    def seed(self, graph: DepGraph) -> int:
        """Add every declared dependency to `graph` (evidence: this file's line); the number added."""
        added = 0
        for a, b, line in self.declared_pairs():
            if graph.add_dependency(a, b, DEP_EN, Evidence(self.file, line, DECLARED_TASK),
                                    origin=f"declared:{self.file}"):
                added += 1
        return added

    def is_nestable(self, cls: str) -> bool:
        return _base(cls) in self.nestable or cls in self.nestable


def _base(cls: str) -> str:
    """A class name without its `/N` subclass suffix."""
    head, sep, tail = cls.rpartition("/")
    return head if sep and tail.isdigit() else cls


# -- parsing (the text: lockcheck.lockdep.order_text) ----------------------------------------


def parse_order(text: str, file: str = "lockcheck.order") -> OrderFile:
    """Parse an order file; `TraceError(file, line, col, ...)` for anything malformed or cyclic."""
    if not text.endswith("\n"):
        text += "\n"
    return _build(statements(text, file), file, text)


def load_order(path: str) -> OrderFile:
    """Read and parse an order file from disk."""
    from lockcheck.util.textfile import read_text

    return parse_order(read_text(path, "order file"), path)


def _build(statements: list, file: str, text: str) -> OrderFile:
    order = OrderFile(file)
    for kind, line, payload in statements:
        if kind == "group":
            name, members = payload
            if str(name) in order.groups:
                raise TraceError(file, line, name.column, f"group {name} is defined twice",
                                 source=source_line(text, line))
            order.groups[str(name)] = tuple(c for m in members for c in _expand(order, m))
        elif kind == "pseudo":
            for name in payload:
                order.pseudo[str(name)] = line
        elif kind == "nestable":
            order.nestable[str(payload)] = line
        elif kind == "rule":
            order.rules.append(payload)
        else:
            sides = [[c for m in side for c in _expand(order, m)] for side in payload]
            for left, right in zip(sides, sides[1:]):
                for a in left:
                    for b in right:
                        if a == b:
                            raise TraceError(file, line, None, f"{a} is declared before itself",
                                             source=source_line(text, line))
                        order.edges.setdefault((a, b), line)
    if not order.edges:
        return order  # (no order declared, no cycle)
    import networkx as nx

    try:
        cycle = nx.find_cycle(order.rank_graph)
    except nx.NetworkXNoCycle:
        return order
    lines = [order.edges[(a, b)] for a, b in cycle]
    names = " < ".join([a for a, _ in cycle] + [cycle[0][0]])
    raise TraceError(file, max(lines), None, f"the declared order is circular: {names} "
                                             f"(lines {', '.join(map(str, sorted(set(lines))))})",
                     source=source_line(text, max(lines)))


def _expand(order: OrderFile, name: Token) -> tuple[str, ...]:
    return order.groups.get(str(name), (str(name),))


# -- enforcing it ---------------------------------------------------------------------


class OrderChecker(Checker):
    """The checker, plus the declared order: order-violation reports and address-ordered nesting.

    The graph should be seeded first (`OrderFile.seed`) so that inversions
    also close cycles.
    """

    def __init__(self, order: OrderFile, graph: Optional[DepGraph] = None,
                 options: Optional[CheckerOptions] = None) -> None:
        super().__init__(graph, options)
        self.order = order

    def check_prev_add(self, task: TaskState, prev: HeldLock, nxt: HeldLock, distance: int,
                       ev: Event) -> bool:
        """WITNESS's lock order reversal: `prev -> next` where next is declared before prev."""
        if prev.cls != nxt.cls and self.order.before(nxt.cls, prev.cls):
            self.print_order_violation(task, prev, nxt, ev)
        return super().check_prev_add(task, prev, nxt, distance, ev)

    def validate_chain(self, task: TaskState, hlock: HeldLock, chain_head: bool, chain_key: int,
                       ev: Event) -> None:
        # the address order depends on instances, which the chain key does not see: check it always
        if not chain_head and hlock.check and not hlock.trylock and self.order.is_nestable(hlock.cls):
            self.check_address_order(task, hlock, ev)
        super().validate_chain(task, hlock, chain_head, chain_key, ev)

    def check_deadlock(self, task: TaskState, nxt: HeldLock, ev: Event) -> int:
        """A nestable class may be held several times (other instances): like a held nest lock."""
        if self.order.is_nestable(nxt.cls):
            same = [h for h in task.held if h.cls == nxt.cls]
            if same and all(h.instance != nxt.instance for h in same):
                return 2
        return super().check_deadlock(task, nxt, ev)

    def check_address_order(self, task: TaskState, nxt: HeldLock, ev: Event) -> None:
        for prev in task.held:
            if prev.cls != nxt.cls or prev.instance == nxt.instance:
                continue
            a, b = _address(prev.instance), _address(nxt.instance)
            if a is not None and b is not None and b < a:
                self.print_order_violation(task, prev, nxt, ev, by_address=True)
                return

    def print_order_violation(self, task: TaskState, prev: HeldLock, nxt: HeldLock, ev: Event,
                              by_address: bool = False) -> None:
        if by_address:
            declared = [f"{nxt.cls}@{nxt.instance}", f"{prev.cls}@{prev.instance}"]
            line = self.order.nestable.get(_base(nxt.cls), self.order.nestable.get(nxt.cls))
            dedup = "address"
        else:
            declared = self.order.declared_path(nxt.cls, prev.cls)
            line = self.order.line_of(declared[0], declared[1])
            dedup = None
        details = {"declared": declared, "declared_at": f"{self.order.file}:{line}"}
        if dedup:
            details["dedup"] = dedup
        self.report(self._finding(F.ORDER_VIOLATION, task, ev, lock=nxt.cls, held=prev.cls,
                                  next=self.snapshot(nxt), prev=self.snapshot(prev), details=details))


def _address(instance: Optional[str]) -> Optional[int]:
    if instance is None:
        return None
    try:
        return int(instance, 0)
    except ValueError:
        try:
            return int(instance, 16)
        except ValueError:
            return None
