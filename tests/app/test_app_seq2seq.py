"""An encoder-decoder on the page (AppTest, tiny BART, Marian and T5): what it writes is attention.generate's,
the Cross-attention view's maps are the model's, a target typed or linked is forced (and bounded), and every
other view reads the encoder's self-attention."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from families import make_seq2seq
from test_app import SENTENCE, decode, head_figure, no_errors, start
from test_app_families import every_view_draws

from attention import generate, load_model
from attention.runs.inputs import encode
from attention.writing.generate_seq2seq import generate_seq2seq
from ui.compute.runs import MAX_NEW_TOKENS
from ui.state.url_values import MAX_TARGET_CHARS
from viz._text import escape_all, position_labels, readable_all

FAMILIES = ["bart", "marian", "t5"]
TARGET = "Le chat est sur le tapis."


@pytest.fixture(scope="module", params=FAMILIES)
def checkpoint(request, tmp_path_factory):
    folder = make_seq2seq(tmp_path_factory.mktemp(request.param), request.param)
    model, tokenizer = load_model(str(folder))
    return folder, model, tokenizer


def figure(at, title: str) -> dict:
    """The plotly figure whose title starts with `title`."""
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        if ((spec["layout"].get("title") or {}).get("text") or "").startswith(title):
            return spec
    raise AssertionError(f"no figure titled {title!r}")


def rows_columns_z(spec: dict) -> tuple[list[str], list[str], np.ndarray]:
    trace = spec["data"][0]
    return trace["y"], trace["x"], decode(trace["z"]).reshape(len(trace["y"]), len(trace["x"]))


def labels(tokens) -> list[str]:
    return position_labels(escape_all(tokens))


def written(model, tokenizer):
    limit = model.decoder.config.max_position_embeddings
    return generate(model, tokenizer, SENTENCE, max_new_tokens=min(MAX_NEW_TOKENS, limit - 1))


def test_the_page_writes_as_generate_does_and_draws_its_cross_attention(checkpoint):
    folder, model, tokenizer = checkpoint
    at = start(model=str(folder), s=SENTENCE, view="cross", layer="1", head="1")
    no_errors(at)
    out = written(model, tokenizer)
    rows, columns, z = rows_columns_z(figure(at, "Cross-attention, layer 1, head 1"))
    assert rows == labels(out.tokens) and columns == labels(out.encoder_tokens)
    expected = out.cross_attentions[1][0, 1].numpy()  # (L_dec, L_enc)
    assert z.shape == expected.shape == (len(out.tokens), len(out.encoder_tokens))
    np.testing.assert_allclose(z, expected, atol=1e-6)
    said = " ".join(c.value for c in at.caption)
    assert "written greedily" in said


@pytest.mark.parametrize("target", ["", TARGET], ids=["written", "forced"])
def test_a_source_past_the_encoders_positions_is_read_within_them(checkpoint, target):
    """A source longer than the encoder's positions is written from (or read with a forced target) as every view
    reads it, its first tokens within the positions, beside the page's notice; not an error."""
    folder, model, tokenizer = checkpoint
    positions = model.config.max_position_embeddings
    source = "the cat sat " * positions  # more tokens than positions
    enc = encode(tokenizer, source, max_length=positions)
    assert len(enc.tokens) == positions < enc.total_tokens
    at = start(model=str(folder), s=source, view="cross", layer="1", head="1", **({"target": target} if target else {}))
    no_errors(at)
    assert any(f"reads at most {positions} positions" in w.value for w in at.warning)
    rows, columns, z = rows_columns_z(figure(at, "Cross-attention, layer 1, head 1"))
    assert columns == labels(enc.tokens)
    if not target:
        limit = model.decoder.config.max_position_embeddings
        out = generate_seq2seq(model, tokenizer, enc.input_ids, max_new_tokens=min(MAX_NEW_TOKENS, limit - 1))
        assert rows == labels(out.tokens)
        np.testing.assert_allclose(z, out.cross_attentions[1][0, 1].numpy(), atol=1e-6)


