"""Files written whole or not at all.

Everything the library and the command line save (vocabularies, subword
models, checkpoints, a run's JSON files) is first written into a file beside
its destination and then renamed over it, an atomic step on every operating
system that Python supports. A reader therefore finds the old file or the
new one, never half of one, even when the writer is stopped (Ctrl-C, a full
disk, a crash) in the middle.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["written_whole", "write_json"]


@contextmanager
def written_whole(path: str | os.PathLike, *, sync: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path`` to write into; renamed over ``path`` when the block ends without an error.

    When the block raises, ``path`` keeps what it held and the temporary file
    is removed. ``sync=True`` flushes the file to the disk before the rename,
    so that a crash of the machine, not only of the program, cannot leave
    ``path`` empty (for checkpoints, which a run resumes from).
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        yield tmp
        if sync:
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: str | os.PathLike, data: Any, indent: int | None = 2) -> Path:
    """Write ``data`` as UTF-8 JSON (non-ASCII characters as they are), whole or not at all; return the path."""
    with written_whole(path) as tmp:
        tmp.write_text(json.dumps(data, ensure_ascii=False, indent=indent) + "\n", encoding="utf-8")
    return Path(path)
