"""Modules the views import only when first needed (they slow the app's start), imported once per
process, under one lock, before any view is drawn.

Two sessions opening their first views at once would otherwise import pandas (a table, the head
comparison) or scipy (attention flow) from two script threads together, and one of them can be
handed a half-initialised module. Here the first script run imports them while the others wait;
every later run finds them done and goes straight on.
"""
from __future__ import annotations

import importlib
import logging
import threading

LAZY_MODULES = ("pandas", "pyarrow", "scipy.sparse", "scipy.sparse.csgraph")
_lock = threading.Lock()
_done = False
log = logging.getLogger("attention-app")


def preload() -> None:
    """Import LAZY_MODULES once; callers arriving meanwhile wait until it is done."""
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        for name in LAZY_MODULES:
            try:
                importlib.import_module(name)
            except ImportError:  # the view that needs it says so when it is asked for
                log.warning("could not import %s", name)
        _done = True
