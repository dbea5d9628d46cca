"""The clone's stack file as text: the source's own YAML with only the derived values changed.

A stack file is read by people (reviews of `diff Pulumi.dev.yaml Pulumi.qa.yaml`, the comments that
say why a value is what it is), so the clone keeps the source's comments, key order, flow mappings
(`- {name: worker-1, ...}`), quoting and sequence indentation. ruamel.yaml's round-trip mode does
that (a line-based edit could not safely rewrite values inside flow mappings); PyYAML, which the
loader uses, drops comments. ruamel.yaml is pinned in requirements-cli.txt (what
scripts/setup.sh installs for a user); where it is missing the clone is still written, plainly,
and says so.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Mapping
from typing import Any

import yaml

_KEY_THEN_ITEM = (re.compile(r"^( *)[^\s#-][^:]*:[ \t]*(#.*)?$"), re.compile(r"^( *)- "))


def sequence_offset(text: str) -> int:
    """How far the source indents a block sequence's `-` under its key: 0 (`key:\\n- a`) or 2."""
    lines = text.splitlines()
    for key_line, item_line in itertools.pairwise(lines):
        key, item = _KEY_THEN_ITEM[0].match(key_line), _KEY_THEN_ITEM[1].match(item_line)
        if key and item:
            return max(0, len(item.group(1)) - len(key.group(1)))
    return 0


def _same(old: Any, new: Any) -> bool:
    """Equal and of the same kind; ruamel's quoted strings and scalars compare as str/int/float, but
    True == 1 must not keep a bool where an int is meant."""
    return bool(old == new) and isinstance(old, bool) == isinstance(new, bool)


def _merge(node: Any, new: Any) -> Any:
    """`new`, written into the round-trip node `node` wherever the two agree in shape, so that what
    did not change keeps its comments and style; a value that changed replaces the old one."""
    if isinstance(node, dict) and isinstance(new, Mapping):
        for key in [k for k in node if k not in new]:
            del node[key]
        for key, value in new.items():
            if key in node and isinstance(value, Mapping | list):
                node[key] = _merge(node[key], value)
            elif key not in node or not _same(node[key], value):
                node[key] = value
        return node
    if isinstance(node, list) and isinstance(new, list) and len(node) == len(new):
        for i, value in enumerate(new):
            if isinstance(value, Mapping | list):
                node[i] = _merge(node[i], value)
            elif not _same(node[i], value):
                node[i] = value
        return node
    return new


def render_like_source(
    source_text: str, config: Mapping[str, Any], header: str, keep: Mapping[str, Any]
) -> tuple[str, bool]:
    """The new stack file and whether the source's style was kept.

    `config` is the new `config:` mapping; `keep` the target's own top-level keys (its secrets
    provider and salt). The source's other top-level keys (its own encryption settings, an ESC
    `environment:` list) belong to the source and are left out."""
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    try:
        from ruamel.yaml import YAML
    except ImportError:
        document = {**{k: v for k, v in keep.items() if k != "config"}, "config": dict(config)}
        plain = yaml.safe_dump(document, sort_keys=False, default_flow_style=False, allow_unicode=True, width=120)
        return comment + plain, False
    rt = YAML(typ="rt")
    rt.preserve_quotes = True
    rt.width = 4096  # never re-wrap a long value
    offset = sequence_offset(source_text)
    rt.indent(mapping=2, sequence=2 + offset, offset=offset)
    document = rt.load(source_text)
    for key in [k for k in document if k != "config"]:
        del document[key]
    document["config"] = _merge(document.get("config") or {}, dict(config))
    for position, (key, value) in enumerate((k, v) for k, v in keep.items() if k != "config"):
        document.insert(position, key, value)
    out = io.StringIO()
    rt.dump(document, out)
    return comment + out.getvalue(), True
