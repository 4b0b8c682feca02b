"""No module of xlasdk over 800 lines (CONTRIBUTING; issue 34): a module that grows past it is
split along its seams, not cut anywhere."""

from __future__ import annotations

from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "xlasdk"
MAX_LINES = 800

#: Modules allowed over the limit, each with its reason: none. A module that grows past it is split
#: instead (the list is never grown).
ALLOWED: dict[str, str] = {}


def _lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def test_no_module_is_over_the_limit() -> None:
    sizes = {p.relative_to(PKG).as_posix(): _lines(p) for p in sorted(PKG.rglob("*.py"))}
    assert sizes, f"no module found under {PKG}"
    over = {m: n for m, n in sizes.items() if n > MAX_LINES and m not in ALLOWED}
    assert not over, f"modules over {MAX_LINES} lines (split them along their seams): {over}"

