"""Real data: reading Tatoeba/Anki files, and the downloader, tested against local files and a local HTTP server."""

from __future__ import annotations

import hashlib
import http.server
import io
import random
import socket
import stat
import threading
import zipfile

import pytest

from attnbook.data import (
    FRA_ENG_SHA1,
    FRA_ENG_URL,
    AnkiPairs,
    ChecksumError,
    DownloadError,
    corpus_from_pairs,
    download,
    download_fra_eng,
    extract_zip,
    read_anki_pairs,
)

# A few lines in the format of manythings.org's Tatoeba exports (our own sentences).
FRA = (
    "Go.\tVa\u202f!\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 (a) & #2 (b)\n"
    "Go.\tMarche.\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 (a) & #3 (c)\n"
    "I'm home.\tJe suis à la maison.\tCC-BY 2.0 (France) Attribution: tatoeba.org #4 (d) & #5 (e)\n"
    "It's the school's bell.\tC'est la cloche de l'école.\t"
    "CC-BY 2.0 (France) Attribution: tatoeba.org #6 (f) & #7 (g)\n"
)


def write(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_reads_three_columns_with_attribution(tmp_path):
    pairs = read_anki_pairs(write(tmp_path, "fra.txt", FRA.encode()), "en", "fr")
    assert isinstance(pairs, AnkiPairs) and len(pairs) == 4 and pairs.skipped == 0
    assert pairs[0].src == "Go." and pairs[0].tgt == "Va\u202f!" and pairs[0].tgt_tokens == ["va", "!"]
    assert pairs[0].attribution.startswith("CC-BY 2.0")
    assert pairs[3].tgt_tokens == ["c'", "est", "la", "cloche", "de", "l'", "école", "."]
    assert pairs[3].src_tokens == ["it", "'s", "the", "school", "'s", "bell", "."]
    assert "4 pairs from fra.txt" in repr(pairs)


def test_reads_two_columns_bom_crlf_and_any_language(tmp_path):
    data = "\ufeffHi.\t嗨。\r\nI'm fine.\t我很好。\r\n".encode("utf-8")
    pairs = read_anki_pairs(write(tmp_path, "cmn.txt", data), "eng", "cmn")
    assert [p.src for p in pairs] == ["Hi.", "I'm fine."]
    assert pairs[0].tgt_tokens == ["嗨", "。"] and pairs[1].tgt_tokens == ["我", "很", "好", "。"]
    assert pairs[0].src_lang == "en" and pairs[0].tgt_lang == "zh" and pairs.skipped == 0
    for encoding in ("utf-16", "utf-16-le", "utf-16-be"):  # with a byte-order mark, in both byte orders
        data = "Hallo.\tSalut.\nNein.\tNon.\n".encode(encoding)
        if encoding != "utf-16":
            data = "\ufeff".encode(encoding) + data
        pairs = read_anki_pairs(write(tmp_path, "deu.txt", data), "de", "fr")
        assert [p.tgt for p in pairs] == ["Salut.", "Non."] and pairs.skipped == 0 and pairs.n_lines == 2
    odd = read_anki_pairs(write(tmp_path, "odd.txt", "It\u2028works.\tÇa\x0cmarche.\n".encode()))
    assert len(odd) == 1 and odd[0].src_tokens == ["it", "works", "."]  # unusual separators do not split a line
    old_mac = read_anki_pairs(write(tmp_path, "mac.txt", b"Hi.\tSalut.\rBye.\tAu revoir.\r"))
    assert [p.src for p in old_mac] == ["Hi.", "Bye."] and old_mac.skipped == 0
    reverse = read_anki_pairs(write(tmp_path, "fra2.txt", FRA.encode()), "en", "fr", reverse=True)
    assert reverse[2].src == "Je suis à la maison." and reverse[2].src_lang == "fr" and reverse[2].tgt_lang == "en"
    assert len(read_anki_pairs(write(tmp_path, "fra3.txt", FRA.encode()), max_pairs=2)) == 2


def test_blank_and_malformed_lines_are_skipped_and_counted(tmp_path):
    lines = [
        b"Go.\tVa !",  # 1 good
        b"",  # 2 blank
        b"   \t  ",  # 3 blank (only spaces and a tab)
        b"only one column",  # 4 malformed
        b"a\tb\tc\td",  # 5 malformed: four columns
        b"\tVa !",  # 6 malformed: empty source
        b"Hello.\t\xff\xfe broken bytes",  # 7 malformed: not UTF-8
        b"Run!\tCours\xc2\xa0!\tCC-BY",  # 8 good
        b"\xef\xbb\xbfStop!\tStop !",  # 9 good, a stray byte-order mark
    ]
    pairs = read_anki_pairs(write(tmp_path, "mixed.txt", b"\n".join(lines) + b"\n"))
    assert [p.src for p in pairs] == ["Go.", "Run!", "Stop!"]
    assert pairs.n_lines == 9 and pairs.blank == 2 and pairs.malformed == [4, 5, 6, 7]
    assert pairs[1].tgt_tokens == ["cours", "!"]


def test_never_crashes_on_random_bytes(tmp_path):
    rng = random.Random(0)
    alphabet = list(b"ab \t\n\r\xff\xc3\xa9\xef\xbb\xbf.!?'") + list("é你".encode())
    for trial in range(200):
        noise = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
        path = write(tmp_path, f"noise{trial}.txt", b"Good.\tBon.\n" + noise)
        pairs = read_anki_pairs(path)
        assert pairs[0].src == "Good." and pairs.n_lines >= 1
        for p in pairs:  # every pair read can be tokenized
            assert isinstance(p.src_tokens, list) and isinstance(p.tgt_tokens, list)


def test_missing_file_empty_corpus_and_unknown_language(tmp_path):
    with pytest.raises(FileNotFoundError, match="no corpus file at"):
        read_anki_pairs(tmp_path / "nowhere.txt")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        read_anki_pairs(tmp_path)
    with pytest.raises(ValueError, match="an empty corpus"):
        read_anki_pairs(write(tmp_path, "empty.txt", b""))
    with pytest.raises(ValueError, match=r"an empty corpus.*3 lines, 1 blank, 2 malformed"):
        read_anki_pairs(write(tmp_path, "junk.txt", b"no tabs here\n\nnor here\n"))
    with pytest.raises(ValueError, match="unknown language code 'xyz'"):
        read_anki_pairs(write(tmp_path, "fra.txt", FRA.encode()), "en", "xyz")


def test_corpus_from_pairs_keeps_shared_sentences_in_one_split(tmp_path):
    lines = [f"Sentence {i}.\tPhrase {i}." for i in range(300)] + ["Go.\tVa !", "Go.\tMarche.", "Walk.\tMarche."]
    pairs = read_anki_pairs(write(tmp_path, "many.txt", "\n".join(lines).encode()))
    corpus = corpus_from_pairs(pairs)
    splits = [corpus.train, corpus.valid, corpus.test]
    assert sum(map(len, splits)) == 303 and all(len(s) > 10 for s in splits)
    for side in ("src", "tgt"):
        sets = [{getattr(p, side) for p in s} for s in splits]
        assert not (sets[0] & sets[1] or sets[0] & sets[2] or sets[1] & sets[2])
    home = [i for i, s in enumerate(splits) if any(p.src in ("Go.", "Walk.") for p in s)]
    assert len(home) == 1  # Go./Va !, Go./Marche., Walk./Marche. are connected
    assert corpus.src_vocab["sentence"] > 3
    with pytest.raises(ValueError, match="empty corpus"):
        corpus_from_pairs([])


# --- The downloader, against a local HTTP server ------------------------------------------


class _Server:
    def __init__(self):
        self.routes: dict[str, tuple[int, dict, bytes]] = {}
        self.requests: list[str] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.requests.append(self.path)
                status, headers, body = server.routes.get(self.path, (404, {}, b"not found"))
                self.send_response(status)
                headers = {"Content-Length": str(len(body)), **headers}
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # keep the test output clean
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = _Server()
    yield s
    s.close()


def make_zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


FRA_ZIP = make_zip({"fra-eng/_about.txt": b"about", "fra-eng/fra.txt": FRA.encode()})
FRA_ZIP_SHA1 = hashlib.sha1(FRA_ZIP).hexdigest()


def files_in(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_the_published_address_and_checksum_are_d2l_s():
    from d2l import torch as d2l

    assert d2l.DATA_HUB["fra-eng"] == (FRA_ENG_URL, FRA_ENG_SHA1)


def test_download_extract_and_cache(server, tmp_path):
    server.routes["/fra-eng.zip"] = (200, {}, FRA_ZIP)
    path = download_fra_eng(cache_dir=tmp_path, url=server.url + "/fra-eng.zip", sha1=FRA_ZIP_SHA1)
    assert path == tmp_path / "fra-eng" / "fra.txt"
    assert len(read_anki_pairs(path)) == 4
    assert files_in(tmp_path) == [
        "fra-eng",
        "fra-eng.zip",
        "fra-eng/.source-sha1",
        "fra-eng/_about.txt",
        "fra-eng/fra.txt",
    ]
    server.close()  # offline from now on: the cache answers
    assert download_fra_eng(cache_dir=tmp_path, url=server.url + "/fra-eng.zip", sha1=FRA_ZIP_SHA1) == path
    assert server.requests == ["/fra-eng.zip"]


def test_a_damaged_cached_file_is_downloaded_again(server, tmp_path):
    server.routes["/fra-eng.zip"] = (200, {}, FRA_ZIP)
    (tmp_path / "fra-eng.zip").write_bytes(b"half a zip")
    path = download(server.url + "/fra-eng.zip", tmp_path, FRA_ZIP_SHA1)
    assert path.read_bytes() == FRA_ZIP and server.requests == ["/fra-eng.zip"]
    assert download(server.url + "/fra-eng.zip", tmp_path, FRA_ZIP_SHA1) == path and len(server.requests) == 1


def test_checksum_mismatch_removes_the_file_and_leaves_the_cache_clean(server, tmp_path):
    server.routes["/fra-eng.zip"] = (200, {}, FRA_ZIP)
    with pytest.raises(ChecksumError, match=rf"has SHA-1 {FRA_ZIP_SHA1}, but {'0' * 40} was expected.*deleted"):
        download_fra_eng(cache_dir=tmp_path, url=server.url + "/fra-eng.zip", sha1="0" * 40)
    assert files_in(tmp_path) == []


def test_offline_gives_a_clear_message_and_a_clean_cache(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(DownloadError, match="You seem to be offline.*load_corpus\\(\\), needs no network"):
        download_fra_eng(cache_dir=tmp_path, url=f"http://127.0.0.1:{port}/fra-eng.zip", timeout=5)
    assert files_in(tmp_path) == []


def test_server_errors_and_cut_transfers(server, tmp_path):
    with pytest.raises(DownloadError, match="404"):
        download(server.url + "/missing.zip", tmp_path)
    server.routes["/cut.zip"] = (200, {"Content-Length": str(len(FRA_ZIP) + 500)}, FRA_ZIP)
    with pytest.raises(DownloadError):
        download(server.url + "/cut.zip", tmp_path)
    assert files_in(tmp_path) == []


def test_unsafe_or_broken_archives_are_refused(server, tmp_path):
    outside = tmp_path / "evil.txt"
    for name in ["../evil.txt", "/tmp/evil.txt", "fra-eng/../../evil.txt"]:
        archive = tmp_path / "bad.zip"
        archive.write_bytes(make_zip({"fra-eng/fra.txt": b"a\tb\n", name: b"gotcha"}))
        dest = tmp_path / "dest"
        with pytest.raises(ValueError, match="outside the target folder"):
            extract_zip(archive, dest)
        assert not outside.exists() and files_in(dest) == []
    link = zipfile.ZipInfo("fra-eng/link")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr(link, "/etc/passwd")
    archive.write_bytes(buffer.getvalue())
    with pytest.raises(ValueError, match="symbolic link"):
        extract_zip(archive, tmp_path / "dest")
    big = tmp_path / "big.zip"
    big.write_bytes(make_zip({"a.txt": b"x" * 1000}))
    with pytest.raises(ValueError, match="more than the limit"):
        extract_zip(big, tmp_path / "dest", max_bytes=100)
    # an archive that is not a zip, or has no fra.txt: refused, and not kept in the cache
    cache = tmp_path / "cache"
    server.routes["/notzip.zip"] = (200, {}, b"this is not a zip")
    with pytest.raises(ValueError, match="not a zip archive"):
        download_fra_eng(
            cache_dir=cache, url=server.url + "/notzip.zip", sha1=hashlib.sha1(b"this is not a zip").hexdigest()
        )
    assert files_in(cache) == []
    other = make_zip({"deu-eng/deu.txt": b"a\tb\n"})
    server.routes["/other.zip"] = (200, {}, other)
    with pytest.raises(ValueError, match="no fra-eng/fra.txt"):
        download_fra_eng(cache_dir=cache, url=server.url + "/other.zip", sha1=hashlib.sha1(other).hexdigest())
