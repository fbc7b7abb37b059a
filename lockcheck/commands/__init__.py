"""The command line: one module per command; `cli` only parses."""
