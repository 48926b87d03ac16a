"""bertviz's model view, offline: its page for a text, and the scripts it loads from a CDN, on loopback.

bertviz writes `<script src=".../require.min.js">` and `require.config` paths to d3 and jQuery on
cdnjs. Here those files come from the npm registry at run time (`npm pack` into a temporary folder,
nothing third-party is kept in the repository), a loopback HTTP server serves them beside the
generated pages, and `route_cdn` answers the page's CDN requests with a redirect to that server.
"""
from __future__ import annotations

import contextlib
import functools
import http.server
import json
import re
import shutil
import subprocess
import tarfile
import threading
import time
from pathlib import Path

CDN = "https://cdnjs.cloudflare.com/ajax/libs/"
# path under CDN as bertviz 1.4.1 asks for it: (npm package, file inside the package)
ASSETS = {
    "require.js/2.3.6/require.min.js": ("requirejs@2.3.6", "require.js"),
    "d3/5.7.0/d3.min.js": ("d3@5.7.0", "dist/d3.min.js"),
    # jQuery 2.0.0 was never published to npm; 2.1.0 is the closest release there
    "jquery/2.0.0/jquery.min.js": ("jquery@2.1.0", "dist/jquery.min.js"),
}


def fetch_assets(folder: Path, timeout: float = 120) -> None:
    """`npm pack` each package and copy the one file bertviz needs to folder/cdn/<path under CDN>."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed")
    packs = folder / "npm"
    packs.mkdir(parents=True, exist_ok=True)
    specs = sorted({spec for spec, _ in ASSETS.values()})
    out = subprocess.run([npm, "pack", "--json", "--pack-destination", str(packs), *specs],
                         capture_output=True, text=True, timeout=timeout, check=True).stdout
    tarballs = {f"{p['name']}@{p['version']}": packs / p["filename"] for p in json.loads(out)}
    for cdn_path, (spec, member) in ASSETS.items():
        with tarfile.open(tarballs[spec]) as tar:
            data = tar.extractfile(f"package/{member}").read()
        target = folder / "cdn" / cdn_path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def cdn_paths(html: str) -> set[str]:
    """The CDN files a model view page asks for (require.config paths get ".js" appended)."""
    found = re.findall(re.escape(CDN) + r"([\w./-]+?)(?:\.js)?['\"]", html)
    return {path + ".js" for path in found}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # no line per request on stderr
        pass


@contextlib.contextmanager
def serve(folder: Path):
    """A static HTTP server for `folder` on a free loopback port; yields its base URL."""
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def route_cdn(page, base_url: str, blocked: list[str]) -> None:
    """Redirect the page's CDN requests to base_url/cdn/...; refuse (and note) anything else off loopback."""
    def handle(route) -> None:
        url = route.request.url
        if url.startswith(CDN) and url[len(CDN):] in ASSETS:
            route.fulfill(status=302, headers={"Location": f"{base_url}/cdn/{url[len(CDN):]}"})
        else:
            blocked.append(url)
            route.abort()

    page.route(re.compile(r"^(?!http://127\.0\.0\.1[:/])"), handle)


def write_model_views(model_path: str, texts: dict[int, str], folder: str) -> dict[int, tuple[int, int, float]]:
    """For each text, bertviz's model view page as `model_view(..., html_action="return")` gives it.

    Attention comes from transformers' eager BertModel on the checkpoint at model_path, with
    output_attentions=True. Returns {key: (tokens, bytes of the page, seconds from text to page)};
    pages are written to folder/model_view_<key>.html. Meant to run in a child process, so that
    the gigabytes the largest page takes to build are given back when it ends.
    """
    import torch
    from bertviz import model_view
    from transformers import AutoTokenizer, BertModel
    from transformers.utils import logging

    logging.disable_progress_bar()
    torch.set_num_threads(2)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = BertModel.from_pretrained(model_path, attn_implementation="eager").eval()
    with torch.inference_mode():  # warm-up, so that the first text is not charged for it
        model(**tokenizer("warm up", return_tensors="pt"), output_attentions=True)
    sizes = {}
    for key, text in texts.items():
        start = time.perf_counter()
        enc = tokenizer(text, return_tensors="pt", truncation=True, max_length=model.config.max_position_embeddings)
        with torch.inference_mode():
            out = model(**enc, output_attentions=True)
        tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
        html = model_view(out.attentions, tokens, html_action="return").data
        data = html.encode()
        del html
        (Path(folder) / f"model_view_{key}.html").write_bytes(data)
        sizes[key] = (len(tokens), len(data), time.perf_counter() - start)
        del data, out
    return sizes
