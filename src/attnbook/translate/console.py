"""What the command line tells a person: lines, notes, one progress line, and one-line errors.

Standard output gets the results and one line per event worth reading
(the data read, each epoch); standard error gets notes (unknown words, a
changed data file), errors, and, on a terminal only, one line that rewrites
itself with where training is and how long is left. Under ``torchrun`` only
the first process speaks: the others' :class:`Console` is silent.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

__all__ = ["CommandError", "Console", "PROGRAM", "format_duration"]

PROGRAM = "attnbook-translate"


class CommandError(Exception):
    """Bad input to the command line: printed as one line, exit status 2, no traceback."""


def format_duration(seconds: float) -> str:
    """``m:ss``, or ``h:mm:ss`` from an hour on."""
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Console:
    """Where this process writes for a person; ``active=False`` silences it (every process but the first)."""

    def __init__(self, active: bool = True) -> None:
        self.active = active
        self._line_shown = False  # a progress line stands on the terminal
        self._last_update = 0.0

    def say(self, *parts: Any) -> None:
        """A line on standard output."""
        if self.active:
            self.clear()
            print(*parts, flush=True)

    def note(self, message: str) -> None:
        """A remark on standard error."""
        if self.active:
            self.clear()
            print(f"note: {message}", file=sys.stderr, flush=True)

    def error(self, message: str) -> None:
        """An error on standard error, as one line (every process says it: each may fail alone)."""
        self.clear()
        print(f"{PROGRAM}: error: {message}", file=sys.stderr, flush=True)

    @property
    def shows_progress(self) -> bool:
        """Whether a progress line is shown: only on a terminal, never in a log file, a notebook or a pipe."""
        return self.active and sys.stderr.isatty() and os.environ.get("TERM") != "dumb"

    def progress(self, text: str, force: bool = False) -> None:
        """Rewrite the progress line (at most four times a second, unless ``force``)."""
        now = time.monotonic()
        if (not force and now - self._last_update < 0.25) or not self.shows_progress:
            return
        self._last_update = now
        try:
            width = os.get_terminal_size(sys.stderr.fileno()).columns or 100  # 0: a terminal that does not say
        except OSError:
            width = 100
        sys.stderr.write("\r\033[K" + text[: max(10, width - 1)])
        sys.stderr.flush()
        self._line_shown = True

    def clear(self) -> None:
        """Erase the progress line, so that the next line starts clean."""
        if self._line_shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self._line_shown = False
