"""The pytest plugin's option and ini values, each checked when the session starts.

A bad value is a pytest usage error (exit 4) before any test runs, never a
traceback at the session's end after every test ran (`--lockcheck-graph
g.png`), nor a value taken as it came (`lockcheck_grace = nan`, which makes
every wait with it a wait for ever).  Kept apart from
`lockcheck.python.pytest_plugin` so that module stays about the session: the options and
ini values declared, read and checked here, and the tracked locks' `Settings` built from them.
"""

from __future__ import annotations

import math
import os
from typing import Any, Optional

import pytest

from lockcheck.lockdep.checker import Checker
from lockcheck.lockdep.graph import DepGraph
from lockcheck.python.suppression_rules import Rule, RuleError, from_config, parse_rules
from lockcheck.python.settings import DEFAULT_MAX_DEPTH, DEFAULT_STACK_DEPTH, MODES as DEADLOCK_MODES, Settings

#: --lockcheck-mode / lockcheck_mode values
FAIL, WARN = "fail", "warn"
MODES = (FAIL, WARN)


def add_options(group: Any, parser: pytest.Parser) -> None:
    """The options this module owns (`pytest_addoption`)."""
    group.addoption("--lockcheck-report-style", choices=("python", "kernel"), default=None,
                    help="python (default): a short report per finding in the program's terms; "
                         "kernel: the kernel lockdep splat's layout")
    parser.addini("lockcheck_report_style", default="python", help="python (default) or kernel "
                  "(as --lockcheck-report-style)")
    group.addoption("--lockcheck-report", metavar="FILE.json", default=None,
                    help="write every finding (tests, kind, classes, frames, suppressed) as JSON at the session's end")
    parser.addini("lockcheck_report", default="", help="as --lockcheck-report")
    parser.addini("lockcheck_helper_modules", type="linelist", default=[],
                  help="modules whose frames reports skip (as `__tracebackhide__ = True` does), "
                       "so the caller is the reported site")
    group.addoption("--lockcheck-max-depth", metavar="N", type=int, default=None,
                    help=f"locks one thread may hold at once before the session notes it (default "
                         f"{DEFAULT_MAX_DEPTH}; a note, never a failure: no kernel table limits Python)")
    parser.addini("lockcheck_max_depth", default=str(DEFAULT_MAX_DEPTH),
                  help="as --lockcheck-max-depth")


def report_style(config: pytest.Config) -> str:
    """`--lockcheck-report-style` / `lockcheck_report_style`: `python` (the default) or `kernel`."""
    style = option(config, "lockcheck_report_style") or str(config.getini("lockcheck_report_style")).strip().lower()
    if style not in ("python", "kernel"):
        raise pytest.UsageError(f"lockcheck_report_style: expected `python` or `kernel`, not {style!r}")
    return style


def report_path(config: pytest.Config) -> Optional[str]:
    """`--lockcheck-report FILE.json` (relative to the working directory) or the ini's (to the rootdir),
    in a directory that exists -- known now, not after every test ran."""
    path = option(config, "lockcheck_report")
    if not path:
        ini = str(config.getini("lockcheck_report")).strip()
        if not ini:
            return None
        path = str(config.rootpath / ini)
    if os.path.isdir(path) or path.endswith(os.sep):
        raise pytest.UsageError(f"--lockcheck-report: {path}: is a directory (give a .json file)")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise pytest.UsageError(f"--lockcheck-report: {path}: no such directory {parent}")
    return os.path.abspath(path)


