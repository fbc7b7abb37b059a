"""A lock workload run under `lockcheck.python.instrument.instrument()`, printed as JSON: what the recorder
recorded (findings as rendered, the dependency graph with its evidence, the statistics, what each
task still holds) and how many events went through `Recorder.feed` (the Python path).

tests/test_trackedcore.py runs it with the compiled hit path and with `LOCKCHECK_PURE=1`: the
two must record the same.  Threads run one at a time, so the run is deterministic.
"""

import sys
import threading

import lockcheck
from lockcheck.python import instrument as pylocks, interrupts as pyirq
from recorded_state import print_recorded  # (this folder: the script's own)


class Account:
    def __init__(self):
        self.lock = threading.Lock()


def in_thread(fn, *args):
    t = threading.Thread(target=fn, args=args)
    t.start()
    t.join()


def workload():
    accounts = [Account() for _ in range(3)]
    bank = threading.Lock()
    stats = threading.RLock()
    cond = threading.Condition()
    plain_cond = threading.Condition(threading.Lock())
    a, b = threading.Lock(), threading.Lock()

    def transfers(n):
        for i in range(n):
            x, y = accounts[i % 3], accounts[(i + 1) % 3]
            first, second = (x, y) if id(x) < id(y) else (y, x)
            with bank:
                with first.lock:
                    with lockcheck.nested(second.lock, 1):
                        pass
            with stats:
                with stats:
                    pass
            stats.acquire()
            stats.release()
            bank.acquire()
            bank.release()
            if bank.acquire(False):  # a trylock
                bank.release()
            if bank.acquire(timeout=1):  # timed: a trylock by default
                bank.release()
            with cond:
                cond.notify_all()
            with plain_cond:
                plain_cond.notify()
            with lockcheck.nested(stats, 2):
                pass

    transfers(50)
    pylocks.active_recorder().set_context("tests/t.py::test_two")  # a new comm for every task
    in_thread(transfers, 40)
    transfers(5)

    # an inversion across two threads
    def ab():
        with a:
            with b:
                pass

    def ba():
        with b:
            with a:
                pass

    in_thread(ab)
    in_thread(ba)
    # the same class twice, unannotated (recursive locking), then the same again (a cached chain)
    for _ in range(3):
        with accounts[0].lock:
            with accounts[1].lock:
                pass
    # a Condition wait that times out: release and re-acquire of its RLock
    with cond:
        cond.wait(0.01)
    # released out of order
    bank.acquire()
    a.acquire()
    bank.release()
    a.release()
    # released by another thread (the signal pattern)
    b.acquire()
    in_thread(b.release)
    # a hold's object used again for the next hold (the compiled core keeps popped ones): the
    # dependency taken under the second hold says where that hold began, not the first
    p, q, r = threading.Lock(), threading.Lock(), threading.Lock()
    for _ in range(2):
        with q:
            pass
    with p:
        with r:
            pass
    with q:
        with r:
            pass
    # a thread that ends holding an RLock, then the RLock taken (held-at-exit)
    leftover = threading.RLock()
    in_thread(leftover.acquire)
    leftover.acquire(timeout=0.01)


def main() -> int:
    with pylocks.instrument() as rec:
        pyirq.start(rec)
        try:
            workload()
        finally:
            pyirq.stop(rec)
        rec.drain()
    print_recorded(rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
