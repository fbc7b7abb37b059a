"""`lockcheck stat`: lock contention per class, as the kernel's /proc/lock_stat shows it.

The pipeline, one module per step:

- `collect`: trace events -> per-class statistics, with lock_stat's own
  semantics (kernel/locking/lockdep.c, CONFIG_LOCK_STAT);
- `dump`: a /proc/lock_stat dump -> the same statistics;
- `inputs`: files (traces or dumps) -> one `Table`;
- `model`: the statistics (`struct lock_time`, `struct lock_class_stats`);
- `render`: the /proc/lock_stat text layout and JSON;
- `command`: the `lockcheck stat` options and wiring.
"""

from __future__ import annotations

from lockcheck.stat.model import COLUMNS, ClassStats, LockTime

__all__ = ["COLUMNS", "ClassStats", "LockTime"]
