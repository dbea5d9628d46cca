"""The deployment estimate as a person says it: "about 5 minutes; longest path: clone -> boot -> kubeadm init".

`plan` prints this line first and the model's figures (bound, ratio, every step) after it: a
reviewer decides from the time and what it waits for, and reads the figures only to dig in.
Pure functions over (kind, seconds) pairs, so the wording is tested without a plan.
"""

from __future__ import annotations

from collections.abc import Sequence

SHORT_WORDS: dict[str, tuple[str, ...]] = {
    "linked clone + power-on": ("linked clone",),
    "full clone + power-on": ("full clone",),
    "guest boot + kubeadm init": ("boot", "kubeadm init"),
    "guest boot + kubeadm join": ("boot", "kubeadm join"),
    "wait for node join": ("node join",),
    "gpu operator": ("GPU Operator install",),
    "host graphics": ("host graphics mode",),
    "host reconfigure": ("host settings",),
    "switch": ("distributed switch",),
    "switch member": ("switch membership",),
    "drs rule": ("DRS rule",),
    "crd": ("CRD",),
}
"""Kinds of operation (`deploy_time`) in the words of the path; a kind not listed is said as it is."""

MINOR_SHARE = 0.03
"""Steps shorter than this share of the whole are left out of the words (the full path follows)."""


QUEUED_RATIO = 1.05
"""An estimate this much over its bound has steps that waited for capacity, not for a dependency."""


def format_seconds(seconds: float) -> str:
    """`5m09s`, `4h31m00s`: the model's figures."""
    minutes, rest = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{rest:02d}s" if hours else f"{minutes}m{rest:02d}s"


def about(seconds: float) -> str:
    """A duration rounded as a person says it: minutes up to 90, then half hours."""
    if seconds < 45:
        return "under a minute"
    # Half up, not Python's round-half-to-even: 2m30s is "about 3 minutes", never "about 2".
    minutes = int(seconds / 60 + 0.5)
    if minutes < 90:
        return f"about {minutes} minute{'s' if minutes != 1 else ''}"
    hours = round(seconds / 1800) / 2
    return f"about {hours:g} hours"


def path_in_words(steps: Sequence[tuple[str, float]]) -> str:
    """The critical path's kinds of work, minor steps left out, repeats counted: `3 x full clone`."""
    total = sum(seconds for _, seconds in steps)
    words: list[str] = []
    for kind, seconds in steps:
        if seconds <= 0 or seconds < MINOR_SHARE * total:
            continue
        words += SHORT_WORDS.get(kind, (kind,))
    counted: list[tuple[str, int]] = []
    for word in words:
        if counted and counted[-1][0] == word:
            counted[-1] = (word, counted[-1][1] + 1)
        else:
            counted.append((word, 1))
    return " -> ".join(word if count == 1 else f"{count} x {word}" for word, count in counted)


def estimate_in_words(pulumi_up: float, ready: float, steps: Sequence[tuple[str, float]], ratio: float = 1.0) -> str:
    """The first line `plan` prints about time; `ratio` is the estimate over the bound."""
    ready_words = about(ready)
    # "about 5 minutes ..., about 6 until ...": the unit once, when both are in minutes.
    if ready_words.endswith(" minutes") and about(pulumi_up).endswith(" minutes"):
        ready_words = ready_words.removesuffix(" minutes")
    return (
        f"deployment: {about(pulumi_up)} until `pulumi up` returns, {ready_words} until the GPU workers can train; "
        f"longest path: {path_in_words(steps)}"
        + (", queued for vCenter's or the engine's capacity" if ratio >= QUEUED_RATIO else "")
    )


def ratio_in_words(ratio: float) -> str:
    """What the estimate-to-bound ratio means for the person reading it."""
    if ratio < QUEUED_RATIO:
        return f"{ratio:.2f}x: nothing queues; only a shorter step on the path makes it faster"
    return f"{ratio:.2f}x: operations queue for vCenter's per-host limits or the engine's terms below"
