"""Where an export's bytes come from: one file, bytes already in hand, a folder, or a ``.zip``.

Every reader reads through a :class:`Source`, so a Slack workspace is the same to it as a
folder or as a zip, and nothing is ever extracted to disk. A zip is read in place with
:mod:`zipfile` (the standard library's: nothing lighter or safer exists on PyPI for reading
one) and bounded before a byte is inflated: at most ``MAX_ZIP_ENTRIES`` entries and
``MAX_ZIP_BYTES`` uncompressed in all, by the sizes its directory declares (``zipfile``
never inflates an entry past its declared size and checks its CRC, so a lying directory
fails the read rather than filling memory). Entry names are names, never paths: one that
climbs (``../x``), starts at a root, or holds a drive or a NUL refuses the whole archive.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Protocol

from wontopos_mcp.imports.messages import SNIFF_BYTES, BadExport

MAX_ZIP_ENTRIES = 100_000
MAX_ZIP_BYTES = 4 * 1024**3  # 4 GiB uncompressed: a large workspace, not a bomb
MAX_ZIP_RATIO = 1_000  # an entry inflating more than this (beyond 1 MiB) is a bomb's


class Source(Protocol):
    """An export as a reader sees it.

    ``name``: the file or folder's name as the person gave it (no directories), used for
    messages and as the conversation of one-conversation files. A single file has no
    entries; a folder or a zip lists its files as ``/``-separated relative names."""

    name: str

    def open(self) -> BinaryIO:
        """The file's bytes from the start (a new stream each call). A folder or zip: error."""
        ...

    def entries(self) -> list[str]:
        """The relative names of the files inside, sorted; ``[]`` for a single file."""
        ...

    def open_entry(self, entry: str) -> BinaryIO:
        """One entry's bytes, by a name ``entries()`` gave."""
        ...


def head(source: Source) -> bytes:
    """The first ``SNIFF_BYTES`` of a single-file source (``b""`` for a folder or zip)."""
    if source.entries():
        return b""
    with source.open() as stream:
        return stream.read(SNIFF_BYTES)


class FileSource:
    """A file on disk."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.name = self.path.name

    def open(self) -> BinaryIO:
        return open(self.path, "rb")

    def entries(self) -> list[str]:
        return []

    def open_entry(self, entry: str) -> BinaryIO:
        raise BadExport(entry, f"{self.name} is a file, not a folder or zip")


class BytesSource:
    """An export already in memory (the REST body): ``name`` is the caller's file name."""

    def __init__(self, name: str, data: bytes) -> None:
        self.name, self.data = name, data

    def open(self) -> BinaryIO:
        return io.BytesIO(self.data)

    def entries(self) -> list[str]:
        return []

    def open_entry(self, entry: str) -> BinaryIO:
        raise BadExport(entry, f"{self.name} is a file, not a folder or zip")


