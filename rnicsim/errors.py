"""User-facing errors.

Contract: every error caused by bad input (a file, a key, a value, a flag) is an
:class:`InputError`. The CLI prints its message on stderr and exits with code 2, never a
traceback. The message names the file, the key path inside it and what was expected.
"""
from __future__ import annotations

import argparse
import difflib


class InputError(Exception):
    """Bad user input.

    ``source`` is the file (or ``"command line"``), ``key`` the dotted key path inside it
    (empty when the whole input is at fault) and ``expected`` says what was wanted.
    """

    def __init__(self, source: str, key: str, expected: str) -> None:
        self.source = str(source)
        self.key = key
        self.expected = expected
        where = f"{self.source}: {key}: " if key else f"{self.source}: "
        super().__init__(where + expected)


class ArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose errors are :class:`InputError` (exit 2 via the CLI, with
    the command name as the key) instead of ``SystemExit`` with a usage dump."""

    def error(self, message: str):
        raise InputError("command line", self.prog.split()[-1], message)


def did_you_mean(word: str, choices: list[str]) -> str:
    """``"did you mean 'x'?"`` for the choice closest to a misspelled ``word`` (difflib's
    ratio at least 0.6), else ``""``."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else ""
