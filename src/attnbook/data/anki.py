"""Real sentence pairs: Tatoeba's Anki files, and the fra-eng archive that d2l publishes.

The Tatoeba project collects sentences and their translations; manythings.org
exports them per language pair as tab-separated "Anki" files, one pair a line::

    Go.<TAB>Va !<TAB>CC-BY 2.0 (France) Attribution: tatoeba.org #2877272 (CM) & #1158250 (Wittydev)

:func:`read_anki_pairs` reads such a file in any language pair (two or three
columns, with or without a byte-order mark), skips and counts the lines it
cannot use, and never fails on a line; :func:`pairs_file` finds the file inside
a zip as manythings.org publishes it. :func:`corpus_from_pairs` splits the
pairs with :func:`~attnbook.data.split_by_checksum`, as the command line
``attnbook-translate`` does. :func:`download_fra_eng` fetches the
English–French file that *Dive into Deep Learning* uses, checks its SHA-1,
and keeps it in a cache directory, so the network is needed once.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import stat
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .pairs import Corpus, Pair, split_by_checksum
from .text import language

__all__ = [
    "FRA_ENG_URL",
    "FRA_ENG_SHA1",
    "AnkiPairs",
    "ChecksumError",
    "DownloadError",
    "read_anki_pairs",
    "pairs_file",
    "corpus_from_pairs",
    "default_cache_dir",
    "sha1_of",
    "download",
    "extract_zip",
    "download_fra_eng",
]

#: Where d2l publishes its English–French archive (``d2l.DATA_HUB['fra-eng']``), and its SHA-1.
FRA_ENG_URL = "http://d2l-data.s3-accelerate.amazonaws.com/fra-eng.zip"
FRA_ENG_SHA1 = "94646ad1522d915e7b0f9296181140edcf86a4f5"


class ChecksumError(ValueError):
    """A downloaded file is not the one expected: its SHA-1 differs."""


class DownloadError(ConnectionError):
    """A file could not be downloaded (offline, server error, interrupted transfer)."""


# --- Reading Anki files --------------------------------------------------------------


@dataclass
class AnkiPairs(Sequence):
    """The pairs read from an Anki file, and what was skipped.

    It behaves like the list of its :class:`~attnbook.data.Pair` s.
    ``malformed`` lists the line numbers (from 1) that were not two or three
    tab-separated columns with text in the first two.
    """

    pairs: list[Pair]
    path: str
    n_lines: int = 0
    blank: int = 0
    malformed: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i):
        return self.pairs[i]

    def __iter__(self) -> Iterator[Pair]:
        return iter(self.pairs)

    @property
    def skipped(self) -> int:
        return self.blank + len(self.malformed)

    def __repr__(self) -> str:
        return (
            f"AnkiPairs({len(self.pairs)} pairs from {Path(self.path).name}: "
            f"{self.n_lines} lines, {self.blank} blank, {len(self.malformed)} malformed)"
        )


def _decoded_lines(raw: bytes) -> Iterator[str | None]:
    """Lines of a file as text, ``None`` for a line that is not valid text."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 with its byte-order mark
        text = raw.decode("utf-16", errors="replace")
        newline = "\n" if "\n" in text else "\r"
        lines = text.split(newline)
        if lines and lines[-1] == "":
            lines.pop()  # the newline at the end of the last line
        for line in lines:
            yield None if "\ufffd" in line else line
        return
    if raw.startswith(b"\xef\xbb\xbf"):  # the UTF-8 byte-order mark
        raw = raw[3:]
    newline = b"\n" if b"\n" in raw else b"\r"  # old Mac files end their lines with \r alone
    lines = raw.split(newline)
    if lines and lines[-1] == b"":
        lines.pop()  # the newline at the end of the last line
    for line in lines:
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError:
            yield None