class FolderSource:
    """A folder (an unzipped Slack export): its regular files, recursively, symlinks not followed."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.name = self.path.name

    def open(self) -> BinaryIO:
        raise BadExport(self.name, "a folder, not a file")

    def entries(self) -> list[str]:
        found: list[str] = []
        for root, dirs, files in os.walk(self.path, followlinks=False):
            dirs.sort()
            for file in files:
                full = Path(root) / file
                if full.is_file() and not full.is_symlink():
                    found.append(full.relative_to(self.path).as_posix())
        return sorted(found)

    def open_entry(self, entry: str) -> BinaryIO:
        if entry not in set(self.entries()):
            raise BadExport(entry, "no such file in the folder")
        return open(self.path / entry, "rb")


class ZipSource:
    """A ``.zip`` read in place, bounded (see the module's docstring)."""

    def __init__(self, name: str, stream: BinaryIO) -> None:
        self.name = name
        try:
            self.archive = zipfile.ZipFile(stream)
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise BadExport("byte 0", f"not a readable zip archive ({exc})") from None
        infos = self.archive.infolist()
        if len(infos) > MAX_ZIP_ENTRIES:
            raise BadExport("zip directory", f"{len(infos):,} entries, more than the {MAX_ZIP_ENTRIES:,} an export has")
        total = 0
        self.files: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            _check_entry_name(info.filename)
            total += info.file_size
            if info.file_size > (1 << 20) and info.file_size > MAX_ZIP_RATIO * max(info.compress_size, 1):
                raise BadExport(f"zip entry {info.filename!r}", "inflates more than a thousandfold: a zip bomb")
            if not info.is_dir():
                self.files[info.filename] = info
        if total > MAX_ZIP_BYTES:
            raise BadExport("zip directory", f"{total:,} bytes uncompressed, more than {MAX_ZIP_BYTES:,}")

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> ZipSource:
        return cls(Path(path).name, open(path, "rb"))

    def open(self) -> BinaryIO:
        raise BadExport(self.name, "a zip archive, not a single file")

    def entries(self) -> list[str]:
        return sorted(self.files)

    def open_entry(self, entry: str) -> BinaryIO:
        info = self.files.get(entry)
        if info is None:
            raise BadExport(entry, "no such entry in the zip")
        try:
            return self.archive.open(info)  # type: ignore[return-value]
        except (zipfile.BadZipFile, NotImplementedError, RuntimeError) as exc:  # encrypted, unknown method
            raise BadExport(f"zip entry {entry!r}", f"cannot be read ({exc})") from None


class EntrySource:
    """One file of a folder or zip read as a file of its own: the export inside the archive
    an app hands out (a ChatGPT or Claude zip's ``conversations.json``, a WhatsApp zip's
    ``_chat.txt``, a Telegram folder's ``result.json``), found by ``formats.detect``.

    ``name`` is the archive's, a ``.zip`` at its end replaced by the entry's extension:
    ``WhatsApp Chat - Anna.zip`` holding ``_chat.txt`` reads as ``WhatsApp Chat - Anna.txt``.
    The formats of one conversation a file (WhatsApp, transcripts, subtitles) take the
    conversation from the name, so a chat from iOS is named as the export named it, not
    ``_chat.txt`` like every other, and Android's ``WhatsApp Chat with Anna.zip`` (holding
    ``WhatsApp Chat with Anna.txt``) is the same conversation as that ``.txt`` imported on
    its own: importing one after the other stores nothing twice. ``entry`` is the entry's
    name in the archive."""

    def __init__(self, archive: Source, entry: str) -> None:
        self.archive, self.entry = archive, entry
        stem = archive.name[:-4] if archive.name.lower().endswith(".zip") else archive.name
        suffix = PurePosixPath(entry).suffix
        self.name = stem if stem.lower().endswith(suffix.lower()) else stem + suffix

    def open(self) -> BinaryIO:
        return self.archive.open_entry(self.entry)

    def entries(self) -> list[str]:
        return []

    def open_entry(self, entry: str) -> BinaryIO:
        raise BadExport(entry, f"{self.entry} in {self.archive.name} is a file, not a folder or zip")


def _check_entry_name(name: str) -> None:
    path = PurePosixPath(name.replace("\\", "/"))
    if "\x00" in name or path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        raise BadExport(f"zip entry {name!r}", "its name climbs out of the archive; refused, nothing read")


def open_source(path: str | os.PathLike[str]) -> Source:
    """The source at ``path``: a folder, a zip (by its magic bytes, not its name), or a file."""
    p = Path(path)
    if p.is_dir():
        return FolderSource(p)
    with open(p, "rb") as stream:
        magic = stream.read(4)
    if magic == b"PK\x03\x04" or magic == b"PK\x05\x06":
        return ZipSource.of(p)
    return FileSource(p)


def bytes_source(name: str, data: bytes) -> Source:
    """The source of bytes in hand (a REST body): a zip when they are one."""
    if data[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return ZipSource(name, io.BytesIO(data))
    return BytesSource(name, data)


def utf16_name(head: bytes) -> str | None:
    """The UTF-16 (or UTF-32) flavour a file's first bytes announce, ``None`` for anything else.

    A BOM says it outright; without one, NUL bytes among the first two bytes of an
    ASCII-heavy text are UTF-16's zero halves (or UTF-32's)."""
    if head.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "UTF-32"
    if head.startswith(b"\xff\xfe"):
        return "UTF-16 (little-endian)"
    if head.startswith(b"\xfe\xff"):
        return "UTF-16 (big-endian)"
    if len(head) >= 2 and (head[0] == 0) != (head[1] == 0):
        return "UTF-16 (no byte order mark)"
    return None


def refuse_wide_text(first: bytes, place: str) -> None:
    """``BadExport`` at ``place`` when a file's first bytes are UTF-16 or UTF-32 (what a
    phone or Windows' Notepad sometimes saves): every reader reads UTF-8, and the fix is to
    save the file again as UTF-8."""
    encoding = utf16_name(first)
    if encoding is not None:
        raise BadExport(place, f"the file is {encoding}, not UTF-8: open it and save it again as UTF-8")


def iter_lines(stream: BinaryIO, where: str = "line") -> Iterator[tuple[int, bytes]]:
    """Numbered lines of a stream (1-based, ending kept), each at most ``MAX_MESSAGE_BYTES``:
    a longer line refuses the file without being read whole."""
    from wontopos_mcp.imports.messages import MAX_MESSAGE_BYTES

    number = 0
    while True:
        line = stream.readline(MAX_MESSAGE_BYTES + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_MESSAGE_BYTES and not line.endswith(b"\n"):
            raise BadExport(f"{where} {number}", f"longer than {MAX_MESSAGE_BYTES:,} bytes: not a chat export")
        yield number, line
