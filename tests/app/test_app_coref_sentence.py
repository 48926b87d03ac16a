"""The Coreference view on the typed sentence through AppTest: one criterion for the best head (the first
visit, the walk's last step and the view's table), no winner on a tie, the sentence's own twin in Minimal
pairs, and the suite's downloads and tests against the baselines."""

from __future__ import annotations

import csv
import io
from types import SimpleNamespace

import numpy as np
from conftest import make_tiny
from test_app import SENTENCE, head_figure, no_errors, start

from attention.analysis.coref import CorefExample, flipping_heads, score_example
from attention.analysis.coref.heads import MIN_SEPARATION, column_means, head_values, ranked
from attention.runs.run import run_sentence

WIDE = "The animal didn't cross the street because it was too wide."


def best(run, text: str, answer: str, criterion: str) -> tuple[int, int]:
    enc = run.encoded
    score = score_example(
        CorefExample(text, "it", ("animal", "street"), answer), run.attentions, enc.tokens, enc.word_ids, enc.offsets
    )
    return ranked(
        head_values(score.attention, run.attentions, score.located, score.example.answer_index, criterion), 1
    )[0]


def table(at, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_the_first_visit_the_walk_and_the_view_name_one_best_head(minilm):
    run = run_sentence(*minilm, SENTENCE)
    layer, head = best(run, SENTENCE, "animal", "specificity")
    assert best(run, SENTENCE, "animal", "margin") != (layer, head)  # the two criteria disagree here
    at = start()
    no_errors(at)
    assert head_figure(at)["layout"]["title"]["text"] == f"Layer {layer}, head {head}"
    assert any(f"Opened layer {layer}, head {head}, the best of 72 heads by specificity" in i.value for i in at.info)
    at.segmented_control(key="view").set_value("Coreference").run()
    no_errors(at)
    rows = table(at, "specificity")
    assert rows["head"].iloc[0] == f"L{layer} H{head}" and list(rows.columns[1:3]) == ["specificity", "margin"]
    assert any("Ranked by specificity: the margin after subtracting" in c.value for c in at.caption)
    at.segmented_control(key="coref_rank").set_value("margin").run()
    no_errors(at)
    m_layer, m_head = best(run, SENTENCE, "animal", "margin")
    rows = table(at, "specificity")
    assert rows["head"].iloc[0] == f"L{m_layer} H{m_head}" and list(rows.columns[1:3]) == ["margin", "specificity"]
    assert list(rows["margin"]) == sorted(rows["margin"], reverse=True)
    assert str(at.query_params["rank"]).strip("[]'") == "margin"
    walk = start(view="walk", walk="10", rank="margin")
    no_errors(walk)
    assert any(
        f"Opened layer {m_layer}, head {m_head}, the best of 72 heads by margin" in c.value for c in walk.caption
    )


def test_a_model_whose_heads_do_not_separate_the_candidates_declares_no_winner(tmp_path):
    flat = make_tiny(tmp_path / "flat", initializer_range=1e-4)  # every map nearly uniform
    at = start(model=str(flat))
    no_errors(at)
    notice = next(i.value for i in at.info if "separates" in i.value)
    assert notice.startswith("No head separates “animal” from the other candidate for “it”")
    assert "Opened layer 0, head 0" in notice and "the other candidate gets" not in notice
    assert head_figure(at)["layout"]["title"]["text"] == "Layer 0, head 0"


def test_strongest_head_on_uniform_maps_opens_the_default_head(minilm):
    from ui.compute.computations import strongest_head

    run = run_sentence(*minilm, SENTENCE)
    L = len(run.tokens)
    flat = SimpleNamespace(encoded=run.encoded, attentions=np.full_like(run.attentions, 1 / L))
    layer, head, why = strongest_head(flat, SENTENCE, "margin")
    assert (layer, head) == (0, 0) and "No head separates" in why and "+0.00" in why


def test_the_sentence_and_its_twin_in_minimal_pairs(minilm):
    at = start(view="coref", coref="pairs")
    at.segmented_control(key="coref_twins").set_value("This sentence and a twin").run()
    no_errors(at)
    assert at.text_input(key="coref_twin").value == WIDE  # the example's twin, pre-filled
    assert at.selectbox(key="coref_twin_answer").value == "street"
    a, b = (
        score_example(
            CorefExample(t, "it", ("animal", "street"), ans),
            r.attentions,
            r.tokens,
            r.encoded.word_ids,
            r.encoded.offsets,
        )
        for t, ans, r in (
            (SENTENCE, "animal", run_sentence(*minilm, SENTENCE)),
            (WIDE, "street", run_sentence(*minilm, WIDE)),
        )
    )
    flips = flipping_heads(a, b)
    assert flips.any()
    assert [t.value for t in at.text][:2] == [SENTENCE, WIDE]
    note = next(c.value for c in at.caption if "between the twins" in c.value)
    assert note.startswith(f"{int(flips.sum())} heads change their preferred candidate")
    written = {k: str(v).strip("[]'") for k, v in at.query_params.items()}
    assert written["twins"] == "sentence" and written["twin"] == WIDE


def test_a_typed_sentence_gets_candidates_suggested_and_a_twin_typed_in():
    at = start(view="coref", coref="pairs", twins="sentence", s="Mary thanked Anna because she had helped.")
    no_errors(at)
    chosen = at.multiselect(key="coref_candidates")
    assert [chosen.format_func(i) for i in chosen.value] == ["Mary", "thanked", "Anna"]
    assert any("Type the twin sentence" in i.value for i in at.info)
    at.multiselect(key="coref_candidates").set_value([0, 2]).run()
    at.text_input(key="coref_twin").input("Mary thanked Anna because she was grateful.").run()
    no_errors(at)
    assert at.selectbox(key="coref_twin_answer").value == "Anna"  # the other candidate
    assert any("between the twins" in c.value for c in at.caption)
    at.text_input(key="coref_twin").input("Someone else spoke.").run()
    assert not at.exception and any("The twin cannot be scored" in i.value for i in at.info)


def test_no_flip_is_worded_on_its_own():
    from ui.views.coref import flip_note

    assert flip_note(0, 0).startswith("No head changes its preferred candidate")
    assert "0 of them" not in flip_note(3, 0) and "none of them is right on both" in flip_note(3, 0)
    assert flip_note(1, 1).startswith("1 head changes its preferred candidate")
    assert "2 of them are right on both" in flip_note(5, 2)


def test_the_suite_downloads_name_model_and_suite_and_the_best_head_meets_the_baselines(minilm):
    from conftest import ROOT

    from attention.analysis.coref import load_examples, score_heads
    from attention.analysis.coref.metrics import best_against_baselines
    from attention.analysis.coref.result_csv import examples_csv_text, file_name

    at = start(view="coref", coref="suite")
    no_errors(at)
    result = score_heads(*minilm, load_examples(ROOT / "data" / "coref_examples.jsonl"))
    tests = best_against_baselines(result)
    note = next(c.value for c in at.caption if "against the nearest candidate" in c.value).replace("\\", "")
    assert all(f"p = {t.p:.3g}" in note for t in tests.values())
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Download every head's accuracy (CSV)" in labels
    assert "Download each example × head, right or wrong (CSV)" in labels
    rows = list(csv.DictReader(io.StringIO(examples_csv_text(result, "MiniLM", "the built-in suite"))))
    assert len(rows) == result.n
    layer, head, accuracy = result.ranked(1)[0]
    assert np.mean([int(r[f"L{layer}H{head}"]) for r in rows]) == accuracy
    assert np.mean([int(r["nearest_right"]) for r in rows]) == result.baselines["nearest"]
    assert rows[0]["suite"] == "the built-in suite" and rows[0]["text"] == result.details[0].example.text
    assert (
        file_name("examples", "all-MiniLM-L6-v2 (bundled)", "GAP development")
        == "coreference-examples_all-MiniLM-L6-v2-bundled_GAP-development.csv"
    )


def crafted(run, decoy: tuple[int, int], linker: tuple[int, int]) -> SimpleNamespace:
    """Uniform maps but two heads: `decoy`, whose pronoun row gives neither candidate anything while every other
    row gives "street" half its attention (a large specificity from the other candidate's popularity alone), and
    `linker`, whose pronoun row gives "animal" 0.3 more than the rest."""
    tokens, L = run.tokens, len(run.tokens)
    it, animal, street = (tokens.index(w) for w in ("it", "animal", "street"))
    maps = np.full_like(run.attentions, 1 / L)
    rows = np.full((L, L), 0.5 / (L - 1))
    rows[:, street] = 0.5
    rows[it] = 1 / (L - 2)
    rows[it, [animal, street]] = 0
    maps[decoy] = rows
    maps[linker][it] = 0.7 / L
    maps[linker][it, animal] += 0.3
    return SimpleNamespace(encoded=run.encoded, attentions=maps)


def test_strongest_head_crowns_no_head_whose_pronoun_gives_the_answer_nothing(minilm):
    from ui.compute.computations import coref_values, strongest_head

    run = run_sentence(*minilm, SENTENCE)
    maps = crafted(run, decoy=(2, 3), linker=(1, 1))
    score, values = coref_values(maps, CorefExample(SENTENCE, "it", ("animal", "street"), "animal"), "specificity")
    assert ranked(values, 1)[0] == (2, 3)  # specificity alone puts the decoy first
    assert score.attention[2, 3, 0] == 0 and values[2, 3] > values[1, 1] > MIN_SEPARATION
    layer, head, why = strongest_head(maps, SENTENCE, "specificity")
    assert (layer, head) == (1, 1), why
    (to_animal, to_street), (mean_animal, mean_street) = (
        score.attention[1, 1],
        column_means(maps.attentions, score.located)[1, 1],
    )
    said = (  # the other candidate's average, which specificity subtracted, named beside the answer's
        f"({values[1, 1]:+.2f}: “it” → “animal” {to_animal:.2f} against {mean_animal:.2f} from the average token, "
        f"→ “street” {to_street:.2f} against {mean_street:.2f})"
    )
    assert said in why, why


def test_the_first_visit_opens_a_head_on_the_encoders_views_only(tmp_path):
    """Cross-attention's layer and head are the decoder's: no encoder head is opened or announced there."""
    from families import make_seq2seq

    folder = str(make_seq2seq(tmp_path / "bart", "bart"))
    announced = ("Opened layer", "No head separates")
    head_view = start(model=folder)
    no_errors(head_view)
    assert any(i.value.startswith(announced) for i in head_view.info)
    cross = start(model=folder, view="cross")
    no_errors(cross)
    assert not any(i.value.startswith(announced) for i in cross.info), [i.value for i in cross.info]
    assert (cross.session_state.layer, cross.session_state.head) == (0, 0)


def test_the_sentences_grid_is_coloured_by_the_criterion_the_table_ranks_by(minilm):
    """Its darkest cell is the table's first head, the criterion named in its title, under either criterion."""
    import json

    from test_app import decode

    run = run_sentence(*minilm, SENTENCE)
    example = CorefExample(SENTENCE, "it", ("animal", "street"), "animal")
    score = score_example(example, run.attentions, run.tokens, run.encoded.word_ids, run.encoded.offsets)
    at = start(view="coref")
    for criterion in ("specificity", "margin"):
        if criterion != "specificity":
            at.segmented_control(key="coref_rank").set_value(criterion).run()
        no_errors(at)
        [grid] = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if "coref_grid" in c.proto.id]
        assert grid["layout"]["title"]["text"] == f"{criterion} of it → animal"
        expected = head_values(score.attention, run.attentions, score.located, 0, criterion)
        z = decode(grid["data"][0]["z"]).reshape(expected.shape)
        np.testing.assert_allclose(z, expected, atol=1e-6)
        layer, head = np.unravel_index(np.argmax(z), z.shape)
        assert table(at, "specificity")["head"].iloc[0] == f"L{layer} H{head}"


def test_a_causal_model_says_its_heads_see_no_later_candidate(tmp_path):
    """The note reads what the model is from the view's context: said for a decoder, not for the encoder."""
    from families import make_family

    note = "This model is causal"
    at = start(view="coref")
    no_errors(at)
    assert not any(c.value.startswith(note) for c in at.caption)
    at = start(view="coref", model=str(make_family(tmp_path, "gpt2")))
    no_errors(at)
    assert any(c.value.startswith(note) for c in at.caption)
