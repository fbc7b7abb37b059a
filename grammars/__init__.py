"""The lark grammars of lockcheck's input formats, installed as the package `lockcheck.grammars`.

This folder is data; the file makes it importable so `importlib.resources`
finds the grammars in a wheel and in an editable install alike.
"""
