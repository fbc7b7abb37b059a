"""Kernel artefacts: /proc/lockdep dumps, boots, captures, lockdep reports read back from logs."""