def read_anki_pairs(
    path: str | os.PathLike,
    src_lang: str = "en",
    tgt_lang: str = "fr",
    max_pairs: int | None = None,
    reverse: bool = False,
) -> AnkiPairs:
    """Read sentence pairs from a Tatoeba/Anki tab-separated file.

    Each usable line has two or three tab-separated columns: a sentence in
    ``src_lang`` (first column), its translation in ``tgt_lang`` (second
    column), and optionally an attribution. Blank lines and malformed lines
    are skipped and counted; lines with invalid UTF-8 are malformed too.
    ``reverse=True`` makes the second column the source (to translate into
    English). Raises ``FileNotFoundError`` for a
    missing file and ``ValueError`` when the file holds no pair at all.
    """
    src_lang, tgt_lang = language(src_lang), language(tgt_lang)
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"no corpus file at {str(path)!r}: check the path, "
            "or fetch d2l's English–French file with download_fra_eng()"
        )
    if path.is_dir():
        raise IsADirectoryError(
            f"{str(path)!r} is a directory; give the path of the tab-separated file inside it (for example fra.txt)"
        )
    if max_pairs is not None and max_pairs < 1:
        raise ValueError(f"max_pairs must be >= 1 or None, got {max_pairs}")
    result = AnkiPairs([], str(path))
    raw = path.read_bytes()
    for number, line in enumerate(_decoded_lines(raw) if raw else (), start=1):
        result.n_lines = number
        if line is None:
            result.malformed.append(number)
            continue
        line = line.rstrip("\r").lstrip("\ufeff")
        if not line.strip():
            result.blank += 1
            continue
        columns = line.split("\t")
        if len(columns) not in (2, 3):
            result.malformed.append(number)
            continue
        src, tgt = columns[0].strip(), columns[1].strip()
        if not src or not tgt:
            result.malformed.append(number)
            continue
        attribution = columns[2].strip() if len(columns) == 3 else ""
        if reverse:
            result.pairs.append(Pair(tgt, src, None, tgt_lang, src_lang, attribution))
        else:
            result.pairs.append(Pair(src, tgt, None, src_lang, tgt_lang, attribution))
        if max_pairs is not None and len(result.pairs) >= max_pairs:
            break
    if not result.pairs:
        raise ValueError(
            f"an empty corpus: {str(path)!r} holds no sentence pair ({result.n_lines} lines, {result.blank} blank, "
            f"{len(result.malformed)} malformed); an Anki file has one 'sentence<TAB>translation' per line"
        )
    return result


