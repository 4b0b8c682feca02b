"""Every public error class is defined in ``xlasdk/errors.py`` (issue 44 step 5).

Read from the package as it loads: every exception class ``xlasdk`` exports, and every public
subclass of :class:`~xlasdk.XlaSdkError` any module of the package defines (each module imported),
is ``xlasdk.errors``' own class, but for the few in :data:`ELSEWHERE` (each says why). The
classes that moved there stay importable from their old paths, as the same class.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import xlasdk as xs
from xlasdk import errors

#: public error classes defined outside errors.py, by ``module.name``, each with why
ELSEWHERE: dict[str, str] = {
    "xlasdk.xla_client._shapes.CompileError": (
        "the xla_client compatibility surface: jaxlib's XlaRuntimeError hierarchy, also xlasdk's CompileError"),
    "xlasdk.xla_client._shapes.FormatError": (
        "the xla_client compatibility surface: jaxlib's XlaRuntimeError hierarchy, also xlasdk's FormatError"),
    "xlasdk._reduce_against.NotDifferent": "never reaches a user: reduce(against=) raises it as NotReproducedError",
    "xlasdk._jaxlib.protodesc.SchemaUnavailable": "never reaches a user: the text-proto reader raises a FormatError",
}

#: classes of errors.__all__ that ``xlasdk`` does not export (a user reaches them as ``xlasdk.errors.X``)
NOT_EXPORTED: dict[str, str] = {}

#: the classes that moved to errors.py and the old paths they stay importable from
MOVED: dict[str, tuple[str, ...]] = {
    "UnknownDeviceError": ("xlasdk.runtime.device", "xlasdk.runtime"),
    "CompileOnlyError": ("xlasdk.runtime.topology",),
    "UnsupportedOpError": ("xlasdk.reference._walk", "xlasdk.reference._evaluator", "xlasdk.reference"),
    "CollectiveTimeoutError": ("xlasdk.reference.collectives",),
    "NotReproducedError": ("xlasdk.reducer",),
    "DLPackError": ("xlasdk._jaxlib.dlpack", "xlasdk._jaxlib.pjrt"),
}


def _exported_errors() -> dict[str, type[BaseException]]:
    return {n: o for n in xs.__all__ if inspect.isclass(o := getattr(xs, n)) and issubclass(o, BaseException)}


def _subclasses(cls: type[BaseException]) -> set[type[BaseException]]:
    out: set[type[BaseException]] = set()
    for sub in cls.__subclasses__():
        out |= {sub, *_subclasses(sub)}
    return out


def _package_errors() -> set[type[BaseException]]:
    """Every subclass of XlaSdkError the package's modules define (each imported)."""
    for m in pkgutil.walk_packages(xs.__path__, "xlasdk."):
        if not m.name.endswith("__main__"):
            importlib.import_module(m.name)
    return _subclasses(errors.XlaSdkError)


def test_every_exported_error_is_defined_in_errors() -> None:
    exported = _exported_errors()
    assert len(exported) >= 20  # the search reads what it should
    elsewhere = {n: c.__module__ for n, c in exported.items() if c.__module__ != "xlasdk.errors"}
    assert not elsewhere, f"exported error classes defined outside xlasdk/errors.py: {elsewhere}: move them there"
    assert all(getattr(errors, n) is c and n in errors.__all__ for n, c in exported.items())
    not_exported = set(errors.__all__) - set(exported)
    assert not_exported == set(NOT_EXPORTED), f"errors.__all__ names classes xlasdk does not export: {not_exported}"


def test_every_public_error_of_the_package_is_defined_in_errors() -> None:
    """A public error class of any module (it may reach a user) is errors.py's, or ELSEWHERE says why."""
    found = {f"{c.__module__}.{c.__qualname__}" for c in _package_errors()
             if c.__module__ != "xlasdk.errors" and not c.__name__.startswith("_")}
    assert len(_subclasses(errors.XlaSdkError)) > 25
    unknown = sorted(found - set(ELSEWHERE))
    assert not unknown, f"public error classes defined outside xlasdk/errors.py: {unknown}: move them there"
    stale = sorted(set(ELSEWHERE) - found)
    assert not stale, f"ELSEWHERE names classes that are gone or in errors.py: {stale}"


@pytest.mark.parametrize(("name", "old"), [(n, m) for n, ms in MOVED.items() for m in ms])
def test_a_moved_error_keeps_its_old_path(name: str, old: str) -> None:
    assert getattr(importlib.import_module(old), name) is getattr(errors, name)


def test_the_moved_errors_keep_their_bases() -> None:
    assert issubclass(errors.UnknownDeviceError, ValueError)
    assert issubclass(errors.DLPackError, BufferError) and issubclass(errors.DLPackError, errors.XlaRuntimeError)
    assert all(issubclass(getattr(errors, n), errors.XlaSdkError) for n in MOVED)
    b = xs.XlaBuilder("b")
    with pytest.raises(xs.UnknownDeviceError, match="nosuch"):
        xs.compile(b.build(xs.ops.Constant(b, 1.0)), device="nosuch:7")