def test_every_view_draws_and_reads_the_encoder(checkpoint):
    folder, model, tokenizer = checkpoint
    at = start(model=str(folder), s=SENTENCE, layer="1", head="2")
    no_errors(at)
    assert any("encoder-decoder, its encoder's" in c.value for c in at.sidebar.caption)
    assert any("reads its encoder's self-attention" in c.value for c in at.caption)
    out = written(model, tokenizer)
    z = decode(head_figure(at)["data"][0]["z"]).reshape(len(out.encoder_tokens), -1)
    np.testing.assert_allclose(z, out.encoder_attentions[1][0, 2].numpy(), atol=1e-6)
    every_view_draws(at)


def forced(model, tokenizer, target: str):
    """The decoder's tokens and cross-attention maps with `target` given: its start token (generate's first),
    then the target as the tokenizer encodes a target."""
    start_id = int(written(model, tokenizer).ids[0, 0])
    ids = torch.tensor([[start_id, *tokenizer(text_target=target)["input_ids"]]])
    with torch.inference_mode():
        out = model(tokenizer(SENTENCE, return_tensors="pt")["input_ids"], decoder_input_ids=ids)
    return tokenizer.convert_ids_to_tokens(ids[0].tolist()), out.cross_attentions


def test_a_target_typed_in_the_box_is_forced_and_kept_in_the_link(checkpoint):
    folder, model, tokenizer = checkpoint
    at = start(model=str(folder), s=SENTENCE, view="cross", layer="0", head="0")
    at.text_input(key="target").input(TARGET)
    next(b for b in at.button if b.label == "Run").click()
    at.run()
    no_errors(at)
    tokens, cross = forced(model, tokenizer, TARGET)
    rows, _, z = rows_columns_z(figure(at, "Cross-attention, layer 0, head 0"))
    assert rows == labels(tokens)
    np.testing.assert_allclose(z, cross[0][0, 0].numpy(), atol=1e-6)
    assert any("given as the target" in c.value for c in at.caption)
    assert at.query_params["target"] == TARGET
    again = start(**dict(at.query_params))  # the link opens the same map
    assert rows_columns_z(figure(again, "Cross-attention, layer 0, head 0"))[0] == rows


def test_each_part_shows_its_own_map_and_every_head_of_it(tmp_path):
    folder = make_seq2seq(tmp_path / "bart", "bart")
    model, tokenizer = load_model(str(folder))
    out = written(model, tokenizer)
    T, S = len(out.tokens), len(out.encoder_tokens)
    for part, title, shape, maps in (
        ("decoder", "Decoder self-attention", (T, T), out.decoder_attentions),
        ("encoder", "Encoder self-attention", (S, S), out.encoder_attentions),
    ):
        at = start(model=str(folder), s=SENTENCE, view="cross", part=part, layer="1", head="1")
        no_errors(at)
        z = rows_columns_z(figure(at, f"{title}, layer 1, head 1"))[2]
        assert z.shape == shape
        np.testing.assert_allclose(z, maps[1][0, 1].numpy(), atol=1e-6)
        grid = figure(at, f"{title}: every layer and head")
        heads = decode(grid["data"][1]["customdata"]).reshape(-1, 2)  # one tile per head: [layer, head]
        assert sorted(map(tuple, heads.tolist())) == [(i, h) for i in range(len(maps)) for h in range(maps[0].shape[1])]


def test_a_head_past_the_decoders_is_shown_as_its_last_with_a_notice(tmp_path):
    folder = make_seq2seq(tmp_path / "bart", "bart")  # encoder 4 heads, decoder 2
    at = start(model=str(folder), s=SENTENCE, view="cross", layer="1", head="3")
    no_errors(at)
    figure(at, "Cross-attention, layer 1, head 1")
    assert any("Head 3 does not exist in this model's decoder (0–1); showing 1." in i.value for i in at.info)


