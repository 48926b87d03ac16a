"""Safe by default (issue 44): the server listens on this machine only unless told otherwise, and on a network
address without a list its model box is locked; the page reads the server's files only under the operator's
folders (resolved: links, `..`, /proc, devices refused), a corpus file bounded while it is read; a points
table past its rows or holding NaN, a tokenizer's panic and an over-long ?model= get a message, the page kept."""

from __future__ import annotations

import json
import os
import time
import tomllib

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT
from streamlit import config
from test_app import no_errors, start

from attention.analysis import qk_global
from attention.analysis.qk_global import COLUMNS, FolderError, read_folder, write_folder
from ui.serve.sources import (
    FILES_VAR,
    OPEN_VAR,
    REFUSED,
    SOURCES_VAR,
    FileRefused,
    bounded_lines,
    on_loopback,
    policy,
    served,
    server_path,
)


def errors(at) -> list[str]:
    """The page's error messages as shown (plain's escapes undone)."""
    return [e.value.replace("\\", "") for e in at.error]


def in_use(at) -> str:
    """The model the sidebar says is in use."""
    caption = next(c.value for c in at.sidebar.caption if c.value.startswith("In use: "))
    return caption.removeprefix("In use: ").replace("\\", "")


@pytest.fixture
def listed(tmp_path, monkeypatch):
    """A folder listed in ATTENTION_FILE_DIRS with a corpus in it, and a secret beside it, outside."""
    inside = tmp_path / "listed"
    inside.mkdir()
    (inside / "corpus.txt").write_text("The cat sat on the mat.\nThe dog ran.\n")
    (tmp_path / "secret.txt").write_text("API_KEY=hunter2\n")
    monkeypatch.setenv(FILES_VAR, str(inside))
    monkeypatch.delenv(SOURCES_VAR, raising=False)
    return inside


@pytest.fixture
def network(monkeypatch):
    """The server as `streamlit run app.py --server.address 0.0.0.0` starts it."""
    before = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    monkeypatch.delenv(SOURCES_VAR, raising=False)
    monkeypatch.delenv(OPEN_VAR, raising=False)
    yield
    config.set_option("server.address", before)


# ---- the address and the lock ------------------------------------------------------------------------------


def test_the_server_listens_on_this_machine_only_by_default(monkeypatch):
    monkeypatch.delenv(SOURCES_VAR, raising=False)
    address = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]["address"]
    assert on_loopback(address) and config.get_option("server.address") == address
    assert not policy().locked  # a laptop: the model box takes what its user types
    assert served().startswith(f"Serving on {address} (this machine only): the model box is unlocked")
    assert [on_loopback(a) for a in ("localhost", "::1", "127.0.0.2", "unix:///tmp/s")] == [True] * 4
    assert [on_loopback(a) for a in ("", "0.0.0.0", "::", "192.168.1.5", "example.org")] == [False] * 5


def test_a_network_address_without_a_list_is_locked_to_the_bundled_model(network, monkeypatch):
    rules = policy()
    assert rules.locked and rules.allowed == () and not rules.downloads and not rules.bin_files
    line = served()
    assert line.startswith("Serving on 0.0.0.0: the model box is locked to the bundled model")
    assert SOURCES_VAR in line and f"{OPEN_VAR}=1" in line and "\n" not in line
    at = start(model="/etc", view="global", corpus="file", file=str(ROOT / "data" / "coref_examples.jsonl"))
    assert not at.exception
    assert at.sidebar.selectbox(key="model_choice").options == ["all-MiniLM-L6-v2 (bundled)"]
    assert [e.value for e in at.error] == [REFUSED + "  \nThe previous model stays in use."]
    assert any("reads only its own corpora" in i.value for i in at.info)
    monkeypatch.setenv(OPEN_VAR, "1")  # the operator's explicit choice
    assert not policy().locked and "unlocked" in served()
    monkeypatch.setenv(SOURCES_VAR, "bert-base-uncased")
    assert policy().allowed == ("bert-base-uncased",) and "only ATTENTION_SOURCES's list" in served()


