"""Which models this server may load: any folder or hub id (the default, for a laptop), or only the
operator's list (for a public address), set in the environment before `streamlit run`:

    ATTENTION_SOURCES="bert-base-uncased;/srv/models/gpt2"   the lock: the bundled model and these
    ATTENTION_HUB_DOWNLOADS=1                                 with the lock, hub ids may be downloaded
    ATTENTION_BIN_FILES=1                                     with the lock, .bin weights may be read

With the lock on, a source not in the list is refused before anything is read from disk or the
Hub, with one message whatever the path or id (no hint of what exists), and the page offers the
list as a drop-down instead of a text box. Without it, downloads and .bin files (read with
torch.load(weights_only=True)) are allowed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from attention import ModelLoadError

SOURCES_VAR, DOWNLOADS_VAR, BIN_VAR = "ATTENTION_SOURCES", "ATTENTION_HUB_DOWNLOADS", "ATTENTION_BIN_FILES"
REFUSED = "this server loads only the models in its list: pick one there"


@dataclass(frozen=True)
class SourcePolicy:
    locked: bool
    allowed: tuple[str, ...]  # besides "" (the bundled model), when locked
    downloads: bool
    bin_files: bool

    def check(self, source: str) -> None:
        """A ModelLoadError, the same for every refused source, unless this server may load it."""
        if self.locked and source not in ("",) + self.allowed:
            raise ModelLoadError(REFUSED)


def policy() -> SourcePolicy:
    """The server's policy, read from the environment (set before the server starts)."""
    listed = os.environ.get(SOURCES_VAR)
    if listed is None:
        return SourcePolicy(False, (), True, True)
    allowed = tuple(dict.fromkeys(s.strip() for s in listed.split(";") if s.strip()))
    return SourcePolicy(True, allowed, os.environ.get(DOWNLOADS_VAR) == "1", os.environ.get(BIN_VAR) == "1")
