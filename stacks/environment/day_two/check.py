"""`plan --against`: each changed key, what a live environment does with it, and what is refused.

Compares the deployed stack file's environment with the edited one key by key (`key_paths`), looks
each changed key up in the day-two table (`day_two`) and refuses what cannot be applied safely
unless the user states the rebuild: `--accept-rebuild KEY`, with the table key
(`gpuWorkers.nodes[].managementIp`) or the changed path itself (`gpuWorkers.nodes[worker-1].managementIp`).
Pure: no Pulumi, no files.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stacks.environment.day_two.classes import DAY_TWO, HEADLINES, DayTwo
from stacks.environment.key_paths import key_values
from stacks.environment.model import Environment

ACCEPT_FLAG = "--accept-rebuild"


@dataclass(frozen=True)
class KeyChange:
    key: str
    """The table key, e.g. `gpuWorkers.nodes[].managementIp`."""
    where: str
    """The changed path, e.g. `gpuWorkers.nodes[worker-1].managementIp`."""
    before: Any
    after: Any
    entry: DayTwo
    refused: bool
    """Cannot be applied safely and not accepted."""
    accepted: bool = False
    """Would be refused, and the user stated the rebuild."""

    def lines(self) -> list[str]:
        mark = " (REFUSED)" if self.refused else " (rebuild accepted)" if self.accepted else ""
        out = [
            f"{self.where} {_show(self.before, self.after)}: {HEADLINES[self.entry.cls]}{mark}",
            f"  what happens: {self.entry.happens}",
            f"  safe procedure: {self.entry.procedure}",
        ]
        if self.entry.source:
            out.append(f"  why: {self.entry.source}")
        if self.refused:
            out.append(f"  refused: pass `{ACCEPT_FLAG} {self.key}` once the procedure above is done or planned")
        return out


def _show(before: Any, after: Any) -> str:
    if isinstance(before, tuple) and isinstance(after, tuple):  # a keyed list: its names
        added = [name for name in after if name not in before]
        removed = [name for name in before if name not in after]
        return "; ".join([*(f"added {n}" for n in added), *(f"removed {n}" for n in removed)]) or "reordered"
    return f"{_value(before)} -> {_value(after)}"


def _value(value: Any) -> str:
    if value is _UNSET or value is None:
        return "(unset)"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


_UNSET = object()


@dataclass
class DayTwoReport:
    changes: list[KeyChange] = field(default_factory=list)
    unused_accepts: list[str] = field(default_factory=list)
    """`--accept-rebuild` values that match no refused change (a typo, or a stale flag)."""

    @property
    def refused(self) -> list[KeyChange]:
        return [change for change in self.changes if change.refused]

    def lines(self) -> list[str]:
        return [line for change in self.changes for line in change.lines()]

    def refusal_message(self) -> str:
        keys = sorted({change.key for change in self.refused})
        flags = " ".join(f"{ACCEPT_FLAG} {key}" for key in keys)
        return (
            f"{len(self.refused)} change(s) a live cluster cannot take safely: {', '.join(keys)} "
            f"(above: what happens and the safe procedure); to go ahead anyway, state the rebuild: {flags}"
        )

    def unused_accept_message(self) -> str:
        refusable = sorted({c.key for c in self.changes if c.refused or c.accepted})
        known = f"refused in this change: {', '.join(refusable)}" if refusable else "this change refuses nothing"
        return "; ".join(
            f"{ACCEPT_FLAG} {key}: no refused change has this key ({known})" for key in self.unused_accepts
        )

    def as_dict(self) -> list[dict[str, Any]]:
        return [
            {
                "key": c.key,
                "path": c.where,
                "change": _show(c.before, c.after),
                "class": c.entry.cls,
                "happens": c.entry.happens,
                "procedure": c.entry.procedure,
                "source": c.entry.source,
                "refused": c.refused,
                "accepted": c.accepted,
            }
            for c in self.changes
        ]


def day_two_report(before: Environment, after: Environment, accepted: Iterable[str] = ()) -> DayTwoReport:
    """Every changed key of `after` against `before`, in the model's order of keys."""
    old, new = key_values(before), key_values(after)
    wanted: Sequence[str] = list(accepted)
    report = DayTwoReport()
    used: set[str] = set()
    for where in [*old, *(w for w in new if w not in old)]:
        (key, was), (_, now) = old.get(where, (None, _UNSET)), new.get(where, (None, _UNSET))
        table_key = key or new[where][0]
        if _same(was, now) or _item_came_or_went(where, old, new):
            continue
        entry = DAY_TWO[table_key]
        at_risk = entry.refuses(was, now, after)
        stated = at_risk and bool({table_key, where} & set(wanted))
        if stated:
            used |= {table_key, where} & set(wanted)
        report.changes.append(
            KeyChange(table_key, where, was, now, entry, refused=at_risk and not stated, accepted=stated)
        )
    report.unused_accepts = [key for key in wanted if key not in used]
    return report


def _same(before: Any, after: Any) -> bool:
    """Equal values; a keyed list's names in any order (items are matched by name)."""
    if isinstance(before, tuple) and isinstance(after, tuple):
        return set(before) == set(after)
    return bool(before == after)


def _item_came_or_went(where: str, old: dict[str, Any], new: dict[str, Any]) -> bool:
    """A key inside a list item that only one side has: the list's own key reports the item."""
    return "[" in where and (where not in old or where not in new)