@pytest.mark.slow  # 5-14 s on a busy 2-core machine (a process of its own): the full command runs it
def test_the_start_up_line_says_where_the_server_listens():
    env = {k: v for k, v in os.environ.items() if k not in (SOURCES_VAR, OPEN_VAR)} | {"PYTHONPATH": str(ROOT)}
    code = "from ui.serve import preload; preload.log_how_served()"
    import subprocess
    import sys

    for flag, said in (
        ([], "Serving on 127.0.0.1 (this machine only): the model box is unlocked"),
        (["0.0.0.0"], "Serving on 0.0.0.0: the model box is locked to the bundled model"),
    ):
        setup = f"from streamlit import config; config.set_option('server.address', {flag[0]!r}); " if flag else ""
        out = subprocess.run(
            [sys.executable, "-c", setup + code], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env
        )
        assert out.returncode == 0, out.stderr[-2000:]
        lines = [line for line in out.stderr.splitlines() if line.startswith("Serving on")]
        assert len(lines) == 1 and lines[0].startswith(said), out.stderr
        assert "every network interface" not in lines[0]


# ---- the server's files: only under the listed folders --------------------------------------------------------


def test_only_regular_files_under_the_listed_folders_are_read(listed, tmp_path, monkeypatch):
    assert server_path(str(listed / "corpus.txt")) == (listed / "corpus.txt").resolve()
    assert server_path(str(listed), folder=True) == listed.resolve()
    (listed / "out").symlink_to(tmp_path / "secret.txt")  # a link out of the folder
    (listed / "proc").symlink_to("/proc/self/environ")
    os.mkfifo(listed / "fifo")
    refused = "this server reads files only under the folders its operator lists (ATTENTION_FILE_DIRS)"
    for typed in (
        "/proc/self/environ",
        "/proc/self/pagemap",
        "/dev/zero",
        "/etc/passwd",
        str(tmp_path / "secret.txt"),
        str(listed / ".." / "secret.txt"),
        str(listed / "out"),
        str(listed / "proc"),
        str(tmp_path / "no-such-file"),  # outside: the same words whether it exists or not
        "x" * 5000,
    ):
        with pytest.raises(FileRefused) as err:
            server_path(typed)
        assert str(err.value) == refused, typed
    with pytest.raises(FileRefused, match="not a regular file"):
        server_path(str(listed / "fifo"))
    with pytest.raises(FileRefused, match="there is no file"):
        server_path(str(listed / "gone.txt"))
    monkeypatch.setenv(FILES_VAR, "/")  # even an operator listing everything: never the kernel's or devices' files
    with pytest.raises(FileRefused, match="only under the folders"):
        server_path("/proc/self/environ")


def test_a_name_that_is_not_a_whole_path_is_read_under_the_listed_folders(listed, tmp_path, monkeypatch):
    """`gap-heads` names the listed folder's gap-heads, from any folder the server runs in; one that is not there
    says where names are read; a name that leaves the folders is refused as every path outside is."""
    (listed / "gap-heads").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert server_path("gap-heads", folder=True) == (listed / "gap-heads").resolve()
    assert server_path("corpus.txt") == (listed / "corpus.txt").resolve()
    with pytest.raises(FileRefused) as err:
        server_path("gap-tails", folder=True)
    assert str(err.value) == (
        "there is no folder 'gap-tails' in the folders ATTENTION_FILE_DIRS lists (a name that is not a whole path "
        "is read under each of them)"
    )
    (tmp_path / "secret.txt").write_text("x")
    with pytest.raises(FileRefused, match="^this server reads files only under the folders its operator lists"):
        server_path("../secret.txt")


def test_the_default_is_the_repositorys_data_folder(monkeypatch):
    monkeypatch.delenv(FILES_VAR)
    assert server_path(str(ROOT / "data" / "coref_examples.jsonl")).name == "coref_examples.jsonl"
    with pytest.raises(FileRefused):
        server_path(str(ROOT / "app.py"))


