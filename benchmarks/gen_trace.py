#!/usr/bin/env python3
"""Seeded generator of realistic, CLEAN lock traces in the `.lt` format.

    python benchmarks/gen_trace.py --events 1000000 --seed 1 -o /tmp/b.lt [--gzip]
    python benchmarks/gen_trace.py --events 2000 --bad 1          # to stdout

The trace looks like what a lockdep-instrumented kernel would see:

- thousands of lock classes (`--classes`, default 3000) with kernel-style
  names (`&(&zone->lock)->rlock`, `&mm->mmap_sem#2`, `(wq_completion)events`),
  most with several instances (`CLASS@0xffff...`), some global;
- dozens of tasks (`--tasks`, default 48: `kworker/u16:3/87`, `qemu-kvm/64239`)
  interleaved event by event, each holding only its own locks;
- a fixed library of "code paths" (`--paths`, default 2000) replayed over and
  over with a Zipf-like popularity, so a few thousand lock chains dominate;
- nesting depth 1..8, trylocks (a few of them out of class order, which
  lockdep allows because a trylock adds no dependency), `read` and `rread`
  acquisitions, `subclass=1` same-class pairs (double_rq_lock), `nest=`
  bursts of 5..40 same-class instances under a serialising lock
  (mm_take_all_locks), `at=func+0x1a/0x80` sites, `ts=`/`cpu=` on some lines,
  `contended`/`acquired` pairs, `irqs-off`/`irqs-on` and
  `softirqs-off`/`softirqs-on` around some paths (process context only: no
  irq handlers, so no irq-usage findings), `exit` between paths;
- instance ownership is simulated: a write-held instance is never acquired by
  another task, readers share, writers block (and failed trylocks emit
  nothing), as on a real machine.

CLEAN: every non-trylock acquisition respects one global total order of
classes (the class rank); same-class nesting only happens via `nest=` under
the held serialiser or via `subclass=1`; releases only release held locks
(mostly LIFO, sometimes out of order, never a nest lock before the locks it
serialises); every task ends holding nothing.  A lockdep-faithful checker
must report nothing.

`--bad N` injects N ABBA inversions: dedicated tasks `bad-I/PID` take
`A then B` and, later in the trace, `B then A` for N distinct class pairs.
A lockdep-faithful checker reports exactly N circular dependencies.

Memory is flat in the number of events: the state is the class and path
library plus the per-task held stacks; output is streamed in chunks.
Deterministic: the same arguments produce the same bytes.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import io
import json
import random
import sys
import time
from typing import Optional, TextIO

#: bump when the output for given arguments changes (benchmarks/run.py keys its cache on it)
GEN_VERSION = 1

# -- lock kinds -----------------------------------------------------------------
SPIN, MUTEX, RWSEM, RWLOCK, RCU = range(5)
# modes as written in the trace ("" is write, the default)
W, R, RR = "", " read", " rread"

# -- name material (kernel-flavoured) -----------------------------------------------
_STRUCTS = (
    "mm", "inode", "sb", "rq", "zone", "anon_vma", "mapping", "dentry", "file", "sk",
    "dev", "q", "bdev", "tty", "pipe", "kvm", "vcpu", "ctx", "rdev", "journal", "ei",
    "cgroup", "css", "task", "sighand", "p", "pool", "wq", "timer", "base", "ep",
    "sbi", "ci", "fs_info", "root", "trans", "delayed_refs", "cfs_b", "rt_b", "dl_b",
    "n", "l3", "pgdat", "lruvec", "memcg", "hctx", "tags", "nvmeq", "ctrl", "port",
    "priv", "adapter", "hw", "vif", "sta", "local", "xprt", "clnt", "server", "fl",
    "ctx_lock", "ring", "ioc", "bfqd", "kn", "of", "net", "ifa", "tbl", "fib", "nh",
)
_FIELDS = (
    "lock", "mutex", "rwsem", "mmap_sem", "i_rwsem", "wait_lock", "list_lock",
    "tree_lock", "state_lock", "ctl_mutex", "i_mmap_rwsem", "s_umount", "i_lock",
    "d_lock", "f_pos_lock", "sk_lock", "lru_lock", "pi_lock", "siglock", "alloc_lock",
    "reg_lock", "irq_lock", "queue_lock", "tx_lock", "cmd_lock", "conf_mutex",
    "io_lock", "srcu", "refs_lock", "ordered_lock", "seq_lock", "work_lock",
    "cb_lock", "hash_lock", "tree_mutex", "open_mutex", "reconfig_mutex", "sem",
)
_GLOBALS = (
    "rtnl_mutex", "cgroup_mutex", "cpu_hotplug_lock", "mm_all_locks_mutex",
    "kernfs_mutex", "pcpu_alloc_mutex", "slab_mutex", "jump_label_mutex",
    "text_mutex", "module_mutex", "console_lock", "tasklist_lock", "css_set_lock",
    "uevent_sock_mutex", "pernet_ops_rwsem", "namespace_sem", "mount_lock",
    "rename_lock", "dcache_lru_lock", "inode_hash_lock", "sb_lock", "bdev_lock",
    "pm_mutex", "dpm_list_mtx", "clocksource_mutex", "tick_broadcast_lock",
    "sched_domains_mutex", "wq_pool_mutex", "kprobe_mutex", "event_mutex",
)
_WQS = ("events", "events_unbound", "writeback", "kblockd", "mm_percpu_wq",
        "ipv6_addrconf", "netns", "xfs-sync", "ext4-rsv-conversion", "kvm-irqfd-cleanup")
_FUNC_PREFIX = (
    "ext4", "xfs", "btrfs", "do", "__do", "mm", "kvm", "tcp", "udp", "ip6", "netif",
    "blk_mq", "nvme", "sched", "try_to", "__schedule", "vfs", "path", "filemap",
    "shmem", "cgroup", "kernfs", "drm", "i915", "usb", "scsi", "sd", "md", "dm",
    "ksys", "__x64_sys", "sock", "inet", "sk", "rcu", "queue", "process", "worker",
)
_FUNC_VERB = (
    "write_begin", "write_end", "mmap", "munmap", "fault", "page_mkwrite", "lookup",
    "create", "unlink", "rename", "open", "release", "readpage", "writepages",
    "take_all_locks", "drop_all_locks", "notifier_register", "vcpu_ioctl", "sendmsg",
    "recvmsg", "rcv", "xmit", "submit_bio", "queue_rq", "complete", "timeout",
    "wake_up_process", "balance", "migrate_task", "attach_task", "evict", "sync_fs",
    "freeze", "thaw", "commit_transaction", "start_this_handle", "alloc_pages",
    "shrink_node", "reclaim", "ioctl", "poll", "flush_work", "cancel_work_sync",
)
_TASK_KINDS = (
    ("kworker/u{n}:{m}", 10), ("kworker/{n}:{m}", 6), ("kworker/{n}:{m}H", 2),
    ("ksoftirqd/{n}", 2), ("kswapd{n}", 1), ("jbd2/sda{n}-8", 1), ("qemu-kvm", 4),
    ("bash", 2), ("sshd", 1), ("postgres", 4), ("nginx", 3), ("rcu_sched", 1),
    ("khugepaged", 1), ("systemd-journal", 1), ("Xorg", 1), ("python3", 3),
    ("java", 3), ("kcompactd{n}", 1), ("xfsaild/dm-{n}", 1), ("irq/{n}-nvme0q{m}", 1),
)


class LockClass:
    __slots__ = ("name", "rank", "kind", "locks", "hot", "nestable", "pairable")

    def __init__(self, name: str, rank: int, kind: int, locks: list[str]) -> None:
        self.name = name
        self.rank = rank
        self.kind = kind
        self.locks = locks  # lock texts as written: "CLASS@0x..." or "CLASS"
        self.hot = False
        self.nestable = False
        self.pairable = False


# A unit of a code path: one acquisition, a subclass pair or a nest burst.
#   (kind, cls, mode, trylock, site, count, nest_unit)
U_ONE, U_PAIR, U_BURST = range(3)


class Path:
    __slots__ = ("units", "irqoff", "bhoff", "sites", "rel_sites", "ooo")

    def __init__(self) -> None:
        self.units: list[tuple] = []
        self.irqoff = False
        self.bhoff = False
        self.sites = True
        self.rel_sites = False
        self.ooo = 0.0  # probability of one out-of-order release


class World:
    """The fixed part of a trace: classes, code paths, tasks.  Built from the seed."""

    def __init__(self, seed: int, n_classes: int = 3000, n_paths: int = 2000, n_tasks: int = 48) -> None:
        rng = random.Random(f"lockcheck-world-{seed}")
        self.rng = rng
        self.classes = self._make_classes(rng, max(n_classes, 16))
        self.rank = {c.name: c.rank for c in self.classes}
        self.funcs = [f"{p}_{v}" for p in _FUNC_PREFIX for v in _FUNC_VERB]
        rng.shuffle(self.funcs)
        self.paths = [self._make_path(rng) for _ in range(max(n_paths, 1))]
        # Zipf-like popularity: a few paths dominate, all get replayed.
        weights = [1.0 / (i + 1) ** 0.8 for i in range(len(self.paths))]
        acc, cum = 0.0, []
        for w in weights:
            acc += w
            cum.append(acc)
        self.path_cum = cum
        self.tasks = self._make_tasks(rng, max(n_tasks, 1))

    # -- classes ------------------------------------------------------------------
    def _make_classes(self, rng: random.Random, n: int) -> list[LockClass]:
        seen: dict[str, int] = {}

        def unique(name: str) -> str:
            count = seen.get(name, 0)
            seen[name] = count + 1
            return name if count == 0 else f"{name}#{count + 1}"

        specs: list[tuple[str, int, bool]] = []  # (name, kind, global)
        for rcu in ("rcu_read_lock", "rcu_read_lock_sched", "rcu_read_lock_bh"):
            specs.append((unique(rcu), RCU, True))
        for g in _GLOBALS:
            kind = RWSEM if g.endswith(("_rwsem", "_sem", "_lock")) and rng.random() < 0.5 else MUTEX
            if g.endswith("lock") and not g.endswith("hotplug_lock") and kind == MUTEX:
                kind = SPIN if rng.random() < 0.6 else RWLOCK
            specs.append((unique(g), kind, True))
        while len(specs) < n:
            r = rng.random()
            s, f = rng.choice(_STRUCTS), rng.choice(_FIELDS)
            base_f = f.removesuffix("_rwsem").removesuffix("_mutex").removesuffix("_sem")
            if r < 0.40:
                f = f if "lock" in f else f"{base_f}_lock"
                name, kind = f"&(&{s}->{f})->rlock", SPIN
            elif r < 0.65:
                name = f"&{s}->{f}"
                kind = MUTEX if "mutex" in f else (RWSEM if "sem" in f else SPIN)
            elif r < 0.75:
                name, kind = f"&{s}->{base_f}_rwsem", RWSEM
            elif r < 0.83:
                name, kind = f"&{s}->{base_f.removesuffix('_lock')}_rwlock", RWLOCK
            elif r < 0.88:
                name, kind = f"(wq_completion){rng.choice(_WQS)}", MUTEX
            elif r < 0.92:
                name, kind = "sb_writers", RWSEM
            elif r < 0.96:
                name, kind = "&type->i_mutex_dir_key", RWSEM
            else:
                name, kind = f"{s}_{f}_key", MUTEX
            specs.append((unique(name), kind, rng.random() < 0.15))
        specs = specs[:n]
        rng.shuffle(specs)  # the rank is unrelated to the name
        classes = []
        for rank, (name, kind, is_global) in enumerate(specs):
            if is_global:
                locks = [name]
            else:
                count = rng.randint(2, 8)
                base = rng.randrange(0x8800_0000_0000, 0x8fff_ffff_0000) & ~0x3F
                locks = [f"{name}@0xffff{base + 0x40 * rng.randrange(1 << 20):012x}" for _ in range(count)]
                locks = sorted(set(locks))
            classes.append(LockClass(name, rank, kind, locks))
        hot = rng.sample(classes, min(60, n // 4))
        for c in classes:
            if c.kind == RCU:
                hot.append(c)
        for c in hot:
            c.hot = True
        self.hot = sorted(set(hot), key=lambda c: c.rank)
        # nestable classes: many instances (anon_vma, i_mmap): up to 48
        candidates = [c for c in classes if len(c.locks) > 1 and c.kind in (SPIN, MUTEX, RWSEM)]
        for c in rng.sample(candidates, min(20, len(candidates) // 4 or 1)):
            c.nestable = True
            base = rng.randrange(0x9000_0000_0000, 0x9fff_ffff_0000) & ~0x3F
            c.locks = sorted({f"{c.name}@0xffff{base + 0x80 * i:012x}" for i in range(48)})
        self.nestable = sorted((c for c in classes if c.nestable), key=lambda c: c.rank)
        spins = [c for c in classes if c.kind == SPIN and len(c.locks) >= 2 and not c.nestable]
        for c in rng.sample(spins, min(30, len(spins))):
            c.pairable = True
        self.pairable = [c for c in classes if c.pairable]
        return classes

    # -- code paths -----------------------------------------------------------------
    def _site(self, rng: random.Random) -> str:
        size = rng.choice((0x40, 0x80, 0xC0, 0x100, 0x190, 0x200, 0x380, 0x6A0))
        return f"{rng.choice(self.funcs)}+0x{rng.randrange(4, size):x}/0x{size:x}"

    def _mode(self, rng: random.Random, c: LockClass) -> str:
        if c.kind == RCU:
            return RR
        if c.kind == RWSEM:
            return R if rng.random() < 0.5 else W
        if c.kind == RWLOCK:
            return RR if rng.random() < 0.6 else W
        return W

    def _pick_classes(self, rng: random.Random, depth: int, below: Optional[int] = None,
                      above: Optional[int] = None) -> list[LockClass]:
        lo = -1 if above is None else above
        hi = len(self.classes) if below is None else below
        if hi - lo <= 1:
            return []
        center = rng.randrange(lo + 1, hi)
        chosen: dict[int, LockClass] = {}
        for _ in range(depth * 4):
            if len(chosen) >= depth:
                break
            if rng.random() < 0.25:
                c = rng.choice(self.hot)
            else:
                r = center + rng.randint(-200, 200)
                if not lo < r < hi:
                    continue
                c = self.classes[r]
            if lo < c.rank < hi and not c.nestable:
                chosen[c.rank] = c
        return [chosen[r] for r in sorted(chosen)]

    def _make_path(self, rng: random.Random) -> Path:
        path = Path()
        path.sites = rng.random() < 0.7
        path.rel_sites = path.sites and rng.random() < 0.3
        path.irqoff = rng.random() < 0.05
        path.bhoff = not path.irqoff and rng.random() < 0.05
        path.ooo = 0.3 if rng.random() < 0.2 else 0.0
        units = path.units
        r = rng.random()
        if r < 0.015 and self.nestable:
            # mm_take_all_locks: [prefix <] serialiser [< prefix] < N1 [< N2] [< tail]
            n1 = rng.choice(self.nestable)
            two = rng.random() < 0.3 and any(c.rank > n1.rank for c in self.nestable)
            n2 = rng.choice([c for c in self.nestable if c.rank > n1.rank]) if two else None
            lower = [c for c in self._pick_classes(rng, rng.randint(1, 3), below=n1.rank)
                     if c.kind in (MUTEX, RWSEM, SPIN)]
            if not lower:
                return self._make_path(rng)
            serial_i = rng.randrange(len(lower))
            for i, c in enumerate(lower):
                mode = W if i == serial_i else self._mode(rng, c)
                units.append((U_ONE, c, mode, False, self._site(rng), 1, None))
            total = rng.randint(5, 40)
            k1 = total if n2 is None else rng.randint(3, total - 2)
            units.append((U_BURST, n1, W, False, self._site(rng), k1, serial_i))
            if n2 is not None:
                units.append((U_BURST, n2, W, False, self._site(rng), total - k1, serial_i))
            last = (n2 or n1).rank
            if rng.random() < 0.3:
                for c in self._pick_classes(rng, 1, above=last):
                    units.append((U_ONE, c, self._mode(rng, c), False, self._site(rng), 1, None))
            return path
        depth = rng.choices(range(1, 9), weights=(12, 24, 24, 16, 10, 7, 4, 3))[0]
        classes = self._pick_classes(rng, depth)
        if not classes:
            return self._make_path(rng)
        pair_at = -1
        if r < 0.08 and self.pairable:
            # double_rq_lock: a same-class pair (subclass 0 then 1) at its rank
            p = rng.choice(self.pairable)
            classes = [c for c in classes if c is not p] + [p]
            classes.sort(key=lambda c: c.rank)
            pair_at = classes.index(p)
        top_rank = -1
        in_path = {x.rank for x in classes}
        for i, c in enumerate(classes):
            if i == pair_at:
                units.append((U_PAIR, c, W, False, self._site(rng), 2, None))
                top_rank = c.rank
                continue
            trylock = i > 0 and c.kind in (SPIN, MUTEX, RWSEM) and rng.random() < 0.05
            units.append((U_ONE, c, self._mode(rng, c), trylock, self._site(rng), 1, None))
            if not trylock:
                top_rank = c.rank
            if top_rank > 1 and rng.random() < 0.015:
                # a trylock *against* the class order: lockdep allows it (no dependency)
                t = self.classes[rng.randrange(0, top_rank)]
                if t.rank not in in_path and not t.nestable and t.kind in (SPIN, MUTEX):
                    in_path.add(t.rank)
                    units.append((U_ONE, t, W, True, self._site(rng), 1, None))
        return path

    # -- tasks ------------------------------------------------------------------------
    def _make_tasks(self, rng: random.Random, n: int) -> list[str]:
        kinds = [k for k, _ in _TASK_KINDS]
        weights = [w for _, w in _TASK_KINDS]
        names: list[str] = []
        pids: set[int] = set()
        while len(names) < n:
            kind = rng.choices(kinds, weights)[0]
            comm = kind.format(n=rng.choice((0, 1, 2, 3, 4, 8, 16)), m=rng.randint(0, 7))
            pid = rng.randint(2, 99999) if comm != "systemd" else 1
            if pid in pids:
                continue
            pids.add(pid)
            names.append(f"{comm}/{pid}")
        return names


class _Task:
    __slots__ = ("name", "cpu", "path", "ui", "pending", "nest", "held", "serial",
                 "rel", "want", "waiting", "epilogue")

    def __init__(self, name: str, cpu: int) -> None:
        self.name = name
        self.cpu = cpu
        self.path: Optional[Path] = None
        self.ui = 0  # next unit
        self.pending: list[str] = []  # reserved instances of the current pair/burst
        self.nest = ""  # " nest=LOCK" of the current burst
        self.held: list[tuple[str, str, str]] = []  # (lock text, mode, release site)
        self.serial: set[str] = set()  # held locks that serialise a nest burst
        self.rel: Optional[list[int]] = None  # release order, once releasing
        self.want: Optional[str] = None  # instance a blocked writer waits for
        self.waiting = False
        self.epilogue: list[str] = []


class Generator:
    """Streams trace lines.  `run(out)` writes about `events` events and returns the exact count."""

    def __init__(self, world: World, seed: int, events: int, bad: int = 0) -> None:
        self.w = world
        self.rng = random.Random(f"lockcheck-trace-{seed}")
        self.events = events
        self.bad = bad
        self.owner: dict[str, int] = {}  # lock text -> -1 (writer) or reader count
        self.waiting_writers: dict[str, int] = {}
        self.clock = 1000.0 + self.rng.random() * 1000.0
        ncpu = 16
        self.tasks = [_Task(name, i % ncpu) for i, name in enumerate(world.tasks)]

    # -- instance ownership -----------------------------------------------------------
    def _can(self, text: str, mode: str) -> bool:
        o = self.owner.get(text, 0)
        if mode is W:
            return o == 0
        return o >= 0 and text not in self.waiting_writers

    def _stop_waiting(self, task) -> None:
        """The task no longer wants its lock: it leaves the queued writers (if it was one)."""
        if task.waiting:
            left = self.waiting_writers[task.want] - 1
            if left:
                self.waiting_writers[task.want] = left
            else:
                del self.waiting_writers[task.want]
            task.waiting = False
        task.want = None

    def _take(self, text: str, mode: str) -> None:
        if mode is W:
            self.owner[text] = -1
        else:
            self.owner[text] = self.owner.get(text, 0) + 1

    def _drop(self, text: str) -> None:
        o = self.owner[text]
        if o == -1 or o == 1:
            del self.owner[text]
        else:
            self.owner[text] = o - 1

    # -- one step of one task -----------------------------------------------------------
    def _line(self, task: _Task, body: str) -> str:
        rng = self.rng
        self.clock += rng.random() * 4e-6
        if rng.random() < 0.25:
            return f"{task.name} {body} ts={self.clock:.6f} cpu={task.cpu}\n"
        return f"{task.name} {body}\n"

    def _start(self, task: _Task, out: list[str]) -> int:
        rng = self.rng
        idx = bisect.bisect_left(self.w.path_cum, rng.random() * self.w.path_cum[-1])
        path = self.w.paths[min(idx, len(self.w.paths) - 1)]
        task.path = path
        task.ui = 0
        task.rel = None
        n = 0
        if path.irqoff:
            out.append(self._line(task, "irqs-off"))
            n += 1
        elif path.bhoff:
            out.append(self._line(task, "softirqs-off"))
            n += 1
        return n

    def _acquire_line(self, task: _Task, text: str, mode: str, trylock: bool, extra: str,
                      site: str, sites: bool) -> str:
        body = f"acquire {text}{mode}{' try' if trylock else ''}{extra}"
        if sites:
            body += f" at={site}"
        return self._line(task, body)

    def step(self, task: _Task, out: list[str]) -> int:
        """Emit the task's next event(s); 0 means it is blocked."""
        rng = self.rng
        if task.epilogue:
            out.append(self._line(task, task.epilogue.pop()))
            return 1
        n = 0
        path = task.path
        if path is None:
            n = self._start(task, out)
            path = task.path
            if n:
                return n
        if task.rel is not None:
            return self._release_one(task, out)
        if task.pending:
            text = task.pending.pop()
            unit = path.units[task.ui]
            extra = task.nest if unit[0] == U_BURST else " subclass=1"
            task.held.append((text, W, unit[4]))
            out.append(self._acquire_line(task, text, W, False, extra, unit[4], path.sites))
            if not task.pending:
                task.ui += 1
            return 1
        while task.ui < len(path.units):
            kind, cls, mode, trylock, site, count, nest_i = path.units[task.ui]
            locks = cls.locks
            if kind == U_ONE:
                text = task.want
                if text is None or not self._can(text, mode):
                    text = None
                    for _ in range(3):
                        cand = locks[int(rng.random() * len(locks))]
                        if self._can(cand, mode):
                            text = cand
                            break
                if text is None:
                    if trylock:
                        task.ui += 1  # trylock failed: nothing to trace
                        continue
                    if task.want is None:
                        task.want = locks[int(rng.random() * len(locks))]
                        if mode is W:
                            self.waiting_writers[task.want] = self.waiting_writers.get(task.want, 0) + 1
                            task.waiting = True
                    return 0
                self._stop_waiting(task)
                self._take(text, mode)
                task.held.append((text, mode, site))
                task.ui += 1
                out.append(self._acquire_line(task, text, mode, trylock, "", site, path.sites))
                if not trylock and rng.random() < 0.02:
                    task.epilogue = [f"acquired {text}", f"contended {text}"]
                return 1
            # a pair or a burst: reserve every instance at once (no same-class waits)
            free = [t for t in locks if self.owner.get(t, 0) == 0]
            if len(free) < 2:
                return 0
            if kind == U_PAIR:
                a, b = sorted(rng.sample(free, 2))  # double_rq_lock: by address
                chosen = [a, b]
            else:
                chosen = rng.sample(free, min(count, len(free)))
                serial = task.held[nest_i][0]
                task.serial.add(serial)
                task.nest = f" nest={serial}"
            for t in chosen:
                self._take(t, W)
            chosen.reverse()
            task.pending = chosen
            text = chosen.pop()
            task.held.append((text, W, site))
            out.append(self._acquire_line(task, text, W, False, task.nest if kind == U_BURST else "",
                                          site, path.sites))
            return 1
        # every unit done: release
        held = task.held
        order = list(range(len(held) - 1, -1, -1))
        if len(order) > 1 and path.ooo and rng.random() < path.ooo:
            j = rng.randrange(1, len(order))
            if held[order[j]][0] not in task.serial:
                order.insert(0, order.pop(j))
        task.rel = order
        if not order:
            return self._finish(task, out)
        return self._release_one(task, out)

    def _release_one(self, task: _Task, out: list[str]) -> int:
        i = task.rel.pop(0)
        text, _mode, site = task.held[i]
        task.held[i] = None  # type: ignore[call-overload]
        self._drop(text)
        if task.path.rel_sites:
            out.append(self._line(task, f"release {text} at={site}"))
        else:
            out.append(self._line(task, f"release {text}"))
        if not task.rel:
            return 1 + self._finish(task, out)
        return 1

    def _finish(self, task: _Task, out: list[str]) -> int:
        path = task.path
        task.held = []
        task.serial = set()
        task.rel = None
        task.path = None
        task.nest = ""
        n = 0
        if path.irqoff:
            out.append(self._line(task, "irqs-on"))
            n += 1
        elif path.bhoff:
            out.append(self._line(task, "softirqs-on"))
            n += 1
        if self.rng.random() < 0.05:
            out.append(self._line(task, "exit"))
            n += 1
        return n

    # -- the injected bugs -------------------------------------------------------------
    def _bad_pairs(self) -> list[tuple[str, str]]:
        rng = random.Random(f"lockcheck-bad-{len(self.w.classes)}")
        eligible = [c for c in self.w.classes if c.kind in (SPIN, MUTEX) and not c.nestable]
        pairs: list[tuple[str, str]] = []
        used: set[str] = set()
        while len(pairs) < self.bad:
            a, b = rng.sample(eligible, 2)
            if a.name in used or b.name in used:
                if len(used) >= len(eligible) - 1:
                    raise SystemExit("gen_trace: --bad larger than the number of classes allows")
                continue
            if a.rank > b.rank:
                a, b = b, a
            used.update((a.name, b.name))
            pairs.append((a.locks[0], b.locks[0]))
        return pairs

    # -- main loop ---------------------------------------------------------------------------
    def run(self, write) -> int:
        rng = self.rng
        tasks = self.tasks
        ntasks = len(tasks)
        target = self.events
        # schedule: forward order of pair i at f_i, the inversion at f_i + target/2
        schedule: list[tuple[int, int, bool]] = []
        for i, (a, b) in enumerate(self._bad_pairs()):
            f = int(target * (i + 1) / (2 * (self.bad + 1)))
            schedule.append((f, i, True))
            schedule.append((f + target // 2, i, False))
        schedule.sort()
        pairs = self._bad_pairs() if self.bad else []
        bad_names = [f"bad-{i}/{90000 + i}" for i in range(self.bad)]
        si = 0
        emitted = 0
        out: list[str] = []
        stuck = 0
        while emitted < target:
            while si < len(schedule) and schedule[si][0] <= emitted:
                _, i, forward = schedule[si]
                a, b = pairs[i]
                first, second = (a, b) if forward else (b, a)
                name = bad_names[i]
                site = "at=bad_inversion+0x10/0x40" if forward else "at=bad_inversion+0x24/0x40"
                out.append(f"{name} acquire {first} {site}\n")
                out.append(f"{name} acquire {second} {site}\n")
                out.append(f"{name} release {second}\n")
                out.append(f"{name} release {first}\n")
                out.append(f"{name} exit\n")
                emitted += 5
                si += 1
            task = tasks[int(rng.random() * ntasks)]
            burst = 1 + int(rng.random() * 4)
            got = 0
            for _ in range(burst):
                n = self.step(task, out)
                if not n:
                    break
                got += n
            if got:
                emitted += got
                stuck = 0
            else:
                stuck += 1
                if stuck > 100000:
                    raise RuntimeError("gen_trace: every task is blocked (generator bug)")
            if len(out) >= 4096:
                write("".join(out))
                out.clear()
        # drain: finish every task's current path (no new paths), nothing held at the end
        for task in tasks:
            guard = 0
            while task.path is not None or task.epilogue:
                if task.path is not None and task.rel is None:
                    # stop acquiring: release what is held now
                    path = task.path
                    if task.pending:
                        for t in task.pending:
                            self._drop(t)
                        task.pending = []
                    self._stop_waiting(task)
                    task.ui = len(path.units)
                n = self.step(task, out)
                emitted += n
                guard += 1
                if guard > 1000:
                    raise RuntimeError("gen_trace: drain did not terminate (generator bug)")
        write("".join(out))
        return emitted


def open_output(path: Optional[str], compress: bool) -> TextIO:
    if path in (None, "-"):
        if compress:
            return io.TextIOWrapper(gzip.GzipFile(fileobj=sys.stdout.buffer, mode="wb", compresslevel=6),
                                    encoding="utf-8", newline="\n")
        return sys.stdout
    if compress:
        return gzip.open(path, "wt", compresslevel=6, encoding="utf-8", newline="\n")
    return open(path, "w", encoding="utf-8", newline="\n", buffering=1 << 20)


def generate(out: TextIO, events: int, seed: int, classes: int = 3000, paths: int = 2000,
             tasks: int = 48, bad: int = 0) -> int:
    """Write a whole trace to `out`; return the number of events (non-comment lines)."""
    world = World(seed, classes, paths, tasks)
    out.write("#lockcheck-trace v1\n")
    out.write(f"# generated by benchmarks/gen_trace.py --events {events} --seed {seed} "
              f"--classes {classes} --paths {paths} --tasks {tasks} --bad {bad}\n")
    return Generator(world, seed, events, bad).run(out.write)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000, help="about this many events (default 1000000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--classes", type=int, default=3000, help="lock classes (default 3000)")
    ap.add_argument("--paths", type=int, default=2000, help="code paths in the library (default 2000)")
    ap.add_argument("--tasks", type=int, default=48, help="tasks (default 48)")
    ap.add_argument("--bad", type=int, default=0, help="inject N ABBA inversions (default 0: clean)")
    ap.add_argument("-o", "--output", default=None, help="output file (default: standard output)")
    ap.add_argument("--gzip", action="store_true", help="gzip the output")
    ap.add_argument("--meta", default=None, help="write {events, seconds, ...} as JSON to this file")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    out = open_output(args.output, args.gzip)
    try:
        n = generate(out, args.events, args.seed, args.classes, args.paths, args.tasks, args.bad)
    finally:
        if out is not sys.stdout:
            out.close()
        else:
            out.flush()
    seconds = time.perf_counter() - start
    if args.meta:
        with open(args.meta, "w", encoding="utf-8") as f:
            json.dump({"events": n, "seconds": round(seconds, 3), "seed": args.seed,
                       "classes": args.classes, "paths": args.paths, "tasks": args.tasks,
                       "bad": args.bad, "gzip": args.gzip}, f)
            f.write("\n")
    if args.output not in (None, "-"):
        print(f"gen_trace: {n} events in {seconds:.2f}s ({n / seconds:,.0f} events/s) -> {args.output}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
