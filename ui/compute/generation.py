"""A causal model's continuation of the sentence (Continue): written by attention.generate with the settings
in the link (ui/state/state.py: n, sample, temp, topk, topp, seed), kept in a bounded store keyed by all of them,
so that a link opened twice writes the same text. Every view then runs on the prompt and its continuation
as the model wrote it: a Written (ui/state/written.py), whose runs read the ids written, not the decoded text
read again by the tokenizer. The next-token view reads the model's LM head over the whole sequence
(`position_logits`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

from attention import ModelLoadError
from attention.analysis.lens import Lens, logit_lens
from attention.core.request import MapRequest
from attention.writing.generate import generate
from attention.writing.generate import lm_head as kept_lm_head
from attention.writing.search import LMHead

from ..state.view_context import RunKey
from ..state.written import Written, written_encoding
from .models import get_model, get_seq2seq
from .stores import MB, kept, store

SECOND_LEFT_OUT = "An encoder-decoder reads one sentence: the second, kept for an encoder, is left out."


@dataclass(frozen=True)
class Settings:
    n: int
    sample: bool
    temperature: float
    top_k: int | None
    top_p: float | None
    seed: int | None  # only sampling draws from it
    picks: tuple[tuple[int, int], ...] = ()  # (new token number, id): tokens picked in place of the model's

    @classmethod
    def chosen(cls) -> Settings:
        """The page's settings (session state, as the link gave them or the widgets set them)."""
        s = st.session_state
        n = int(s.get("gen_n", 20))
        picks = tuple((int(k), int(t)) for k, t in s.get("gen_picks") or () if k < n)
        if not s.get("gen_sample", False):  # greedy: the most probable token, whatever reshapes the scores
            return cls(n, False, 1.0, None, None, None, picks)
        top_p = float(s.get("gen_top_p", 1.0))
        return cls(
            n=n,
            sample=True,
            temperature=float(s.get("gen_temperature", 1.0)),
            top_k=int(s.get("gen_top_k", 0)) or None,
            top_p=None if top_p >= 1 else top_p,
            seed=int(s.get("gen_seed", 0)),
            picks=picks,
        )

    def describe(self) -> str:
        picked = f", {len(self.picks)} picked in its place" if self.picks else ""
        if not self.sample:
            return f"{self.n} tokens, greedy{picked}"
        cut = (f", top-k {self.top_k}" if self.top_k else "") + (f", top-p {self.top_p:g}" if self.top_p else "")
        return f"{self.n} tokens, sampled at temperature {self.temperature:g}{cut}, seed {self.seed}{picked}"


@dataclass(frozen=True)
class Continuation:
    prompt: str
    text: Written  # the prompt and the continuation as one text, with the ids written: what every view runs on
    prompt_len: int  # how many of `ids` are the prompt's
    ended: bool  # an end-of-sequence token came before n tokens
    settings: Settings  # how it was written

    @property
    def ids(self) -> tuple[int, ...]:
        """The prompt's ids, then the new ones, as written."""
        return self.text.ids


def continuation(source: str, prompt: str, settings: Settings) -> Continuation:
    """`prompt` continued by the model of `source` (a causal decoder), computed once per source, prompt and
    settings in a compute slot of the shared stores. ValueError: the prompt leaves no room for the tokens."""

    def compute() -> Continuation:
        model, tokenizer = get_model(source)
        written = generate(
            model,
            tokenizer,
            prompt,
            max_new_tokens=settings.n,
            do_sample=settings.sample,
            temperature=settings.temperature,
            top_k=settings.top_k,
            top_p=settings.top_p,
            seed=settings.seed,
            keep_maps=False,  # the views read the written ids' maps through ui/compute/runs.py, within its bound
            forced=dict(settings.picks),
        )
        ids = written.ids[0].tolist()
        n_new = written.new_ids.size(1)
        before = tokenizer.decode(ids[: len(ids) - n_new], clean_up_tokenization_spaces=False)
        whole = tokenizer.decode(ids, clean_up_tokenization_spaces=False)
        new_text = whole[len(before) :] if whole.startswith(before) else tokenizer.decode(ids[len(ids) - n_new :])
        text, prompt_len = prompt + new_text, len(ids) - n_new
        encoded = written_encoding(tokenizer, prompt, text, ids, prompt_len, model.config.max_position_embeddings)
        return Continuation(prompt, Written.of(text, encoded), prompt_len, n_new < settings.n, settings)

    return store("continuations", 64, 4 * MB).get_or_compute((source, prompt, settings), compute)