@pytest.mark.parametrize("typed", ["/proc/self/environ", "/proc/self/pagemap"])
def test_a_linked_proc_file_is_refused_on_the_page_with_a_message(listed, typed):
    started = time.perf_counter()
    at = start(view="global", corpus="file", file=typed)
    assert not at.exception
    assert errors(at) == ["this server reads files only under the folders its operator lists (ATTENTION_FILE_DIRS)."]
    assert not [b for b in at.button if b.key == "gqk_compute"]  # nothing to compute from
    assert time.perf_counter() - started < 60
    at = start(view="global", corpus="file", file=str(listed / "corpus.txt"), layout="pca")
    no_errors(at)
    assert [b for b in at.button if b.key == "gqk_compute"]  # a listed file is offered


def test_a_points_folder_and_a_checkpoint_folder_outside_are_refused(listed, tmp_path, tiny_dir):
    at = start(view="global", corpus="folder", folder=str(tmp_path))
    assert not at.exception
    assert errors(at) == ["this server reads folders only under the folders its operator lists (ATTENTION_FILE_DIRS)"]
    at = start(model=str(tiny_dir))  # a checkpoint outside the listed folder
    assert not at.exception
    said = errors(at)
    assert len(said) == 1 and said[0].startswith("this server reads folders only under") and "previous model" in said[0]
    assert in_use(at).startswith("all-MiniLM-L6-v2")


def test_a_corpus_file_is_bounded_while_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv(FILES_VAR, str(tmp_path))
    huge = tmp_path / "huge.txt"
    with huge.open("wb") as f:  # 8 GB of one line, sparse: a reader that reads a whole line first never ends
        f.truncate(8 * 2**30)
    started = time.perf_counter()
    with (
        pytest.raises(FileRefused, match="line 1 is longer than 100,000 bytes"),
        bounded_lines(huge, 50 * 2**20, 100_000) as lines,
    ):
        next(iter(lines))
    assert time.perf_counter() - started < 5
    many = tmp_path / "many.txt"
    many.write_bytes(b"a b\n" * 300_000)  # 1.2 MB of short lines
    seen = []
    with pytest.raises(FileRefused, match="more than 1,000,000 bytes"), bounded_lines(many, 1_000_000, 100) as lines:
        seen.extend(lines)
    assert len(seen) == 250_000  # every line before the bound, none after it
    with bounded_lines(many, 2_000_000, 100) as lines:
        assert sum(1 for _ in lines) == 300_000


def test_a_folder_swapped_for_a_link_after_the_check_is_refused_when_the_file_is_opened(listed, tmp_path):
    """server_path resolves the path; a link put in place of a folder on the way before the file is opened
    (a race a visitor may win) is not followed: each folder is opened with O_NOFOLLOW from the listed one."""
    (listed / "sub" / "deeper").mkdir(parents=True)
    (listed / "sub" / "deeper" / "corpus.txt").write_text("The cat sat.\n")
    (tmp_path / "outside" / "deeper").mkdir(parents=True)
    (tmp_path / "outside" / "deeper" / "corpus.txt").write_text("API_KEY=hunter2\n")
    refused = "this server reads files only under the folders its operator lists (ATTENTION_FILE_DIRS)"
    for swapped in ("sub", "sub/deeper"):
        path = server_path(str(listed / "sub" / "deeper" / "corpus.txt"))  # checked while every folder is real
        with bounded_lines(path, 1000, 100) as lines:
            assert list(lines) == ["The cat sat.\n"]
        real = listed / swapped
        real.rename(listed / "moved")
        real.symlink_to(tmp_path / "outside" / swapped.removeprefix("sub").strip("/"))  # the same names, outside
        assert (listed / "sub" / "deeper" / "corpus.txt").read_text() == "API_KEY=hunter2\n"  # followed, it leaks
        with pytest.raises(FileRefused) as err, bounded_lines(path, 1000, 100) as lines:
            list(lines)
        assert str(err.value) == refused, swapped
        real.unlink()
        (listed / "moved").rename(real)
    (listed / "sub" / "deeper").rename(listed / "sub" / "file")
    (listed / "sub" / "deeper").write_text("a file where a folder was\n")
    with pytest.raises(FileRefused, match="only under the folders"), bounded_lines(path, 1000, 100) as lines:
        list(lines)
    with pytest.raises(FileRefused, match="only under the folders"), bounded_lines(tmp_path / "secret.txt", 99, 9):
        pass  # a path no listed folder holds is never opened