def test_a_too_long_target_is_bounded_with_a_notice(tmp_path):
    folder = make_seq2seq(tmp_path / "bart", "bart")
    at = start(model=str(folder), s=SENTENCE, view="cross", target="x" * (MAX_TARGET_CHARS + 1))
    no_errors(at)
    assert any(f"longer than {MAX_TARGET_CHARS:,} characters" in i.value for i in at.info)
    assert any("written greedily" in c.value for c in at.caption)  # the default: the model writes
    at = start(model=str(folder), s=SENTENCE, view="cross", target="word " * 150)  # more tokens than positions
    no_errors(at)
    assert any("the decoder reads 64, so its first 63 are used" in i.value for i in at.info)
    assert len(rows_columns_z(figure(at, "Cross-attention"))[0]) == 64


def test_a_model_without_a_decoder_says_so_and_has_no_target_box():
    at = start(s=SENTENCE, view="cross")  # the bundled BERT
    no_errors(at)
    assert any("Cross-attention needs an encoder-decoder" in i.value for i in at.info)
    assert not [t for t in at.text_input if t.key == "target"]
    assert at.session_state.view == "Head" and "Cross-attention" not in at.segmented_control(key="view").options


def test_an_encoder_decoder_offers_cross_attention_and_not_next_token(tmp_path):
    folder = make_seq2seq(tmp_path / "bart", "bart")
    at = start(model=str(folder), s=SENTENCE, view="cross")
    no_errors(at)
    offered = at.segmented_control(key="view").options
    assert "Cross-attention" in offered and "Next token" not in offered and "DeBERTa terms" not in offered
    assert at.session_state.view == "Cross-attention"


def test_the_lines_join_the_decoders_tokens_to_the_encoders(tmp_path):
    folder = make_seq2seq(tmp_path / "bart", "bart")
    model, tokenizer = load_model(str(folder))
    out = written(model, tokenizer)
    at = start(model=str(folder), s=SENTENCE, view="cross", layer="1", head="1")
    lines = next(
        spec
        for spec in (json.loads(c.proto.spec) for c in at.get("plotly_chart"))
        if any(t.get("mode") == "markers+text" for t in spec["data"])
    )
    columns = [t["text"] for t in lines["data"] if t.get("mode") == "markers+text"]
    shown = [escape_all(readable_all(out.tokens)), escape_all(readable_all(out.encoder_tokens))]
    assert columns == shown  # queries left, keys right, the pieces as text


def test_the_lines_text_is_the_presentations_size_in_presentation_mode(tmp_path):
    folder = make_seq2seq(tmp_path / "bart", "bart")
    for present, size in (("0", 14), ("1", 22)):
        at = start(model=str(folder), s=SENTENCE, view="cross", present=present)
        no_errors(at)
        lines = next(
            spec
            for spec in (json.loads(c.proto.spec) for c in at.get("plotly_chart"))
            if any(t.get("mode") == "markers+text" for t in spec["data"])
        )
        assert lines["layout"]["font"]["size"] == size, present  # the tokens' text
        assert {a["font"]["size"] for a in lines["layout"]["annotations"]} == {size}  # the headings too


def test_the_layer_box_spans_the_layers_of_the_part_shown(tmp_path):
    folder = make_seq2seq(tmp_path / "bart", "bart")  # encoder 2 layers, decoder 3
    model, tokenizer = load_model(str(folder))
    out = written(model, tokenizer)
    assert (len(out.encoder_attentions), len(out.decoder_attentions)) == (2, 3)
    at = start(model=str(folder), s=SENTENCE, view="cross", layer="2", head="1")  # the decoder's last layer
    no_errors(at)
    assert at.selectbox(key="layer").options == ["0", "1", "2"] and at.session_state["layer"] == 2
    z = rows_columns_z(figure(at, "Cross-attention, layer 2, head 1"))[2]
    np.testing.assert_allclose(z, out.cross_attentions[2][0, 1].numpy(), atol=1e-6)
    at.segmented_control(key="cross_part").set_value("Encoder self-attention").run()  # 2 layers: clamped
    no_errors(at)
    assert at.selectbox(key="layer").options == ["0", "1"] and at.session_state["layer"] == 1
    figure(at, "Encoder self-attention, layer 1, head 1")
    at.segmented_control(key="cross_part").set_value("Decoder self-attention").run()
    at.selectbox(key="layer").set_value(2).run()
    no_errors(at)
    z = rows_columns_z(figure(at, "Decoder self-attention, layer 2, head 1"))[2]
    np.testing.assert_allclose(z, out.decoder_attentions[2][0, 1].numpy(), atol=1e-6)
    assert at.query_params["layer"] == "2" and at.query_params["part"] == "decoder"
    linked = start(model=str(folder), s=SENTENCE, view="cross", part="encoder", layer="2")
    no_errors(linked)
    assert linked.session_state["layer"] == 1
    assert any("Layer 2 does not exist in this model's encoder (0–1)" in i.value for i in linked.info)
    deeper = start(model=str(folder), s=SENTENCE, view="cross", part="decoder", layer="7")
    assert deeper.session_state["layer"] == 2
    assert any("Layer 7 does not exist in this model's decoder (0–2)" in i.value for i in deeper.info)


