"""The Next token view: at a chosen position, a causal model's most probable next tokens, from its LM head
over the whole sequence read at once (teacher-forced), the token that came next marked, and the same
candidates at another temperature. An encoder-only model has no next-token head: the view says so."""

from __future__ import annotations

import numpy as np
import streamlit as st

from viz._text import escape, numbered, readable, readable_all
from viz.next_token import entropy_bits, next_token_figure, softmax

from ..compute.generation import Continuation, lm_head, position_logits
from ..compute.models import get_model
from ..page.page import figure_slot, font_size, plain, present_size, show, show_text
from ..page.writing import writing_at
from ..state.actions import branch, clicked_data
from ..state.url_values import TEMPERATURES
from ..state.view_context import ViewContext

TOP = 10  # candidates shown
BARS_TEMPERATURE = 2.0  # the bars' comparison temperature beside a greedy text: flatter than the model's


def draw(ctx: ViewContext) -> None:
    run = ctx.run
    source = ctx.source
    head, why = lm_head(source)
    if head is None:
        config = get_model(source)[0].config
        # a causal decoder's only (the registry's kinds): here its LM head could not be read
        st.info(
            f"The model in use ({plain(config.model_type)}) has no next-token head: its LM head could not be "
            f"read ({plain(why or 'unknown')})."
        )
        return
    ids = tuple(run.encoded.input_ids[0].tolist())  # a continuation's as the model wrote them
    tokens = tokens_of(source, ids)
    position = chosen_position(tokens, ctx.continuation)
    writing_at(ctx, position)  # the text over the bars: the token that came next marked, as its bar is
    slot = figure_slot(ctx.present) or st.container()  # the figure first, its controls under it (1280 × 800)
    level = run.encoded.byte_level  # half a character shown as its bytes, as every figure and box shows it
    temperature = position_row(ids, tokens, position, ctx.continuation, level)
    logits = position_logits(source, ids, position)
    probs, tempered = softmax(logits), softmax(logits, temperature)
    order = np.argsort(-probs, kind="stable")[:TOP]
    candidates = tokens_of(source, order)
    following = ids[position + 1] if position + 1 < len(ids) else None
    chosen = next((k for k, i in enumerate(order) if i == following), None) if following is not None else None
    if following is not None and chosen is None:  # the token that came next is not among the best: shown last
        order = np.append(order, following)
        candidates.append(tokens_of(source, [following])[0])
        chosen = len(order) - 1
    explain(tokens, position, following, probs, ctx.continuation, level)
    title = f"After position {position} ({escape(readable(tokens[position], level).strip())}): the next token"
    fig = next_token_figure(
        candidates,
        probs[order],
        tempered[order],
        temperature,
        chosen=chosen,
        entropies=(entropy_bits(probs), entropy_bits(tempered)),
        title=title,
        ids=[int(i) for i in order],
        byte_level=level,
        font_size=font_size(ctx.present),
        **present_size_of_bars(ctx.present),
    )
    number = written_number(ctx.continuation, position, len(ids))
    if number is None:
        with slot:
            show(fig, f"next-token-{position}")
        return
    offer_picks(number, [int(i) for i in order], readable_all(candidates, level), chosen)
    with slot:  # a click on a bar picks its token in place of the one written
        show(fig, f"next-token-{position}", key="next_bars", on_select=lambda: pick_clicked(number))


def position_row(
    ids: tuple[int, ...], tokens: list[str], position: int, written: Continuation | None, level: bool
) -> float:
    """The position (a box, its pieces as the title shows them: `level`, half a character as its bytes, and Back /
    Next on ← / →) and the bars' comparison temperature; returns it."""
    left, back, ahead, right = st.columns([3.5, 1.3, 1.3, 3.5], vertical_alignment="bottom")
    left.selectbox(
        "Position",
        range(len(ids)),
        key="next_position",
        persist_state="session",
        format_func=lambda i: numbered(i, tokens[i], level),
    )
    for place, (step, key, shortcut) in zip(
        (back, ahead), ((-1, "next_prev_position", "Left"), (1, "next_next_position", "Right"))
    ):
        place.button(
            "Back" if step < 0 else "Next",
            key=key,
            on_click=step_position,
            args=(step, len(ids)),
            shortcut=shortcut,
            help=f"The {'previous' if step < 0 else 'next'} position ({shortcut} key)",
            disabled=not 0 <= position + step < len(ids),
            width="stretch",
        )
    bars_temperature(written)
    return right.slider("Temperature", *TEMPERATURES, step=0.05, key="next_temperature", persist_state="session")