def test_the_page_says_a_corpus_line_is_too_long(listed, monkeypatch):
    from ui.views import global_qk

    (listed / "long.txt").write_text("word " * 30_000 + "\n")  # 150,000 bytes on one line
    at = start(view="global", corpus="file", file=str(listed / "long.txt"), layout="pca")
    next(b for b in at.button if b.key == "gqk_compute").click().run()
    assert not at.exception
    assert errors(at) == [f"long.txt: line 1 is longer than {global_qk.MAX_LINE_BYTES:,} bytes: reading stopped there"]


# ---- a points folder's tables: rows bounded before reading, values checked -----------------------------------


def points(n: int, **columns) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "x": np.linspace(0, 1, n),
            "y": np.linspace(1, 0, n),
            "kind": ["query", "key"] * (n // 2),
            "text": np.zeros(n, dtype=np.int32),
            "position": np.arange(n) % 7,
            "token": ["it"] * n,
            "token_kind": ["word"] * n,
            "context": ["the cat sat"] * n,
            "layer": np.full(n, 1, dtype=np.int16),
            "head": np.full(n, 2, dtype=np.int16),
        }
    )
    return frame.assign(**columns)[list(COLUMNS)]


def write_points(folder, frame: pd.DataFrame) -> None:
    """One head's table and one text as write_folder writes them, whatever the table holds."""
    folder.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(folder / "qk-L1-H2.parquet", engine="pyarrow", index=False)
    pd.DataFrame({"text": np.zeros(1, dtype=np.int32), "content": ["one text"]}).to_parquet(folder / "texts.parquet")


@pytest.mark.parametrize(
    "columns, said",
    [
        ({"layer": [np.nan] + [1.0] * 599}, r"column layer holds missing values \(NaN or empty\)"),
        ({"position": [0.5] * 600}, "column position holds values that are not whole numbers"),
        ({"head": np.full(600, 70_000)}, "column head holds values outside 0 to 9,999"),
        ({"x": [np.inf] * 600}, "column x holds values that are not finite"),
        ({"kind": ["query", "<b>"] * 300}, "column kind holds values other than query and key"),
        ({"text": np.full(600, 5)}, "the points name texts that texts.parquet lacks"),
    ],
)
def test_a_bad_value_in_a_points_table_is_a_message(tmp_path, columns, said):
    write_points(tmp_path, points(600, **columns))
    with pytest.raises(FolderError, match=said):
        read_folder(tmp_path)


def test_a_small_file_of_many_rows_or_much_text_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "rows"
    write_folder([points(500_000)], ["one text"], big)
    assert (big / "qk-L1-H2.parquet").stat().st_size < qk_global.MAX_FILE_BYTES / 4  # within the size bound
    with pytest.raises(FolderError, match="500,000 rows, more than the 400,000 read$"):
        read_folder(big)
    wordy = tmp_path / "text"
    write_folder([points(200_000)], ["one text"], wordy)
    table = pa.Table.from_pandas(points(200_000), preserve_index=False)
    context = pa.DictionaryArray.from_arrays(pa.array(np.zeros(200_000, dtype=np.int32)), pa.array(["x" * 1_000]))
    table = table.set_column(COLUMNS.index("context"), "context", context)  # 200 MB as read, one text in the file
    pq.write_table(table, wordy / "qk-L1-H2.parquet")
    assert (wordy / "qk-L1-H2.parquet").stat().st_size < qk_global.MAX_FILE_BYTES / 4
    with pytest.raises(FolderError, match=r"qk-L1-H2.parquet: 19\d MB of text; at most 128 MB are read"):
        read_folder(wordy)


def test_a_folders_tables_are_bounded_together(tmp_path, monkeypatch):
    write_folder([points(600), points(600, head=np.full(600, 3))], ["one text"], tmp_path)
    assert len(read_folder(tmp_path)[0]) == 2
    monkeypatch.setattr(qk_global, "MAX_FOLDER_ROWS", 1_000)
    with pytest.raises(FolderError, match=r"H3.parquet: 600 rows, more than the 400 read \(a folder's tables together"):
        read_folder(tmp_path)


