"""The worker's requests run in this process, when another process watches this one.

The ``xlasdk`` command's supervised child (``xlasdk.cli._supervisor``) is already the isolation
that :mod:`.isolated`'s worker gives a user's process: an abort of XLA ends the child, and the
command reports it. A second process for the loads and compiles would only cost its start, its
imports and its own device client. So the child installs a :class:`Host` (:func:`install`), and
:func:`.isolated.request` runs each request that says what its death means (``on_death``) here,
with the worker's checks and limits:

* the same replies: a clean failure is :class:`~.isolated.Failed`, a ``RecursionError`` is
  ``Failed("recursion")``, a ``MemoryError`` or an allocation XLA reports as failed is
  ``Failed("memory")`` naming the budget, any other exception ``Failed("internal")``;
* the same memory budget (:func:`~.isolated.memory_budget`) as this process's ``RLIMIT_DATA``
  soft limit while the request runs (restored after it: the run that follows is bounded by its
  own checks, as in the user's process);
* the same time limit: before the request, the host is handed the limit and what the caller
  raises when the worker runs past it (``on_death`` of a timed-out :class:`~.isolated.WorkerDied`);
  the watching process enforces it (native code cannot be interrupted from here) and reports
  that. After the request the host is told it ended; a process that dies in between died in the
  request: the watcher knows, and runs the command once more with the worker doing the requests,
  so that the death is reported as the worker's always was (``xlasdk.cli._supervisor``).

A request without ``on_death`` (its caller relies on surviving a death: none on the command's
paths) still goes to the worker.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Protocol

from . import isolated


class Host(Protocol):
    """What the watching process is told about each request run here."""

    def before(self, deaths: dict[str, BaseException], timeout: float | None, budget: int | None) -> None:
        """A request starts: ``deaths`` maps ``"timed_out"`` (when ``timeout`` is set) to what the
        caller raises when the request runs past ``timeout`` seconds; ``budget``: its memory budget."""

    def after(self) -> None:
        """The request ended (returned or raised)."""


_host: Host | None = None


def install(host: Host | None) -> None:
    """Run the worker's requests in this process from now on, reporting to ``host`` (None: the worker again)."""
    global _host
    _host = host
    isolated._local_runner = _run_target if host is not None else None


def _run_target(target: str, args: tuple[Any, ...], timeout: float | None,
                on_death: Callable[[isolated.WorkerDied], BaseException]) -> Any:
    return call(target_function(target), args, timeout, on_death)


def active() -> bool:
    """Whether requests run in this process (a :class:`Host` is installed)."""
    return _host is not None


def call(fn: Callable[..., Any], args: tuple[Any, ...], timeout: float | None,
         on_death: Callable[[isolated.WorkerDied], BaseException]) -> Any:
    """``fn(*args)`` here, as the worker would run it and reply (see the module's docstring)."""
    host = _host
    assert host is not None
    budget = isolated.memory_budget()  # raises, as a worker's start does, on a bad XLASDK_WORKER_MEMORY
    deaths: dict[str, BaseException] = {}
    if timeout is not None:
        deaths["timed_out"] = on_death(isolated.WorkerDied(f"did not finish within {timeout:g} s", timed_out=True))
    host.before(deaths, timeout, budget)
    restore = _limit_data(budget)
    muted = _mute_stderr()
    try:
        return fn(*args)
    except isolated.Failed as e:
        if budget is not None and e.stage != "memory" and isolated.is_out_of_memory(e.message):
            raise isolated.Failed("memory", f"{isolated.budget_exceeded(budget)} ({' '.join(e.message.split())[:300]})"
                                  ) from None
        raise
    except RecursionError:
        raise isolated.Failed("recursion", "nested too deeply") from None
    except MemoryError:
        raise isolated.Failed("memory", isolated.budget_exceeded(budget)) from None
    except Exception as e:  # as the worker replies to a bug in a request
        raise isolated.Failed("internal", f"{type(e).__name__}: {e}") from None
    finally:
        muted()
        restore()
        host.after()


def _mute_stderr() -> Callable[[], None]:
    """Send fd 2 to /dev/null until the returned function is called: what native code prints on the
    way to a clean failure (MLIR's ``loc("-":0:0): error: ...`` before a deserialization error) goes
    to the worker's log there, never to the user's terminal; the error is the reply. (A death here
    is reported from the worker's run of the same request, which has its last words.)"""
    import os
    import sys

    try:
        sys.stderr.flush()
        saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
    except OSError:  # pragma: no cover - no usable fd 2: nothing to mute
        return lambda: None

    def unmute() -> None:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)

    return unmute


def target_function(target: str) -> Callable[..., Any]:
    """The function ``"package.module:function"`` names (as the worker finds it)."""
    modname, _, fname = target.partition(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(modname), fname)
    return fn


def _limit_data(budget: int | None) -> Callable[[], None]:
    """Lower this process's ``RLIMIT_DATA`` soft limit to ``budget`` (never above the hard limit,
    never above a lower soft limit already set); returns the function that puts it back."""
    if budget is None:
        return lambda: None
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        limit = budget
        for bound in (soft, hard):
            if bound != resource.RLIM_INFINITY:
                limit = min(limit, bound)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (ImportError, OSError, ValueError):
        return lambda: None

    def restore() -> None:
        try:
            resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
        except (OSError, ValueError):  # pragma: no cover - raising a soft limit up to the hard one is allowed
            pass

    return restore