def seconds(name: str, value: Any) -> float:
    """A finite number of seconds, 0 or more; else a usage error naming `name`."""
    try:
        number = float(str(value).strip() or 0)
    except ValueError:
        raise pytest.UsageError(f"{name}: expected a number of seconds, not {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise pytest.UsageError(f"{name}: expected a finite number of seconds, 0 or more, not {value!r}")
    return number


def max_depth(option: Optional[int], ini: Any) -> int:
    """`--lockcheck-max-depth` (or the ini value): a positive count of locks."""
    value: Any = option if option is not None else ini
    name = "--lockcheck-max-depth" if option is not None else "lockcheck_max_depth"
    try:
        depth = int(str(value).strip())
    except ValueError:
        raise pytest.UsageError(f"{name}: expected a number of locks, not {value!r}") from None
    if depth < 1:
        raise pytest.UsageError(f"{name}: expected 1 or more locks, not {value!r}")
    return depth


def graph_path(path: Optional[str]) -> None:
    """`--lockcheck-graph FILE`: a format lockcheck writes (by its extension), a file not a directory,
    in a directory that exists -- known now, not after every test ran."""
    if not path:
        return
    from lockcheck.store.graphfile import format_of
    from lockcheck.errors import UsageError

    if path != "-" and (os.path.isdir(path) or path.endswith(os.sep)):
        raise pytest.UsageError(f"--lockcheck-graph: {path}: is a directory (give a .json, .graphml or .dot file)")
    try:
        format_of(path)
    except UsageError as err:
        raise pytest.UsageError(f"--lockcheck-graph: {err}") from None
    parent = os.path.dirname(os.path.abspath(path))
    if path != "-" and not os.path.isdir(parent):
        raise pytest.UsageError(f"--lockcheck-graph: {path}: no such directory {parent}")


def add_all(parser: pytest.Parser) -> None:
    """Every option and ini value of the plugin (`pytest_addoption`)."""
    group = parser.getgroup("lockcheck", "lockdep for the locks of the code under test")
    group.addoption("--lockcheck", action="store_true", default=False,
                    help="track threading/asyncio locks and fail tests that take them in deadlock-prone orders")
    group.addoption("--lockcheck-trace", metavar="FILE", default=None,
                    help="write the recorded lock events as a .lt trace (for `lockcheck check FILE`)")
    group.addoption("--lockcheck-graph", metavar="FILE", default=None,
                    help="save the session's dependency graph (.json, .graphml, .dot)")
    group.addoption("--lockcheck-mode", choices=MODES, default=None,
                    help="fail (default): findings fail their test and the session; "
                         "warn: report them without failing anything")
    group.addoption("--lockcheck-stack-depth", metavar="N", type=int, default=None,
                    help="Python frames shown for each acquisition site in reports (default 5; 0: none)")
    group.addoption("--lockcheck-deadlock", choices=DEADLOCK_MODES, default=None,
                    help="a blocking acquire that closes a cycle of waits: raise lockcheck.DeadlockError "
                         "(default), report it and keep waiting, or off")
    group.addoption("--lockcheck-hang-report", metavar="SECONDS", type=float, default=None,
                    help="print who holds and waits for which lock, and the stacks, when a test "
                         "runs longer than SECONDS (pytest-timeout and faulthandler_timeout get it anyway)")
    group.addoption("--lockcheck-waits", action="store_true", default=None,
                    help="also check waits on events under locks (Thread.join, Future.result, Queue.get, "
                         "Event.wait, Condition.wait, asyncio events and queues)")
    add_options(group, parser)
    parser.addini("lockcheck", type="bool", default=False, help="enable lockcheck (as --lockcheck)")
    parser.addini("lockcheck_mode", default="fail", help="fail (default) or warn (as --lockcheck-mode)")
    parser.addini("lockcheck_order", default="",
                  help="a declared lock order file (`A < B` lines, as `lockcheck check --order`)")
    parser.addini("lockcheck_stack_depth", default=str(DEFAULT_STACK_DEPTH),
                  help="Python frames shown for each acquisition site (as --lockcheck-stack-depth)")
    parser.addini("lockcheck_suppress", type="linelist", default=[],
                  help="findings not to report: lines of `KIND CLASSGLOB...`")
    parser.addini("lockcheck_grace", default="1.0",
                  help="seconds a re-acquire of a held Lock waits for another thread's release before raising "
                       "(and a cycle of waits through a Lock must stand before it is reported)")
    parser.addini("lockcheck_thread_wait", default="5",
                  help="seconds the session waits, before its summary, for threads the tests left running "
                       "(what they do until then is checked)")
    parser.addini("lockcheck_deadlock", default="raise",
                  help="raise (default), report or off (as --lockcheck-deadlock)")
    parser.addini("lockcheck_hang_report", default="0",
                  help="seconds after which a running test gets a hang report (as --lockcheck-hang-report)")
    parser.addini("lockcheck_waits", type="bool", default=False,
                  help="check waits on events under locks (as --lockcheck-waits)")
    parser.addini("lockcheck_interrupts", type="bool", default=True,
                  help="signal handlers and finalizers run as interrupt contexts (lockdep's irq checks)")
    parser.addini("lockcheck_timed_acquire", default="try",
                  help="`try` (default): acquire(timeout=...) is a trylock; `blocking`: validated as blocking")


def option(config: pytest.Config, name: str, default: Any = None) -> Any:
    """A command-line option, also before the command line is fully parsed (the early hooks,
    where `config.option` holds only the defaults but `known_args_namespace` the command line)."""
    early = getattr(config, "known_args_namespace", None)
    if early is not None and getattr(early, name, None) is not None:
        return getattr(early, name)
    try:
        return config.getoption(name)
    except (ValueError, AttributeError):
        return default


def make_checker(config: pytest.Config) -> Checker:
    """The session's checker: with `lockcheck_order`, one that also reports every dependency
    against the declared order (and is seeded with it, so the first inversion is a cycle)."""
    path = str(config.getini("lockcheck_order")).strip()
    if not path:
        return Checker()
    from lockcheck.errors import TraceError
    from lockcheck.lockdep.order import OrderChecker, load_order

    path = str(config.rootpath / path)
    try:
        order = load_order(path)
    except TraceError as err:
        raise pytest.UsageError(f"lockcheck_order: {err}") from None
    graph = DepGraph()
    order.seed(graph)
    return OrderChecker(order, graph)


def deadlock_mode(config: pytest.Config) -> str:
    """What a cycle of waits does (`Settings.deadlock`, read by `lockcheck.python.waitfor`)."""
    mode = (option(config, "lockcheck_deadlock") or str(config.getini("lockcheck_deadlock")).strip().lower()
            or DEADLOCK_MODES[0])
    if mode not in DEADLOCK_MODES:
        raise pytest.UsageError(f"lockcheck_deadlock: expected `raise`, `report` or `off`, not {mode!r}")
    return mode


def hang_hooks(config: pytest.Config, rec: Any) -> Any:
    """The hang report's hooks (`lockcheck.python.hang`)."""
    from lockcheck.python import hang

    given = option(config, "lockcheck_hang_report")
    if given is None:
        after = seconds("lockcheck_hang_report", config.getini("lockcheck_hang_report"))
    else:
        after = seconds("--lockcheck-hang-report", given)
    return hang.HangHooks(config, rec, after)


def session_mode(config: pytest.Config) -> str:
    mode = option(config, "lockcheck_mode") or str(config.getini("lockcheck_mode")).strip().lower() or FAIL
    if mode not in MODES:
        raise pytest.UsageError(f"lockcheck_mode: expected `fail` or `warn`, not {mode!r}")
    return mode


def whole_number(config: pytest.Config, name: str, what: str, minimum: int) -> int:
    """A count given as `--NAME` or as the ini value NAME, checked now: a usage error names the
    option and what it counts."""
    value = option(config, name)
    if value is None:
        try:
            value = int(str(config.getini(name)).strip())
        except ValueError:
            raise pytest.UsageError(f"{name}: expected a number of {what}") from None
    if value < minimum:
        raise pytest.UsageError(f"--{name.replace('_', '-')}: expected {minimum} or more {what}, not {value}")
    return value


def read_stack_depth(config: pytest.Config) -> int:
    return whole_number(config, "lockcheck_stack_depth", "frames", 0)


def build_settings(config: pytest.Config) -> Settings:
    """The tracked locks' `Settings`, from the options and ini values, each checked now."""
    timed = str(config.getini("lockcheck_timed_acquire")).strip().lower()
    if timed not in ("try", "blocking"):
        raise pytest.UsageError(f"lockcheck_timed_acquire: expected `try` or `blocking`, not {timed!r}")
    return Settings(grace=seconds("lockcheck_grace", config.getini("lockcheck_grace")),
                    timed_is_try=timed == "try", stack_depth=read_stack_depth(config),
                    max_depth=max_depth(option(config, "lockcheck_max_depth"), config.getini("lockcheck_max_depth")),
                    deadlock=deadlock_mode(config), report_style=report_style(config))


def suppress_rules(config: pytest.Config) -> list[Rule]:
    """The session's suppression rules: `lockcheck_suppress` lines (ini, or
    `[tool.pytest.ini_options]`), then `[tool.lockcheck] suppress` of the rootdir's
    pyproject.toml -- the table `lockcheck check` reads, so one file serves both.  A kind that is
    no kind is a usage error naming it (with the nearest kind)."""
    from lockcheck.errors import TraceError
    from lockcheck.report.suppress import load_pyproject

    try:
        rules = parse_rules(list(config.getini("lockcheck_suppress")))
    except RuleError as err:
        raise pytest.UsageError(f"lockcheck_suppress: {err}") from None
    path = config.rootpath / "pyproject.toml"
    if path.is_file():
        try:
            table = load_pyproject(str(path))
            known = {rule[:2] for rule in rules}
            rules += [rule._replace(origin=rule.origin.replace(str(path), path.name))
                      for rule in from_config(table.suppressions) if rule[:2] not in known]
        except TraceError as err:
            raise pytest.UsageError(str(err)) from None
        except RuleError as err:
            raise pytest.UsageError(f"{path}: [tool.lockcheck] suppress: {err}") from None
    return rules
