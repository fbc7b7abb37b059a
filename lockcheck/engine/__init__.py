"""The per-event state: chain-cache hits applied without the checker, misses handed to it."""
