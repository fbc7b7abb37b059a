"""An online topological order of the class graph, kept up to date as dependencies are added,
so that most "would this dependency close a cycle?" questions are answered by comparing two
positions (and the rest by a search bounded to the region between them) instead of a search
of the whole graph.  `DepGraph` inherits it.
"""

from __future__ import annotations

from typing import Optional

#: distance between the positions of classes placed one after the other in the topological
#: order: room to place a small moved set between two classes without renumbering others
_GAP = 1 << 40
#: first budget (classes visited) of each side of a two-way search; doubled until a side completes
_FIRST_BUDGET = 8
_START, _END = float("-inf"), float("inf")
#: the most of the room next to a class that a region moved there is spaced across: the room
#: halves at each move nested between moved ones (about 20 before a renumbering), and a chain
#: of moves each before the last (`chain-rooted`) uses `_SPAN` of `_GAP` per move
_SPAN = 1 << 20


class TopologicalOrder:
    """The order half of `DepGraph` (it reads the graph's adjacency and keeps `_ord`, `_at`)."""

    def topological_order(self) -> Optional[dict]:
        """Class -> position in a topological order, or None when the graph has a cycle.

        No path leads from a class to one placed before it, so a search for
        such a path can be skipped, and a search for a path to `dst` need
        never look past `dst`'s position: that is what keeps a clean,
        ordered trace cheap.  The dict is live; do not modify it.
        """
        if self._cyclic:
            return None
        if self._ord is None:
            # self-loops (a recursive read under a read of its own class) do not
            # affect which other classes are reachable, so they are left out
            ordered = _topological_sort(self._succ, self._pred)
            if ordered is None:
                self._cyclic = True
                return None
            self._ord = {name: i * _GAP for i, name in enumerate(ordered)}
            self._at = {i: name for name, i in self._ord.items()}
            self._lo, self._hi = 0, (len(self._ord) - 1) * _GAP
        return self._ord

    def _place_last(self, name: str) -> None:
        self._hi += _GAP
        self._ord[name] = self._hi
        self._at[self._hi] = name

    def _place_first(self, name: str) -> None:
        self._lo -= _GAP
        self._move(name, self._lo)

    def _move(self, name: str, position: int) -> None:
        at = self._at
        old = self._ord[name]
        if at.get(old) == name:
            del at[old]
        self._ord[name] = position
        at[position] = name

    def _order_edge(self, u: str, v: str) -> None:
        """Restore the topological order after adding `u -> v`, touching only the affected region.

        Nothing to do when `u` is already before `v`.  Otherwise, first two
        O(1) cases that keep the affected region empty where appending new
        classes would make it everything: a `u` that nothing leads to moves in
        front of all classes, a `v` that leads nowhere behind them (a chain
        built last link first, a star built leaves first).  Then a two-way
        search: the classes reaching `u` placed after `v` (backward) and those
        reachable from `v` placed before `u` (forward) are searched side by
        side with a growing budget, and as soon as one side is complete, that
        side alone moves into a free gap across the other (`_GAP` leaves room
        between neighbours), so the cost is about twice the smaller side,
        not the sum of both.  Where the gap has no room left, the order is
        renumbered with room everywhere (`_spread`) and the move tried again;
        only where that leaves no room either (a `_GAP` too small for the
        side) are both sides completed and moved into the positions they held
        (Pearce-Kelly).
        """
        probe, self._probe = self._probe, None
        order = self._ord
        if order is None or self._cyclic:
            return
        if u not in order:
            self._place_last(u)
        if v not in order:
            self._place_last(v)
        if u == v:
            return
        lower, upper = order[v], order[u]
        if lower > upper:
            return
        succ, pred = self._succ, self._pred
        before, after = pred[u], succ[v]  # (a self-loop is no order)
        if not before or (len(before) == 1 and u in before):
            self._place_first(u)
            return
        if not after or (len(after) == 1 and v in after):
            self._hi += _GAP
            self._move(v, self._hi)
            return
        forward = backward = None
        if probe is not None and probe[0] == v and probe[1] == u and probe[2] == self._edges - 1:
            # `may_reach(v, u)` completed one side of this very search just before the edge was
            # added (check_noncircular), and the only change since is the edge itself, which
            # neither side contains: moved as it is, the search is not run a second time
            if probe[3]:
                forward = probe[4]
                if self._fit(forward, succ, above=order[u]) or (
                        self._spread() and self._fit(forward, succ, above=order[u])):
                    return
            else:
                backward = probe[4]
                if self._fit(backward, pred, below=order[v]) or (
                        self._spread() and self._fit(backward, pred, below=order[v])):
                    return
        budget = _FIRST_BUDGET
        while forward is None and backward is None:
            lower = order[v]  # (positions change when `_spread` renumbers them)
            backward = _region(u, pred, order, lower, _END, budget)
            if backward is not None:
                if v in backward:
                    self._cyclic = True
                    self._ord = None
                    return
                if self._fit(backward, pred, below=order[v]):
                    return
                if self._spread() and self._fit(backward, pred, below=order[v]):
                    return
            forward = _region(v, succ, order, _START, order[u], budget)
            if forward is not None:
                if u in forward:
                    self._cyclic = True
                    self._ord = None
                    return
                if self._fit(forward, succ, above=order[u]):
                    return
                if self._spread() and self._fit(forward, succ, above=order[u]):
                    return
            budget *= 4
        lower, upper = order[v], order[u]
        if forward is None:
            forward = _region(v, succ, order, _START, upper)
            if u in forward:
                self._cyclic = True
                self._ord = None
                return
        if backward is None:
            backward = _region(u, pred, order, lower, _END)
        moved = sorted(backward, key=order.__getitem__) + sorted(forward, key=order.__getitem__)
        slots = sorted(order[n] for n in moved)
        at = self._at
        for name, slot in zip(moved, slots):
            order[name] = slot
            at[slot] = name

    def _spread(self) -> bool:
        """Renumber the order `_GAP` apart, keeping it; False when it is that way already.

        Moves into a gap halve the room left around the classes moved there
        (`_fit` spaces them out across up to `_SPAN` of it), so after about
        log2(`_SPAN`) moves nested between each other a gap has no room left
        and the full move would follow.  Renumbering is linear in the classes;
        it is needed that rarely (packing moved classes side by side instead
        made it one renumbering per few thousand dependencies on `dense`, its
        super-linear part).
        """
        order, at = self._ord, self._at
        if self._hi - self._lo == (len(order) - 1) * _GAP:
            return False  # evenly spaced: no gap can be wider
        ranked = [at[position] for position in sorted(at)]  # (ints sort without a key: ~2x faster)
        at.clear()
        for position, name in enumerate(ranked):
            order[name] = position * _GAP
            at[position * _GAP] = name
        self._lo, self._hi = 0, (len(ranked) - 1) * _GAP
        return True

    def _fit(self, region: set, adjacency: dict, below: Optional[int] = None,
             above: Optional[int] = None) -> bool:
        """Move a complete region into free positions below `below` (a backward region, which
        must go before `v`) or above `above` (a forward one, after `u`), keeping its inner order
        and spaced out across the room there (at most `_SPAN` of it); False, moving nothing,
        when the gap has no room.

        The room is bounded by the region's neighbours outside it: for a backward
        region its other predecessors (all placed before `below`), for a forward
        one its other successors (all placed after `above`).
        """
        order, at = self._ord, self._at
        k = len(region)
        # (loops, not max/min of a generator: one per moved region, ~1.3 regions per dependency on `dense`)
        if below is not None:
            bound = self._lo - _GAP
            for n in region:
                for o in adjacency[n]:
                    if o not in region and order[o] > bound:
                        bound = order[o]
            step = -1
            start, room = below, below - bound
        else:
            bound = self._hi + _GAP
            for n in region:
                for o in adjacency[n]:
                    if o not in region and order[o] < bound:
                        bound = order[o]
            step = 1
            start, room = above, bound - above
        if room <= k:
            return False
        # spaced out across the room (up to `_SPAN` of it), not packed against `start`: a later
        # move between two of them, or next to one, finds room there (packed: a renumbering)
        stride = min(room, _SPAN) // (k + 1) or 1
        free = []
        last = start
        for i in range(1, k + 1):
            position = start + step * stride * i
            if (position - last) * step <= 0:
                position = last + step
            while position in at and (bound - position) * step > 0:
                position += step
            if (bound - position) * step <= 0:
                return False
            free.append(position)
            last = position
        # a backward region fills positions downwards from `below`: its last class goes highest
        ranked = sorted(region, key=order.__getitem__, reverse=below is not None)
        for name, position in zip(ranked, free):
            self._move(name, position)
        self._lo = min(self._lo, free[-1] if below is not None else free[0])
        self._hi = max(self._hi, free[0] if below is not None else free[-1])
        return True

    def may_reach(self, src: str, dst: str) -> bool:
        """False when no path leads from `src` to `dst`; True when one may (or does).

        A two-way search inside the topological order's window between them,
        forward from `src` and backward from `dst` with a growing budget:
        whichever side completes first without meeting the other proves there
        is no path, so the cost is about twice the smaller side.  A search for
        a cycle that cannot exist is skipped this way even when the classes
        reachable from the new dependency's head are many (lockdep's own
        forward search would visit them all to find nothing).
        """
        order = self.topological_order()
        if order is None:
            return True
        lo, hi = order[src], order[dst]
        if lo > hi:
            return False
        succ, pred = self._succ, self._pred
        budget = _FIRST_BUDGET
        while True:
            # backward first, as `_order_edge` tries them: which side it moves decides how the
            # order's gaps fill up (forward first: 5x the renumberings on `dense`)
            backward = _region(dst, pred, order, lo, _END, budget)
            if backward is not None:
                if src in backward:
                    return True
                # the side `_order_edge(dst, src)` moves when the dependency is added next
                self._probe = (src, dst, self._edges, False, backward)
                return False
            forward = _region(src, succ, order, _START, hi, budget)
            if forward is not None:
                if dst in forward:
                    return True
                self._probe = (src, dst, self._edges, True, forward)
                return False
            budget *= 4


