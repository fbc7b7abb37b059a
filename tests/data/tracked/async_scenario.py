"""An asyncio lock workload run under `instrument()`, printed as JSON as scenario.py prints its
threading one: tests/test_trackedcore.py runs it with the compiled hit path and with
`LOCKCHECK_PURE=1`, and the two must record the same (report, graph, statistics, held stacks).
One event loop, tasks awaited one at a time where order matters: the run is deterministic.
"""

import asyncio
import sys

from lockcheck.python import instrument as pylocks
from recorded_state import print_recorded  # (this folder: the script's own)


class Store:
    def __init__(self):
        self.lock = asyncio.Lock()
        self.cond = asyncio.Condition()


async def workload():
    stores = [Store() for _ in range(3)]
    registry = asyncio.Lock()
    pool = asyncio.Semaphore(2)
    bounded = asyncio.BoundedSemaphore(3)
    mutex = asyncio.BoundedSemaphore(1)
    a = asyncio.Lock()

    async def work(n):
        for i in range(n):
            store = stores[i % 3]
            async with registry:
                async with store.lock:
                    pass
            async with pool:
                async with store.lock:
                    pass
            async with bounded:
                async with bounded:
                    async with registry:
                        pass
            await registry.acquire()
            registry.release()
            async with store.cond:
                store.cond.notify_all()

    await work(30)
    await asyncio.get_running_loop().create_task(work(20))  # another task
    pylocks.active_recorder().set_context("tests/t.py::test_two")  # a new comm for every task
    await asyncio.gather(work(10), work(10))  # interleaved: contended waits

    # an inversion across two tasks through a BoundedSemaphore(1)
    async def one():
        async with mutex:
            async with a:
                pass

    async def two():
        async with a:
            async with mutex:
                pass

    await asyncio.create_task(one())
    await asyncio.create_task(two())
    # a Condition wait that times out: release and re-acquire of its lock
    cond = stores[0].cond
    async with cond:
        try:
            await asyncio.wait_for(cond.wait(), 0.01)
        except asyncio.TimeoutError:
            pass
    # released out of order
    await registry.acquire()
    await a.acquire()
    registry.release()
    a.release()
    # a permit released by another task (a hand-off), and a lock left held
    await bounded.acquire()

    async def hand_back():
        bounded.release()

    await asyncio.create_task(hand_back())
    await stores[1].lock.acquire()


def main() -> int:
    with pylocks.instrument() as rec:
        asyncio.run(workload())
        rec.drain()
    print_recorded(rec, chain_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
