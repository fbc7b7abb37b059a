"""Lockdep for live Python code: the pytest plugin, tracked locks, the recorder, waits and hangs."""
