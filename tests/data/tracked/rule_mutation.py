"""A trylock rule mutation seen through the plugin (tests/test_rules.py): argv[1] is kernel, mutated
(trylocks validated like blocking acquires) or stale (mutated, but the compiled core given the
kernel's tables); prints the core in use and the finding kinds."""
import json, sys, threading
from lockcheck.lockdep import rules
from lockcheck.python import core, instrument

mode = sys.argv[1]
if mode != "kernel":
    stale = rules.compiled_tables()
    rules.validates_chain = lambda trylock, check: bool(check)
    if mode == "stale":
        rules.compiled_tables = lambda: stale
with instrument.instrument() as rec:
    a = threading.Lock()
    b = threading.Lock()
    def run(fn):
        t = threading.Thread(target=fn); t.start(); t.join()
    def known():
        with b: pass
        with a: pass
        with a:
            if b.acquire(False):
                b.release()
    def tries():
        with a:
            if b.acquire(False):
                b.release()
    def reverse():
        with b:
            with a: pass
    run(known); run(tries); run(reverse)
print(json.dumps({"core": core.CORE is not None, "kinds": sorted((f[0] if isinstance(f, tuple) else f).kind for f in rec.findings)}))
