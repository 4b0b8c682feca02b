"""Paths given to the writers and to the compile cache (issue 17, findings 4 and 5; found by
tests/campaigns/test_special_paths.py).

Reproduced before the fix: ``Executable.save`` over a FIFO, a directory, a device node or a link to
one raised a raw ``FileExistsError`` (``XlaComputation.save`` said ``FormatError``); ``save(None)``,
``save(3)`` and ``save(b"f.hlo")`` raised raw ``TypeError`` in both; ``xs.compile(comp,
cache="a\\0b")`` failed the compile with a raw ``ValueError`` (embedded null byte), and
``CompileCache(3)`` / ``CompileCache(b"dir")`` raised ``TypeError`` or were taken and failed later.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

import xlasdk as xs
from xlasdk import ops


def _comp() -> xs.XlaComputation:
    b = xs.XlaBuilder("neg")
    return b.build(ops.Neg(ops.Parameter(b, 0, xs.Shape.array_shape(np.float32, (2,)), "x")))


@pytest.mark.parametrize("path", [None, 3, b"f.xlaexe", "a\0b.xlaexe"])
def test_saves_refuse_what_is_not_a_path(tmp_path: Path, path: object) -> None:
    comp = _comp()
    with pytest.raises(xs.FormatError, match=r"save: (a path must be a str|the path .* NUL)"):
        comp.save(path, format="hlo")  # type: ignore[arg-type]
    with pytest.raises(xs.FormatError, match=r"save: (a path must be a str|the path .* NUL)"):
        xs.compile(comp).save(path)  # type: ignore[arg-type]


def test_executable_save_refuses_special_files_and_leaves_them(tmp_path: Path) -> None:
    exe = xs.compile(_comp())
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    d = tmp_path / "dir"
    d.mkdir()
    link = tmp_path / "link.xlaexe"
    link.symlink_to(fifo)
    loop = tmp_path / "loop.xlaexe"
    loop.symlink_to(loop)
    for path, what in ((fifo, "it is a FIFO"), (d, "it is a directory"), (link, "through the link to"),
                       (loop, "loops")):
        with pytest.raises(xs.FormatError, match=f"save.*cannot write the file: .*{what}"):
            exe.save(path)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and d.is_dir() and link.is_symlink() and loop.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "fifo", "link.xlaexe", "loop.xlaexe"]
    # a write that fails for another reason keeps its documented OSError
    with pytest.raises(FileNotFoundError):
        exe.save(tmp_path / "missing" / "m.xlaexe")
    real = tmp_path / "real.xlaexe"
    via = tmp_path / "via.xlaexe"
    via.symlink_to(real)
    exe.save(via)  # a link to a new name: that name is written
    assert via.is_symlink() and real.read_bytes() == exe.serialize()


@pytest.mark.parametrize("directory", [3, b"cache", "a\0b"])
def test_compile_cache_directories_that_are_not_paths(directory: object) -> None:
    with pytest.raises(xs.XlaSdkError, match=r"CompileCache: the directory: (a path must be a str|the path .* NUL)"):
        xs.CompileCache(directory)  # type: ignore[arg-type]


def test_compile_with_a_cache_path_holding_nul_is_an_xlasdk_error() -> None:
    with pytest.raises(xs.XlaSdkError, match="holds a NUL character"):
        xs.compile(_comp(), cache="/tmp/a\0b")
    x = np.array([1.0, -2.0], np.float32)
    np.testing.assert_array_equal(xs.compile(_comp(), cache=False)(x).to_numpy(), -x)