def _region(start: str, adjacency: dict, order: dict, lo: float, hi: float,
            budget: Optional[int] = None) -> Optional[set]:
    """`start` and every class reachable from it through classes placed in `lo..hi` by `order`
    (self-loops skipped: `start` is seen); None once more than `budget` classes are found."""
    seen = {start}
    stack = [start]
    while stack:
        node = stack.pop()
        for other in adjacency[node]:
            if other not in seen and lo <= order[other] <= hi:
                seen.add(other)
                if budget is not None and len(seen) > budget:
                    return None
                stack.append(other)
    return seen


def _topological_sort(succ: dict, pred: dict) -> Optional[list]:
    """The classes in networkx's `topological_sort` order of the graph without its self-loops
    (generation by generation, each in node order); None: the graph has a cycle."""
    indegree = {}
    zero = []
    for node in succ:
        before = pred[node]
        degree = len(before) - (node in before)
        if degree:
            indegree[node] = degree
        else:
            zero.append(node)
    ordered = []
    while zero:
        ordered.extend(zero)
        generation, zero = zero, []
        for node in generation:
            for child in succ[node]:
                if child == node:
                    continue
                degree = indegree[child] - 1
                if degree:
                    indegree[child] = degree
                else:
                    del indegree[child]
                    zero.append(child)
    return None if indegree else ordered