def pairs_file(path: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> Path:
    """The pairs file at ``path``: the file itself, or the one inside a zip as manythings.org publishes it.

    A zip such as ``cmn-eng.zip`` holds the pairs (``cmn.txt``) and a note
    (``_about.txt``); the pairs are extracted once, into ``cache_dir``
    (:func:`default_cache_dir` by default), under the archive's checksum.
    Raises ``FileNotFoundError``, ``IsADirectoryError``, or ``ValueError`` for
    a damaged archive or one that does not hold exactly one pairs file.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"no pairs file at {str(path)!r}")
    if path.is_dir():
        raise IsADirectoryError(f"{str(path)!r} is a folder; give the tab-separated file inside it (such as fra.txt)")
    if not zipfile.is_zipfile(path):
        return path
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.endswith(".txt") and not PurePosixPath(n).name.startswith("_")]
    except zipfile.BadZipFile:
        raise ValueError(f"{str(path)!r} is a damaged zip archive") from None
    if len(names) != 1:
        listed = ", ".join(names) or "none"
        raise ValueError(
            f"{str(path)!r} should hold one pairs file (*.txt), but holds {listed}: "
            "extract the one you want and give its path"
        )
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    folder = cache / "extracted" / sha1_of(path)[:16]
    target = folder / _safe_member_path(names[0])
    if not target.is_file():
        extract_zip(path, folder)
    return target


def corpus_from_pairs(
    pairs: Sequence[Pair],
    splits: tuple[float, float, float] = (0.8, 0.1, 0.1),
    min_freq: int = 1,
) -> Corpus:
    """Split real pairs into train / valid / test with no sentence in two splits, and build vocabularies.

    The split is :func:`~attnbook.data.split_by_checksum`: pairs that share a
    source or a target sentence (Tatoeba often has several translations of
    "Go.") stay together in one split, chosen from a checksum of the
    sentences, so the split is the same on every machine.
    """
    pairs = list(pairs)
    if not pairs:
        raise ValueError("an empty corpus: there are no sentence pairs to split")
    return Corpus.from_splits(split_by_checksum(pairs, splits), min_freq=min_freq)


# --- Downloading ----------------------------------------------------------------------


def default_cache_dir() -> Path:
    """``$ATTNBOOK_DATA`` if set, else ``~/.cache/attnbook``."""
    return Path(os.environ.get("ATTNBOOK_DATA") or Path.home() / ".cache" / "attnbook")


def sha1_of(path: str | os.PathLike) -> str:
    """The SHA-1 of a file, as 40 hex digits."""
    digest = hashlib.sha1()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download(
    url: str,
    cache_dir: str | os.PathLike | None = None,
    sha1: str | None = None,
    filename: str | None = None,
    timeout: float = 60.0,
) -> Path:
    """Download ``url`` into ``cache_dir`` (once) and return the file's path.

    A file already in the cache whose SHA-1 matches is used as is. Otherwise
    the file is streamed into a temporary file next to its final place,
    checked, and only then renamed into place, so an interrupted or damaged
    download never leaves a file that looks complete. A checksum mismatch
    deletes the download and raises :class:`ChecksumError`; no network raises
    :class:`DownloadError` with what to do instead.
    """
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    name = filename or PurePosixPath(urllib.parse.urlparse(url).path).name
    if not name or name in (".", ".."):
        raise ValueError(f"cannot tell a file name from the URL {url!r}: pass filename=")
    target = cache / name
    if target.is_file():
        if sha1 is None or sha1_of(target) == sha1.lower():
            return target
        target.unlink()  # damaged or stale: fetch it again
    fd, tmp_name = tempfile.mkstemp(dir=cache, prefix=f".{name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha1()
        received = 0
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=timeout) as response:
                    expected_size = response.headers.get("Content-Length")
                    for chunk in iter(lambda: response.read(1 << 16), b""):
                        digest.update(chunk)
                        out.write(chunk)
                        received += len(chunk)
            except urllib.error.HTTPError as err:
                raise DownloadError(f"could not download {url}: the server answered {err.code} {err.reason}") from None
            except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
                reason = getattr(err, "reason", None) or err
                raise DownloadError(
                    f"could not download {url} ({type(err).__name__}: {reason}). You seem to be offline, or the server "
                    f"cannot be reached. The course's own corpus, attnbook.data.load_corpus(), needs no network; "
                    f"or fetch the file on a connected machine and put it in {str(cache)!r} as {name!r}."
                ) from None
        if expected_size is not None and expected_size.isdigit() and received != int(expected_size):
            raise DownloadError(
                f"the download of {url} was cut short: {received} of {expected_size} bytes arrived; try again"
            )
        if sha1 is not None and digest.hexdigest() != sha1.lower():
            raise ChecksumError(
                f"the file downloaded from {url} has SHA-1 {digest.hexdigest()}, but {sha1.lower()} was expected: "
                f"it is damaged or not the file published; it was deleted (try again)"
            )
        os.replace(tmp, target)  # atomic: the final name appears only when the file is complete and checked
    finally:
        if tmp.exists():
            tmp.unlink()
    return target


def _safe_member_path(name: str) -> PurePosixPath:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        raise ValueError(f"refusing to extract {name!r}: it would be written outside the target folder")
    return path


def extract_zip(archive: str | os.PathLike, dest: str | os.PathLike, max_bytes: int = 2 * 1024**3) -> list[Path]:
    """Extract a zip archive into ``dest`` safely; return the paths of the files written.

    Members with absolute paths, ``..`` or symbolic links are refused, and so
    is an archive that would unpack to more than ``max_bytes``. Everything is
    first extracted into a temporary folder inside ``dest`` and then moved into
    place, so a failure leaves ``dest`` as it was.
    """
    archive, dest = Path(archive), Path(dest)
    if not archive.is_file():
        raise FileNotFoundError(f"no archive at {str(archive)!r}")
    dest.mkdir(parents=True, exist_ok=True)
    try:
        zf = zipfile.ZipFile(archive)
    except zipfile.BadZipFile:
        raise ValueError(f"{str(archive)!r} is not a zip archive (or it is damaged)") from None
    with zf:
        members = zf.infolist()
        total = 0
        for info in members:
            _safe_member_path(info.filename)
            if stat.S_ISLNK(info.external_attr >> 16):
                raise ValueError(f"refusing to extract {info.filename!r}: it is a symbolic link")
            total += info.file_size
        if total > max_bytes:
            raise ValueError(f"{str(archive)!r} would unpack to {total} bytes, more than the limit of {max_bytes}")
        staging = Path(tempfile.mkdtemp(dir=dest, prefix=".extract-"))
        try:
            for info in members:
                target = staging / _safe_member_path(info.filename)
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
            written = []
            for top in sorted(staging.iterdir()):
                final = dest / top.name
                if final.is_dir() and not final.is_symlink():
                    shutil.rmtree(final)
                elif final.exists() or final.is_symlink():
                    final.unlink()
                os.replace(top, final)
            for info in members:
                if not info.is_dir():
                    written.append(dest / _safe_member_path(info.filename))
            return written
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def download_fra_eng(
    cache_dir: str | os.PathLike | None = None,
    url: str | None = None,
    sha1: str | None = None,
    timeout: float = 60.0,
) -> Path:
    """Fetch d2l's English–French Tatoeba pairs (once) and return the path of ``fra.txt``.

    ``url`` and ``sha1`` are :data:`FRA_ENG_URL` and :data:`FRA_ENG_SHA1`
    unless given. Read the file with ``read_anki_pairs(path, "en", "fr")``.
    """
    url, sha1 = url or FRA_ENG_URL, sha1 or FRA_ENG_SHA1
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    folder = cache / "fra-eng"
    text, marker = folder / "fra.txt", folder / ".source-sha1"
    if text.is_file() and marker.is_file() and marker.read_text().strip() == sha1.lower():
        return text  # extracted before from an archive with the right checksum
    archive = download(url, cache, sha1, timeout=timeout)
    try:
        extract_zip(archive, cache)
    except ValueError:
        archive.unlink(missing_ok=True)  # keep the cache clean: the archive cannot be used
        raise
    if not text.is_file():
        raise ValueError(f"the archive from {url} has no fra-eng/fra.txt; it is not d2l's fra-eng archive")
    marker.write_text(sha1.lower() + "\n")
    return text
