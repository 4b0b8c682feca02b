"""``--against-jaxlib VERSION``: a virtual environment with that jaxlib (and numpy, ml_dtypes) for
:class:`~._other_env.OtherEnvironment`, made once with this interpreter's Python and pip, and kept
under xlasdk's cache directory (:func:`xlasdk._cache.default_cache_dir`, ``envs/``) when that
directory passes the cache's trust rules (:mod:`xlasdk._cache_trust`: the user's, writable by no one
else, nothing on the way another user controls); else it is refused, saying why.

The environment is made in a temporary directory beside its final one and renamed into place only
when pip succeeded, so a half-made one is never used. Without a network pip's own error is said.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

from .._jaxlib.versions import jaxlib_version
from ..errors import OtherEnvironmentError
from ._other_env import in_range

__all__ = ["checked_version", "venv_commands", "jaxlib_environment"]

_VERSION = re.compile(r"\d+(\.\d+){1,3}(\.post\d+)?")


def checked_version(version: str) -> str:
    """``version`` when it is a release number in xlasdk's jaxlib range (``0.12.0.1``) other than
    the installed one, else an OtherEnvironmentError saying what was expected (the installed
    release would be compared with itself, in an environment of about 550 MB made for nothing)."""
    if not _VERSION.fullmatch(version):
        raise OtherEnvironmentError(f"--against-jaxlib {version!r}: expected a jaxlib release number such as 0.12.1")
    if not in_range(version):
        raise OtherEnvironmentError(f"--against-jaxlib {version}: xlasdk supports jaxlib>=0.10.2,<0.13")
    if _release(version) == _release(jaxlib_version()):
        raise OtherEnvironmentError(
            f"--against-jaxlib {version}: that is the jaxlib installed here; name another release of "
            "jaxlib>=0.10.2,<0.13 to compare with (or --against-python PATH for another interpreter)"
        )
    return version


def _release(version: str) -> tuple[tuple[int, ...], int] | None:
    """A release number as pip compares it: its numbers without leading zeros or trailing zero parts
    (``0.12.1``, ``0.12.1.0`` and ``0.012.01`` are one release) and its ``.postN``; None for another
    form (``unknown``)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)*)(?:\.post(\d+))?", version)
    if m is None:
        return None
    nums = [int(x) for x in m[1].split(".")]
    while len(nums) > 1 and nums[-1] == 0:
        nums.pop()
    return tuple(nums), int(m[2] or 0)


def env_directory(version: str, cache_dir: str | None = None) -> str:
    """Where the environment of jaxlib ``version`` for this Python (major.minor) lives."""
    from .._cache import default_cache_dir

    base = cache_dir if cache_dir is not None else default_cache_dir()
    return os.path.join(base, "envs", f"jaxlib-{version}-py{sys.version_info[0]}.{sys.version_info[1]}")


def venv_commands(version: str, directory: str, python: str | None = None) -> list[list[str]]:
    """The commands that make the environment in ``directory``: a venv of ``python`` (this
    interpreter), then pip installing jaxlib ``version``, numpy and ml_dtypes into it."""
    py = python or sys.executable
    return [[py, "-m", "venv", directory],
            [os.path.join(directory, "bin", "python"), "-m", "pip", "install", "--disable-pip-version-check",
             "--no-input", f"jaxlib=={version}", "numpy", "ml_dtypes"]]


def jaxlib_environment(version: str, cache_dir: str | None = None, timeout: float = 1800.0) -> str:
    """The interpreter of the cached environment of jaxlib ``version``, made first when missing.

    Raises
    ------
    OtherEnvironmentError
        A version out of range, an untrusted cache directory, or venv / pip failing (pip's last
        words said: offline, no such release for this Python...).
    """
    from .. import _cache_trust as trust
    from .._cache import _make_private_dirs

    version = checked_version(version)
    final = env_directory(version, cache_dir)
    python = os.path.join(final, "bin", "python")
    envs = os.path.dirname(final)
    cache = os.path.dirname(envs)
    try:
        problem = trust.directory_problem(cache)
    except FileNotFoundError:
        _make_private_dirs(cache)
        problem = trust.directory_problem(cache)
    if problem is not None:
        raise OtherEnvironmentError(f"--against-jaxlib {version}: the cache directory {cache} is not trusted: "
                                    f"{problem}")
    if os.path.isfile(os.path.join(final, ".xlasdk-env-complete")) and os.path.exists(python):
        return python
    _make_private_dirs(envs)
    work = tempfile.mkdtemp(prefix=".tmp-xlasdk-env-", dir=envs)
    try:
        for cmd in venv_commands(version, work):
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                                   stdin=subprocess.DEVNULL)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise OtherEnvironmentError(f"--against-jaxlib {version}: {' '.join(cmd[:3])} failed: {e}") from None
            if r.returncode != 0:
                tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-6:])
                raise OtherEnvironmentError(f"--against-jaxlib {version}: `{' '.join(cmd[1:4])}` failed (exit code "
                                            f"{r.returncode}; offline, or no such release for Python "
                                            f"{sys.version_info[0]}.{sys.version_info[1]}?):\n{tail}")
        with open(os.path.join(work, ".xlasdk-env-complete"), "w") as f:
            f.write(version + "\n")
        shutil.rmtree(final, ignore_errors=True)  # an incomplete one left by an older xlasdk
        os.replace(work, final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return python