@kept(max_entries=2)
def lm_head(source: str) -> tuple[LMHead | None, str | None]:
    """The checkpoint's LM head (read strictly from it, once per model: the one generate uses), or None and why
    not."""
    model, _ = get_model(source)
    if not model.config.attention.causal:
        return None, "not a causal decoder"
    try:
        return kept_lm_head(model), None
    except ModelLoadError as err:
        return None, str(err)


def final_hidden(source: str, ids: tuple[int, ...]) -> np.ndarray:
    """The last layer's hidden states (T, E) of `ids`, after the final norm: one teacher-forced forward over
    the whole sequence, kept (at most a few MB) so that moving along the positions costs a matrix product.
    No map is made (torch's fused attention in every layer) and no other layer's states are kept."""

    def compute() -> np.ndarray:
        model, _ = get_model(source)
        device = model.embeddings.word_embeddings.weight.device
        with torch.inference_mode():
            out = model(torch.tensor([ids], device=device), request=MapRequest((), keep_hidden=False))
        return out.last_hidden_state[0].float().cpu().numpy()

    return store("final-hidden", 16, 32 * MB).get_or_compute((source, ids), compute)


LENS_MAX_TOKENS = 256  # the lens runs the LM head at every layer and position: SmolLM2 at 256 tokens, 30 · 256
# rows through a 49,152 × 576 head, about 0.4 TFLOP (10-20 s on a 2-core machine); one layer's logits (L, V) at a time


def lens_of(source: str, ids: tuple[int, ...]) -> Lens:
    """The logit lens of `ids` (attention/analysis/lens.py): every layer's top 5 next tokens at every position,
    kept. The caller bounds len(ids) by LENS_MAX_TOKENS first."""

    def compute() -> Lens:
        model, _ = get_model(source)
        device = model.embeddings.word_embeddings.weight.device
        return logit_lens(model, torch.tensor([ids], device=device), top=5)

    return store("lenses", 16, 8 * MB).get_or_compute((source, ids), compute)


def position_logits(source: str, ids: tuple[int, ...], position: int) -> np.ndarray:
    """The model's next-token logits (V,) at `position` of `ids`, float32, from its LM head (None raises)."""
    head, why = lm_head(source)
    if head is None:
        raise ModelLoadError(why or "no LM head")
    hidden = final_hidden(source, ids)[position]
    weight = head.weight
    with torch.inference_mode():
        logits = head(torch.from_numpy(hidden).to(device=weight.device, dtype=weight.dtype))
    return logits.cpu().numpy()


def run_key(source: str, text: str, text_b: str) -> tuple[RunKey, Continuation | None]:
    """The input every view runs on (ui/state/view_context.py's RunKey), and the continuation it is, if any: after
    Continue with a causal model, the prompt and the model's continuation as written; for an encoder-decoder,
    the first sentence alone (the second box is an encoder's pair, kept for when one is loaded again); else the
    sentence(s) as typed. What stopped a continuation, or left the second sentence out, goes to the page's notices.
    The continuation is kept in session state (`continuation`) as the page's record of what it was drawn on."""
    written = continued(source, text, text_b)
    st.session_state.pop("continuation", None)
    if written is not None:
        st.session_state.continuation = written
        return RunKey(source, written.text, ""), written
    if text_b and get_seq2seq(source):
        said = (source, text_b)
        if st.session_state.get("second_left_out") != said:  # once for this model and second sentence, not every run
            st.session_state.second_left_out = said
            st.session_state.setdefault("url_notices", []).append(SECOND_LEFT_OUT)
        text_b = ""
    return RunKey(source, text, text_b), None


def continued(source: str, text: str, text_b: str) -> Continuation | None:
    """After Continue with a causal model, `text` and the model's continuation; None where there is none
    (what stopped one is said in the page's notices)."""
    notices = st.session_state.setdefault("url_notices", [])
    if not st.session_state.get("gen_on"):
        return None
    if not get_model(source)[0].config.attention.causal:
        notices.append("Continue writes with a causal decoder (GPT-2, Llama, …); this model reads text only.")
        return None
    if text_b:
        notices.append("Continue writes after one sentence: empty the second box to continue the first.")
        return None
    try:
        with st.spinner("Writing the continuation…"):
            return continuation(source, text, Settings.chosen())
    except ValueError as err:
        notices.append(f"No continuation: {err}.")
        return None
