"""Delta debugging (Zeller and Hildebrandt's ``ddmin``) over a set of names: the search that
``bisect="passes"`` (:mod:`._bisect_passes`) runs over XLA's passes, kept free of XLA so that it is
tested on synthetic predicates.

A *trial* tests one subset (for the passes: a compile with those passes disabled) and says
:class:`Outcome`: ``GOOD`` (the property sought holds: the divergence is gone), ``BAD`` (it does
not) or ``UNRESOLVED`` (the trial could not say: the compile failed). :class:`Trials` counts the
trials, tests each distinct subset once and stops the search (:class:`TrialBudgetSpent`) past its
limit. :func:`ddmin` shrinks a ``GOOD`` subset to a 1-minimal one (no element can be left out);
:func:`find_good` finds a ``GOOD`` subset when the whole set is not one (elements interact: without
one, another goes wrong); :func:`minimal_sets` finds a first 1-minimal set, then others disjoint
from it, each enough alone, and :func:`interaction` says how they relate.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["Outcome", "Interaction", "Trials", "TrialBudgetSpent", "ddmin", "find_good", "minimal_sets",
           "interaction", "describe"]


class Outcome(enum.Enum):
    """What one trial says of a subset."""

    GOOD = "good"  # the property sought holds (the divergence is gone)
    BAD = "bad"  # it does not
    UNRESOLVED = "unresolved"  # the trial could not say (the compile or the run failed): never GOOD


class Interaction(enum.Enum):
    """How the minimal sets found relate."""

    NONE = "none"  # no set found
    SINGLE = "single"  # one set of one element, and no other found
    TOGETHER = "together"  # one set of two or more elements: only together (no element of it alone)
    EITHER = "either"  # two or more disjoint sets, each enough alone


class TrialBudgetSpent(Exception):
    """Raised by :class:`Trials` when a new trial would pass its limit."""


@dataclass
class Trials:
    """A trial function counted and cached: each distinct subset is tested once, at most ``limit``
    trials in all (then :class:`TrialBudgetSpent`). ``count``: the trials made; ``unresolved``: the
    subsets whose trial said ``UNRESOLVED``, sorted."""

    test: Callable[[Sequence[str]], Outcome]
    limit: int
    count: int = 0
    cache: dict[frozenset[str], Outcome] = field(default_factory=dict)
    unresolved: list[list[str]] = field(default_factory=list)

    def __call__(self, subset: Sequence[str]) -> Outcome:
        key = frozenset(subset)
        if key in self.cache:
            return self.cache[key]
        if self.count >= self.limit:
            raise TrialBudgetSpent(self.limit)
        self.count += 1
        outcome = self.test(list(subset))
        self.cache[key] = outcome
        if outcome is Outcome.UNRESOLVED:
            self.unresolved.append(sorted(subset))
        return outcome

    def known(self, subset: Sequence[str]) -> Outcome | None:
        """The outcome of ``subset`` when it was tested (no trial made)."""
        return self.cache.get(frozenset(subset))


def _chunks(items: Sequence[str], n: int) -> list[list[str]]:
    return [c for c in (list(items[i * len(items) // n:(i + 1) * len(items) // n]) for i in range(n)) if c]


def ddmin(items: Sequence[str], trials: Trials) -> list[str]:
    """A 1-minimal subset of ``items`` whose trial is ``GOOD`` (leaving out any one element of it
    is not ``GOOD``), in ``items``' order; ``items`` itself must be ``GOOD``. Zeller's ddmin: at
    granularity ``n`` each of ``n`` chunks, then each complement, is tried; a ``GOOD`` one is kept
    (granularity back to 2, or ``n - 1`` for a complement), else ``n`` doubles, until ``n`` reaches
    the size (each element alone and each "all but one" tried).

    Raises
    ------
    TrialBudgetSpent
        The trials' limit was reached.
    """
    c = list(items)
    n = 2
    while len(c) >= 2:
        parts = _chunks(c, n)
        for part in parts:
            if trials(part) is Outcome.GOOD:
                c, n = part, 2
                break
        else:
            for part in parts:
                rest = [x for x in c if x not in part]
                if trials(rest) is Outcome.GOOD:  # (with 2 parts, the other part: known, no trial)
                    c, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(c):
                    break
                n = min(len(c), 2 * n)
    return c


def find_good(items: Sequence[str], trials: Trials) -> list[str] | None:
    """A subset of ``items`` whose trial is ``GOOD``, or None: ``items`` itself, then, as ddmin
    explores, at granularity 2, 4, 8 ... up to each element alone, each chunk and each complement
    (all but a chunk: the elements that must stay in for the property to hold are left out). When
    elements interact (leaving all of them out is not ``GOOD``) this finds a start for
    :func:`ddmin`; at most about ``4 * len(items)`` trials.

    Raises
    ------
    TrialBudgetSpent
        The trials' limit was reached.
    """
    c = list(items)
    if not c:
        return None
    if trials(c) is Outcome.GOOD:
        return c
    n = 2
    while n <= len(c):
        parts = _chunks(c, n)
        for part in parts:
            if trials(part) is Outcome.GOOD:
                return part
        for part in parts:
            rest = [x for x in c if x not in part]
            if rest and trials(rest) is Outcome.GOOD:
                return rest
        if n == len(c):
            break
        n = min(len(c), 2 * n)
    return None


def minimal_sets(items: Sequence[str], trials: Trials, most: int = 4) -> list[list[str]]:
    """Up to ``most`` disjoint 1-minimal ``GOOD`` subsets of ``items``: the first by
    :func:`find_good` and :func:`ddmin`; each next one among the elements not in a set found (those
    in one stay out of the trials), when all of those together are ``GOOD`` (one trial; they are
    not searched further). Each is enough alone: with two or more, the property holds when any one
    set is left out ("either of ..."). [] when none is found.

    Raises
    ------
    TrialBudgetSpent
        The trials' limit was reached (sets found before are lost: the caller reports the limit).
    """
    start = find_good(items, trials)
    if start is None:
        return []
    found = [ddmin(start, trials)]
    while len(found) < most:
        taken = {x for s in found for x in s}
        rest = [x for x in items if x not in taken]
        if not rest or trials(rest) is not Outcome.GOOD:
            break
        found.append(ddmin(rest, trials))
    return found


def interaction(sets: Sequence[Sequence[str]]) -> Interaction:
    """How the sets of :func:`minimal_sets` relate."""
    if not sets:
        return Interaction.NONE
    if len(sets) > 1:
        return Interaction.EITHER
    return Interaction.SINGLE if len(sets[0]) == 1 else Interaction.TOGETHER


def _joined(names: Sequence[str], word: str) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"


def describe(sets: Sequence[Sequence[str]], what: str = "pass") -> str:
    """The sets in words: ``"A"``, ``"A and B together (neither alone)"``, ``"either of A or B
    (each alone is enough)"``, ``"either of A, or B and C together (each alone is enough)"``."""
    kind = interaction(sets)
    if kind is Interaction.NONE:
        return f"no {what}"
    if kind is Interaction.SINGLE:
        return sets[0][0]
    if kind is Interaction.TOGETHER:
        no_one = "neither" if len(sets[0]) == 2 else "no one of them"
        return f"{_joined(list(sets[0]), 'and')} together ({no_one} alone)"
    words = [s[0] if len(s) == 1 else f"{_joined(list(s), 'and')} together" for s in sets]
    listed = _joined(words, "or") if all(len(s) == 1 for s in sets) else ", or ".join(words)
    return f"either of {listed} (each alone is enough)"
