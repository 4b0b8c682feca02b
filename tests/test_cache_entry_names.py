"""Names of compile-cache entries are trusted for nothing before the entry's checksum holds, and are
printed one line each (issue 17, finding 6; found by tests/campaigns/test_headers.py).

Reproduced before the fix: ``CompileCache.entries()`` read the name from an entry's header without
checking its sha256, so a corrupt (or planted) entry was listed under whatever name it claimed, and
a name holding a newline or a terminal escape sequence (``"\\x1b[2J"`` clears the screen) went as
is into ``xlasdk cache info --list``, breaking its one line per entry."""

from __future__ import annotations

import io
from pathlib import Path

import xlasdk as xs
from xlasdk.cli import main

KEYS = ("ab" * 32, "cd" * 32, "ef" * 32)


def _cache(tmp_path: Path) -> xs.CompileCache:
    cache = xs.CompileCache(tmp_path)
    cache.put(KEYS[0], b"payload", name="plain")
    cache.put(KEYS[1], b"payload", name="two\nlines\x1b[2J")
    cache.put(KEYS[2], b"payload", name="claimed")
    path = tmp_path / f"{KEYS[2]}.xlaexe"
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 1  # the payload's last byte: the sha256 no longer holds, the header is intact
    path.write_bytes(bytes(raw))
    return cache


def test_names_are_printable_and_read_only_from_entries_whose_checksum_holds(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    names = {e.key: e.name for e in cache.entries()}
    assert names == {KEYS[0]: "plain", KEYS[1]: "two?lines?[2J", KEYS[2]: "?"}
    assert cache.get(KEYS[2]) is None  # and the corrupt entry is a miss (and deleted)
    assert {e.key for e in cache.entries()} == {KEYS[0], KEYS[1]}


def test_an_entry_under_another_key_has_no_name(tmp_path: Path) -> None:
    cache = xs.CompileCache(tmp_path)
    cache.put(KEYS[0], b"payload", name="moved")
    (tmp_path / f"{KEYS[0]}.xlaexe").rename(tmp_path / f"{KEYS[1]}.xlaexe")
    assert [(e.key, e.name) for e in cache.entries()] == [(KEYS[1], "?")]


def test_cache_info_list_prints_one_line_per_entry(tmp_path: Path) -> None:
    _cache(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert main(["cache", "info", "--list", "--dir", str(tmp_path)], stdout=out, stderr=err) == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    assert "entries:   3" in lines
    listed = [ln for ln in lines if ln.startswith("  ")]
    assert len(listed) == 3 and "\x1b" not in out.getvalue()
    assert sorted(ln.split()[-1] for ln in listed) == ["?", "plain", "two?lines?[2J"]


def test_jaxlib_environments_are_listed_and_cleared_with_the_cache(tmp_path: Path) -> None:
    """The environments ``--against-jaxlib`` makes (about 550 MB each) live under the cache's ``envs/``:
    ``cache info`` lists them with their sizes and ``cache clear`` deletes them (a new user found them
    in neither); an unfinished one and a directory the command did not make are left alone."""
    _cache(tmp_path)
    envs = tmp_path / "envs"
    done = envs / "jaxlib-0.12.0.1-py3.12"
    (done / "bin").mkdir(parents=True)
    (done / ".xlasdk-env-complete").write_text("0.12.0.1\n")
    (done / "bin" / "python").write_bytes(b"x" * 3000)
    half = envs / ".tmp-xlasdk-env-abc"
    half.mkdir()
    other = envs / "mine"
    other.mkdir()
    out, err = io.StringIO(), io.StringIO()
    assert main(["cache", "info", "--dir", str(tmp_path)], stdout=out, stderr=err) == 0, err.getvalue()
    text = out.getvalue()
    assert "jaxlib environments (--against-jaxlib): 1," in text and "jaxlib-0.12.0.1-py3.12" in text, text
    out = io.StringIO()
    assert main(["cache", "clear", "--dir", str(tmp_path)], stdout=out, stderr=err) == 0, err.getvalue()
    assert "removed 1 jaxlib environment" in out.getvalue(), out.getvalue()
    assert not done.exists() and half.exists() and other.exists()