def written_number(written: Continuation | None, position: int, n: int) -> int | None:
    """Which of the tokens the model wrote (0: its first) comes after `position`; None for the prompt's, or past
    the end."""
    if written is None or not written.prompt_len <= position + 1 < n:
        return None
    return position + 1 - written.prompt_len


def offer_picks(number: int, order: list[int], texts_of: list[str], chosen: int | None) -> None:
    """Another of the candidates (their ids, `order`, shown as `texts_of`) in place of the written token `number`
    (ui/state/actions.py's branch): the text is written again from there."""
    others = [token for k, token in enumerate(order) if k != chosen]
    texts = dict(zip(order, texts_of))
    st.selectbox(
        "Write another token here (or click its bar)",
        others,
        index=None,
        key="next_pick",
        placeholder="Pick a candidate: the text is rewritten from here",
        format_func=lambda token: texts[token],
        on_change=pick_chosen,
        args=(number,),
    )


def pick_chosen(number: int) -> None:
    token, st.session_state.next_pick = st.session_state.get("next_pick"), None
    if token is not None:
        branch(number, int(token))


def pick_clicked(number: int) -> None:
    """A bar clicked: its candidate (the id its customdata carries) in place of the written token `number`."""
    for point in st.session_state.next_bars.selection.get("points", []):
        data = clicked_data(point.get("customdata"))
        if len(data) >= 2 and data[1] is not None and int(data[1]) >= 0:
            branch(number, int(data[1]))
            return


def chosen_position(tokens: list[str], written: Continuation | None) -> int:
    """The position in session state, within the sequence: by default (or past its end, with a notice) the
    prompt's last token (`written`'s, where the text is a continuation), whose bars say what the model would
    write first; just after Write one token, the token before the one written, whose bars chose it."""
    default = (written.prompt_len if written else len(tokens)) - 1
    if st.session_state.pop("next_follow", False) and written is not None and len(tokens) > written.prompt_len:
        st.session_state.next_position = len(tokens) - 2
    position = st.session_state.get("next_position")
    if position is None or not 0 <= position < len(tokens):
        if position is not None:
            st.info(f"Position {position} is past the sequence (0–{len(tokens) - 1}); showing {default}.")
        st.session_state.next_position = position = default
    return position


def step_position(step: int, n: int) -> None:
    """← / →: the previous or next position, within the `n` of the sequence."""
    st.session_state.next_position = min(max(int(st.session_state.get("next_position") or 0) + step, 0), n - 1)


def bars_temperature(written: Continuation | None) -> None:
    """The bars' comparison temperature, until one is chosen (a link's, the slider moved): the temperature the
    text was sampled at (`written`'s), else BARS_TEMPERATURE; it follows the text's as that changes."""
    settings = written.settings if written is not None else None
    default = settings.temperature if settings is not None and settings.sample else BARS_TEMPERATURE
    chosen = st.session_state.get("next_temperature")
    if chosen is None or chosen == st.session_state.get("next_bars_default"):
        st.session_state.next_temperature = default
    st.session_state.next_bars_default = default


def tokens_of(source: str, ids) -> list[str]:
    tokenizer = get_model(source)[1]
    return tokenizer.convert_ids_to_tokens([int(i) for i in ids])


def explain(
    tokens: list[str], position: int, following: int | None, probs, written: Continuation | None, level: bool
) -> None:
    by_model = written is not None and position + 1 >= written.prompt_len
    number = position + 1 - written.prompt_len if written is not None else -1
    picked = written is not None and number in dict(written.settings.picks)
    if following is None:
        came = "This is the sequence's last position: nothing follows it yet, the top bar is what greedy search writes."
    else:
        rank = int((probs > probs[following]).sum()) + 1
        who = "picked in place of the model's" if picked else "the model wrote" if by_model else "the text has"
        token = plain(readable(tokens[position + 1], level))
        came = f"In red, the token {who} next ({token}): rank {rank}, p = {probs[following]:.3f}."
    show_text(
        f"The model reads the whole sequence once; at position {position} its LM head's logits, through a softmax, "
        f"give the probability of each token coming next (the {TOP} most probable shown). The temperature T divides "
        "the logits before the softmax: below 1 it sharpens the bars, above 1 it flattens them (the entropy rises). "
        f"{came} While writing, the checkpoint's generation settings and top-k/top-p also reshape the scores; "
        "these bars are the model's own.",
        "next-token-caption",
    )


def present_size_of_bars(present: bool) -> dict:
    """Presentation mode (`present`): the figure within the first screen's width and height."""
    size = present_size(present)
    return {"width": size["width"], "height": size["height"]} if size else {}
