"""lockcheck: the Linux kernel's lockdep, as a tool over lock traces and Python test suites.

The pipeline, one module per step: `readers` (trace text -> `events.Event`),
`checker` (lockdep's semantics -> `findings.Finding`, filling a
`graph.DepGraph`), `report` (findings -> kernel-format text, JSON, SARIF).
"""

__version__ = "0.1.0"
