"""The state-tree diff the drill-down shows: ``state_manager.tree_diff`` (pure; it lives in the
state manager so that a node's dry run can use it too, docs/architecture.md, *Forks and dry runs*)."""

from __future__ import annotations

from state_manager.tree_diff import (
    ABSENT, PathDiff, TreeDiff, describe_value, diff_tries, render_label, render_path, to_jsonable,
)

__all__ = ["PathDiff", "TreeDiff", "diff_tries", "render_path", "render_label", "describe_value", "to_jsonable",
           "ABSENT"]