def test_the_second_sentence_box_is_hidden_for_an_encoder_decoder_and_its_text_kept(tmp_path):
    folder = make_seq2seq(tmp_path / "bart", "bart")
    model, tokenizer = load_model(str(folder))
    second = "It was late."
    at = start(s=SENTENCE, s2=second)  # the bundled encoder reads the pair

    def load(source: str) -> None:
        at.text_input(key="model_input").input(source)
        next(b for b in at.button if b.label == "Load model").click()
        at.run()
        no_errors(at)

    assert at.text_input(key="text_b").value == second
    load(str(folder))
    assert not [t for t in at.text_input if t.key == "text_b"]
    assert any("encoder-decoder reads one sentence" in i.value for i in at.info)
    assert head_figure(at)["data"][0]["y"] == labels(written(model, tokenizer).encoder_tokens)  # the first alone
    assert at.query_params["s2"] == second
    at.run()  # another run of the same page (a view, a head): said once already, not again
    no_errors(at)
    assert not any("encoder-decoder reads one sentence" in i.value for i in at.info)
    assert head_figure(at)["data"][0]["y"] == labels(written(model, tokenizer).encoder_tokens)
    load("")
    assert at.text_input(key="text_b").value == second and at.query_params["s2"] == second


def test_a_checkpoint_asking_for_beams_is_told_that_one_runs(tmp_path):
    at = start(model=str(make_seq2seq(tmp_path / "bart", "bart")), s=SENTENCE, view="cross")
    assert not any("beams" in c.value for c in at.caption)
    folder = make_seq2seq(tmp_path / "four", "bart")
    path = folder / "generation_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "num_beams": 4}))
    at = start(model=str(folder), s=SENTENCE, view="cross")
    no_errors(at)
    said = [c.value for c in at.caption if "beams" in c.value]
    assert said == [
        "This checkpoint's generation config asks for beam search with 4 beams; one beam (greedy) runs here."
    ]


def test_the_head_box_spans_the_heads_of_the_part_shown(tmp_path):
    folder = make_seq2seq(tmp_path / "bart", "bart", decoder_attention_heads=2)  # encoder 4 heads, decoder 2
    model, tokenizer = load_model(str(folder))
    out = written(model, tokenizer)
    at = start(model=str(folder), s=SENTENCE, view="cross", head="1")
    no_errors(at)
    assert at.selectbox(key="head").options == ["0", "1"]  # the cross-attention's: the decoder's heads
    z = rows_columns_z(figure(at, "Cross-attention, layer 0, head 1"))[2]
    np.testing.assert_allclose(z, out.cross_attentions[0][0, 1].numpy(), atol=1e-6)
    at.segmented_control(key="cross_part").set_value("Encoder self-attention").run()
    no_errors(at)
    assert at.selectbox(key="head").options == ["0", "1", "2", "3"]
    linked = start(model=str(folder), s=SENTENCE, view="cross", part="decoder", head="3")
    no_errors(linked)
    assert linked.session_state["head"] == 1
    assert any("Head 3 does not exist in this model's decoder (0–1)" in i.value for i in linked.info)
    presented = start(model=str(folder), s=SENTENCE, view="cross", present="1")
    no_errors(presented)
    assert presented.selectbox(key="head").options == ["Head 0", "Head 1"]
