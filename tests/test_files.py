"""attnbook.files: a file is written whole or not at all."""

from __future__ import annotations

import json
import os

import pytest

from attnbook.files import write_json, written_whole


def test_the_file_appears_only_when_the_block_ends_and_no_temporary_file_is_left(tmp_path):
    path = tmp_path / "out.bin"
    with written_whole(path) as tmp:
        assert tmp.parent == tmp_path and tmp != path
        tmp.write_bytes(b"new")
        assert not path.exists(), "the destination appeared before the writing ended"
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_an_error_while_writing_keeps_the_old_file_and_removes_the_temporary_one(tmp_path):
    path = tmp_path / "out.json"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="disk full"):
        with written_whole(path) as tmp:
            tmp.write_text("half of the ne")
            raise RuntimeError("disk full")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_sync_flushes_the_file_to_the_disk_before_the_rename(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    with written_whole(tmp_path / "a", sync=True) as tmp:
        tmp.write_text("a")
    assert len(synced) == 1
    with written_whole(tmp_path / "b") as tmp:
        tmp.write_text("b")
    assert len(synced) == 1, "a file written without sync=True was synced"


def test_json_keeps_non_ascii_text_and_ends_with_a_newline(tmp_path):
    path = write_json(tmp_path / "config.json", {"tgt": "中文", "n": 3})
    text = path.read_text(encoding="utf-8")
    assert "中文" in text and text.endswith("}\n") and json.loads(text) == {"tgt": "中文", "n": 3}
    with pytest.raises(TypeError):
        write_json(path, {"not JSON": object()})
    assert json.loads(path.read_text(encoding="utf-8")) == {"tgt": "中文", "n": 3}
