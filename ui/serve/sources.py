"""What this server may read: which models (any hub id and listed folder, the default on this machine's
own address, or only the operator's list) and which of its files and folders. Set in the environment
before `streamlit run` (docs/serving.md):

    ATTENTION_SOURCES="bert-base-uncased;/srv/models/gpt2"   the lock: the bundled models and these
    ATTENTION_HUB_DOWNLOADS=1                                 with the lock, hub ids may be downloaded
    ATTENTION_BIN_FILES=1                                     with the lock, .bin weights may be read
    ATTENTION_OPEN=1                                          on a network address, no lock without a list
    ATTENTION_FILE_DIRS="/srv/corpora;/srv/models"            the folders whose files the page reads

The server listens where Streamlit's `server.address` says: .streamlit/config.toml sets 127.0.0.1 (this
machine only). Served on any other address (`--server.address 0.0.0.0`, a host name, or no address: every
interface) without ATTENTION_SOURCES, the model box is locked to the bundled model, unless ATTENTION_OPEN=1.

With the lock on, a source not in the list is refused before anything is read from disk or the
Hub, with one message whatever the path or id (no hint of what exists), the page offers the list
as a drop-down instead of a text box, and no file of the server is offered (Global Q·K's corpus file
and points folder). Without it, downloads and .bin files (read with torch.load(weights_only=True))
are allowed, and a checkpoint folder, corpus file or points folder is read only where it lies (its
symlinks and `..` resolved) under a folder of ATTENTION_FILE_DIRS (`;` between folders; unset: the
repository's data/ folder; empty: none), never under /proc, /sys or /dev, and a file only if it is a
regular file; every path outside gets one message, whether it exists or not. A corpus file is read in
steps (`bounded_lines`), stopped at its bound on bytes read or on a line's length.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from attention import ModelLoadError
from attention.load.sources import is_writer

SOURCES_VAR, DOWNLOADS_VAR, BIN_VAR = "ATTENTION_SOURCES", "ATTENTION_HUB_DOWNLOADS", "ATTENTION_BIN_FILES"
OPEN_VAR, FILES_VAR = "ATTENTION_OPEN", "ATTENTION_FILE_DIRS"
REFUSED = "this server loads only the models in its list: pick one there"
DATA = Path(__file__).resolve().parents[2] / "data"
RELATIVE = f" in the folders {FILES_VAR} lists (a name that is not a whole path is read under each of them)"
NEVER_READ = (Path("/proc"), Path("/sys"), Path("/dev"))  # the kernel's and devices' files, whatever is listed
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")  # attention/load/sources.py's: anything else is a path


class FileRefused(ValueError):
    """A path on the server this page may not read; the message names the setting, not what exists."""


@dataclass(frozen=True)
class SourcePolicy:
    locked: bool
    allowed: tuple[str, ...]  # besides "" (the bundled model), when locked
    downloads: bool
    bin_files: bool

    def check(self, source: str) -> None:
        """A ModelLoadError, the same for every refused source, unless this server may load it: when
        locked, the list; when not, any hub id, and a folder under ATTENTION_FILE_DIRS."""
        if is_writer(source):  # bundled, as the default is: always allowed
            return
        if self.locked:
            if source not in ("",) + self.allowed:
                raise ModelLoadError(REFUSED)
        elif source and _names_a_path(source):
            try:  # a checkpoint folder, or a .gguf file, under the operator's folders
                server_path(source, folder=not source.strip().lower().endswith(".gguf"))
            except FileRefused as err:
                raise ModelLoadError(str(err)) from None


def _names_a_path(source: str) -> bool:
    """Whether resolve_source would read `source` as a folder: it exists, or it cannot be a hub id."""
    return os.path.lexists(os.path.expanduser(source.strip())) or not _HUB_ID.match(source.strip())


def server_address() -> str:
    """The address the server listens on ("": every interface, Streamlit's default)."""
    from streamlit import config

    return str(config.get_option("server.address") or "")


def on_loopback(address: str) -> bool:
    """Whether only this machine reaches `address`: a loopback address, localhost, or a unix socket."""
    if address.startswith("unix://") or address.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:  # "" (every interface) or a host name: reached from the network
        return False


def policy() -> SourcePolicy:
    """The server's policy, read from the environment (set before the server starts) and its address."""
    listed = os.environ.get(SOURCES_VAR)
    if listed is None:
        if on_loopback(server_address()) or os.environ.get(OPEN_VAR) == "1":
            return SourcePolicy(False, (), True, True)
        return SourcePolicy(True, (), False, False)  # on the network and nothing said: the bundled model
    allowed = tuple(dict.fromkeys(s.strip() for s in listed.split(";") if s.strip()))
    return SourcePolicy(True, allowed, os.environ.get(DOWNLOADS_VAR) == "1", os.environ.get(BIN_VAR) == "1")


def served() -> str:
    """One line for the server's log: where it listens, what its model box loads, which files it reads."""
    address = server_address()
    where = f"{address} (this machine only)" if on_loopback(address) else f"{address or 'every network interface'}"
    rules = policy()
    if rules.locked and os.environ.get(SOURCES_VAR) is None:
        box = (
            f"the model box is locked to the bundled model ({SOURCES_VAR} is not set on a network address: "
            f'list models in {SOURCES_VAR}="a;b", or set {OPEN_VAR}=1 to unlock it)'
        )
    elif rules.locked:
        box = f"the model box loads only {SOURCES_VAR}'s list and the bundled model; no server file is offered"
    else:
        dirs = ", ".join(map(str, file_dirs())) or "none"
        box = f"the model box is unlocked: any hub id, and folders and files under {FILES_VAR} ({dirs})"
    return f"Serving on {where}: {box}."


def file_dirs() -> tuple[Path, ...]:
    """The folders (resolved) under which the page reads files and folders the visitor names."""
    listed = os.environ.get(FILES_VAR)
    if listed is None:
        return (DATA,)
    return tuple(Path(os.path.expanduser(p.strip())).resolve() for p in listed.split(";") if p.strip())


def _under(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _refused(kind: str) -> FileRefused:
    return FileRefused(f"this server reads {kind} only under the folders its operator lists ({FILES_VAR})")


def server_path(typed: str, folder: bool = False) -> Path:
    """The path a visitor typed, resolved, if the page may read it: under a folder of ATTENTION_FILE_DIRS,
    not under /proc, /sys or /dev, and a folder (`folder`) or a regular file. A name that is not a whole path
    (`gap-heads`) is read under each listed folder. Else FileRefused, one message for every path outside
    (whether or not it exists)."""
    refused = _refused("folders" if folder else "files")
    try:
        path = _resolved(typed.strip())
    except (OSError, ValueError):  # a name too long, a NUL
        raise refused from None
    if not typed.strip() or any(_under(path, p) for p in NEVER_READ):
        raise refused
    if not any(_under(path, d) for d in file_dirs()):
        raise refused
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        relative = "" if os.path.isabs(os.path.expanduser(typed.strip())) else RELATIVE
        raise FileRefused(f"there is no {'folder' if folder else 'file'} '{typed.strip()}'{relative}") from None
    if not (stat.S_ISDIR(mode) if folder else stat.S_ISREG(mode)):
        raise FileRefused(f"'{typed.strip()}' is not a {'folder' if folder else 'regular file'}")
    return path


def _resolved(typed: str) -> Path:
    """`typed`, resolved: a name that is not absolute is read under each listed folder in turn (the first that
    holds it), else from the server's folder as before, else it names the first listed folder's (that has none
    of it: server_path says so); '~' is the server's home."""
    expanded = os.path.expanduser(typed)
    here = Path(os.path.realpath(expanded))
    if os.path.isabs(expanded):
        return here
    candidates = [(Path(os.path.realpath(listed / expanded)), listed) for listed in file_dirs()]
    inside = [path for path, listed in candidates if _under(path, listed)]
    found = next((path for path in inside if path.exists()), None)
    return found or (here if here.exists() or not inside else inside[0])


@contextlib.contextmanager
def bounded_lines(path: Path, max_bytes: int, max_line: int) -> Iterator[Iterator[str]]:
    """The lines of the regular file `path` as text, read in steps: FileRefused once more than `max_bytes`
    were read or a line is longer than `max_line` bytes, before either is held (a file that grows, or one
    of /proc that says it has no size, is stopped there too). It is opened as `open_under` does."""
    fd = open_under(path, os.O_RDONLY | os.O_NONBLOCK)  # not blocking: a FIFO put there since is refused below
    with os.fdopen(fd, "rb") as raw:
        if not stat.S_ISREG(os.fstat(raw.fileno()).st_mode):
            raise FileRefused(f"{path.name}: not a regular file")
        yield _lines(raw, max_bytes, max_line)


def open_under(path: Path, flags: int) -> int:
    """A descriptor of `path` (server_path's, resolved) opened with `flags` one name at a time from the listed
    folder that holds it: each folder on the way with O_NOFOLLOW | O_DIRECTORY, the file itself with O_NOFOLLOW.
    A link put in place of any of them since server_path resolved the path is refused, not followed (the
    same message as server_path's), so what is opened lies under that folder whatever changed meanwhile."""
    root = next((d for d in file_dirs() if _under(path, d)), None)
    if root is None or path == root or any(_under(path, p) for p in NEVER_READ):
        raise _refused("files")
    names = path.relative_to(root).parts
    nofollow = os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        raise FileRefused(f"{path.name}: cannot be read ({err.strerror})") from None
    try:
        for name in names[:-1]:
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | nofollow, dir_fd=folder)
            os.close(folder)
            folder = inner
        return os.open(names[-1], flags | nofollow, dir_fd=folder)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):  # a link (or a file) where a folder or the file was
            raise _refused("files") from None
        raise FileRefused(f"{path.name}: cannot be read ({err.strerror})") from None
    finally:
        os.close(folder)


def _lines(raw, max_bytes: int, max_line: int) -> Iterator[str]:
    read = 0
    for number in range(1, max_bytes + 2):  # a line is at least one byte
        line = raw.readline(max_line + 2)  # its newline (or \r\n) and one byte past the bound at most
        if not line:
            return
        read += len(line)
        if read > max_bytes:
            raise FileRefused(f"more than {max_bytes:,} bytes: reading stopped there; name a smaller file")
        if len(line.rstrip(b"\r\n")) > max_line:
            raise FileRefused(f"line {number} is longer than {max_line:,} bytes: reading stopped there")
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError:
            raise FileRefused(f"line {number} is not UTF-8 text") from None
