"""How every ``replica`` command formats its help."""

from __future__ import annotations

import argparse
import re

__all__ = ["HelpFormatter", "plain"]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's default shown beside it (unless it is none or off); descriptions keep
    their own line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.option_strings and action.default not in (None, False, [], argparse.SUPPRESS) \
                and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


def plain(text: str) -> str:
    """A docstring as help text: without reStructuredText's double backquotes."""
    return re.sub(r"``([^`]*)``", r"\1", text)