def test_a_nan_layer_in_a_linked_folder_is_said_on_the_page(listed):
    write_points(listed / "points", points(600, layer=[np.nan] + [1.0] * 599))
    at = start(view="global", corpus="folder", folder=str(listed / "points"), layer="1", head="2")
    assert not at.exception
    said = errors(at)
    assert len(said) == 1 and said[0].endswith("column layer holds missing values (NaN or empty)")


def test_a_points_folder_swapped_for_a_link_after_the_check_is_refused_on_the_page(listed, tmp_path, monkeypatch):
    """A link put in place of a folder on the way to a points folder after server_path checked it (a race a
    visitor may win) is not followed when the tables are opened: the page opens them as open_under does."""
    from ui.views import global_qk

    write_points(listed / "sub" / "points", points(600))
    write_points(tmp_path / "outside" / "points", points(600))  # the same names, outside the listed folder
    checked = global_qk.server_path

    def check_then_swap(typed: str, folder: bool = False):  # each run: checked while real, opened swapped
        if (listed / "sub").is_symlink():
            (listed / "sub").unlink()
            (listed / "moved").rename(listed / "sub")
        where = checked(typed, folder)
        (listed / "sub").rename(listed / "moved")
        (listed / "sub").symlink_to(tmp_path / "outside")
        return where

    monkeypatch.setattr(global_qk, "server_path", check_then_swap)
    at = start(view="global", corpus="folder", folder=str(listed / "sub" / "points"), layer="1", head="2")
    assert not at.exception
    assert (listed / "sub").is_symlink()
    assert errors(at) == ["this server reads files only under the folders its operator lists (ATTENTION_FILE_DIRS)"]


# ---- a tokenizer's panic, an over-long ?model= ----------------------------------------------------------------


@pytest.fixture(scope="module")
def panicking(tmp_path_factory, tiny_dir):
    """The tiny checkpoint with a tokenizer whose pattern gives up on a long run of 'a' (Oniguruma's retry limit)."""
    import shutil

    from tokenizers import Regex, pre_tokenizers
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("panic") / "model"
    shutil.copytree(tiny_dir, folder)
    tokenizer = AutoTokenizer.from_pretrained(str(folder), use_fast=True)
    split = pre_tokenizers.Split(Regex(r"(a|aa)+b"), behavior="isolated")
    tokenizer.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.BertPreTokenizer(), split])
    tokenizer.save_pretrained(str(folder))
    settings = json.loads((folder / "tokenizer_config.json").read_text())  # the file as written, not BERT's rebuilt
    (folder / "tokenizer_config.json").write_text(json.dumps(settings | {"tokenizer_class": "PreTrainedTokenizerFast"}))
    return folder


def test_a_tokenizers_panic_is_a_message_and_the_page_is_kept(panicking):
    at = start(model=str(panicking), s="the cat sat")
    no_errors(at)
    at.text_area(key="text").input("a" * 40 + "c")
    next(b for b in at.button if b.label == "Run").click()
    at.run()
    assert not at.exception
    said = errors(at)
    assert len(said) == 1 and said[0].startswith("The model's tokenizer gave up on this text (Onig")
    assert at.text_area(key="text").value == "a" * 40 + "c"  # the sentence is kept, to be changed
    assert at.session_state.source == str(panicking)


@pytest.mark.parametrize("length", [300, 5_000])
def test_an_over_long_model_in_a_link_is_a_notice(length):
    at = start(model="a" * length)
    assert not at.exception
    if length > 500:  # refused as the link is read
        no_errors(at)
        notice = "The link's model is not a printable path of at most 500 characters; using the bundled model."
        assert notice in [i.value for i in at.info]
    else:  # a hub id's shape, but a name longer than the file system takes
        assert len(errors(at)) == 1 and errors(at)[0].startswith("there is no folder 'aaa")
    assert in_use(at).startswith("all-MiniLM-L6-v2")
