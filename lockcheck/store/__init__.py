"""Saved graphs: files, their schema, baselines merged into a check."""
