"""Lockdep's semantics, with the kernel's names: the checker, irq usage, the dependency graph, findings."""
