"""Test helper: a well-formed hash tree from nested dicts (label → blob leaf or dict), labels sorted."""

from __future__ import annotations

from state_manager.hash_tree import HashTree, empty, fork, labeled, leaf


def tree_of(children: dict) -> HashTree:
    nodes = [labeled(label, tree_of(value) if isinstance(value, dict) else leaf(value))
             for label, value in sorted(children.items())]
    if not nodes:
        return empty()
    while len(nodes) > 1:
        nodes = [fork(*nodes[i:i + 2]) if i + 1 < len(nodes) else nodes[i] for i in range(0, len(nodes), 2)]
    return nodes[0]
