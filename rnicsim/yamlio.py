"""Reading YAML input files: safe loading that refuses a key repeated in one mapping.

PyYAML keeps the last of two equal keys; in a scenario or profile that silently drops the
first value, so :func:`load_yaml` raises :class:`~rnicsim.errors.InputError` instead,
naming the key and both lines. Merge keys (``<<: *anchor``) may still be overridden by the
mapping's own keys, as YAML intends.
"""
from __future__ import annotations

from typing import Any

import yaml

from .errors import InputError


class _DuplicateKey(yaml.constructor.ConstructorError):
    pass


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that raises on a key given twice in one mapping."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, Any] = {}
            for key_node, _value in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = first.get(key)
                except TypeError:       # unhashable key: SafeLoader reports it below
                    continue
                if seen is not None:
                    at = f"line {seen.line + 1}, column {seen.column + 1}"
                    raise _DuplicateKey(None, None, f"each key once per mapping ({key!r} "
                                        f"is repeated; first at {at})", key_node.start_mark)
                first[key] = key_node.start_mark
        return super().construct_mapping(node, deep)


def load_yaml(text: str, source: str) -> Any:
    """Parse ``text`` (the contents of file ``source``) with :class:`UniqueKeyLoader`.

    Raises InputError(source, "line N", ...) for invalid YAML or a repeated key."""
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as e:
        m = e.problem_mark
        raise InputError(source, f"line {m.line + 1}, column {m.column + 1}", e.problem) \
            from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else ""
        raise InputError(source, where, f"valid YAML ({getattr(e, 'problem', e)})") from None
