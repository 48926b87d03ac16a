"""The report holds what the page shows (tables, the walk's text and step, coreference choices as words,
the page's link); Renormalise rows unticked while it does not apply; the sidebar's unused tensors folded;
the ablation view's pronoun → answer margin."""

from __future__ import annotations

import html
import re

import numpy as np
from conftest import ROOT
from streamlit.testing.v1 import AppTest

from attention import encode
from attention.analysis.ablation import ablate, margin_change
from attention.analysis.coref import CorefExample

SENTENCE = "The animal didn't cross the street because it was too tired."


def start(**params) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def report(at: AppTest) -> str:
    """The page the report button downloads."""
    return at.session_state["page_report"]()


def fact(page: str, name: str) -> str:
    found = re.search(rf"<dt>{re.escape(name)}</dt><dd>(.*?)</dd>", page)
    assert found, name
    return html.unescape(found.group(1))


def test_the_head_stats_report_holds_the_table_the_page_shows():
    at = start(view="stats")
    no_errors(at)
    shown = at.dataframe[0].value
    page = report(at)
    table = page[page.index("<figcaption>Each head on this sentence</figcaption>") :]
    table = table[: table.index("</table>")]
    assert re.findall(r"<th>(.*?)</th>", table) == list(shown.columns)
    rows = re.findall(r"<tr>(.*?)</tr>", table)[1:]
    assert len(rows) == len(shown) == 6 * 12
    first = [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", rows[0])]
    assert first[:3] == [str(shown.iloc[0]["layer"]), str(shown.iloc[0]["head"]), shown.iloc[0]["pattern"]]
    assert float(first[3]) == float(f"{shown.iloc[0]['entropy']:.4g}")
    patterns = next(m.value for m in at.markdown if m.value.startswith("Patterns: "))
    assert f'<p class="note">{patterns}</p>' in page


def test_the_walk_report_gives_the_step_as_the_page_does_and_its_text():
    at = start(view="walk", walk="6")
    no_errors(at)
    heading = next(m.value for m in at.markdown if m.value.startswith("**Step "))
    assert heading.startswith("**Step 7 of 11: Softmax**")
    page = report(at)
    assert fact(page, "Step of the walk") == "7 of 11: Softmax"
    assert '<p class="note">Each row becomes probabilities that sum to 1' in page


def test_the_coreference_report_names_the_words_not_their_indices():
    at = start(view="coref")
    no_errors(at)
    assert at.query_params["pronoun"] == "9" and at.query_params["candidates"] == "1,7"
    page = report(at)
    assert fact(page, "Pronoun") == "it" and fact(page, "Candidates") == "animal, street"
    assert fact(page, "Answer") == "animal"


def test_the_report_carries_the_pages_link():
    at = start(view="head", layer="2", head="5", hide="1")
    no_errors(at)
    link = fact(report(at), "Link")
    query = dict(re.findall(r"([a-z0-9]+)=([^&]*)", link.split("?", 1)[1]))
    assert query["view"] == "head" and query["layer"] == "2" and query["head"] == "5" and query["hide"] == "1"
    assert set(query) == set(at.query_params)  # the address this run wrote, not the one before


def test_renormalise_is_unticked_while_it_does_not_apply_and_keeps_the_choice():
    at = start(view="head")
    off = at.checkbox(key="renormalize_off")
    assert off.disabled and off.value is False  # hide is off: renormalising does not apply
    assert fact(report(at), "Renormalise rows").startswith("no")
    at.checkbox(key="hide_special").check().run()
    assert at.checkbox(key="renormalize").value is True and not at.checkbox(key="renormalize").disabled
    at.checkbox(key="renormalize").uncheck().run()
    at.checkbox(key="hide_special").uncheck().run()
    assert at.checkbox(key="renormalize_off").value is False
    assert at.query_params["renorm"] == "0"  # the choice is kept meanwhile
    at.checkbox(key="hide_special").check().run()
    assert at.checkbox(key="renormalize").value is False  # the person's choice, back
    at.checkbox(key="renormalize").check().run()
    at.checkbox(key="hide_special").uncheck().run()
    at.checkbox(key="hide_special").check().run()
    assert at.checkbox(key="renormalize").value is True
    no_errors(at)


def test_unused_tensors_are_a_short_line_saying_which_with_why_in_its_tooltip():
    """The bundled MiniLM saves its position ids and a pooler: the line names both kinds and says attention reads
    neither; the tooltip gives each kind's reason in words and the tensors' names."""
    at = start()
    [line] = [c for c in at.sidebar.caption if c.value.startswith("Unused tensors")]
    assert line.value == "Unused tensors: 2 (position ids, pooler), none read by attention"
    assert "made inside the layers, before any of these" in line.help
    assert "**position ids**: the numbers 0, 1, 2, …" in line.help and "embeddings\\.position\\_ids" in line.help
    assert "**pooler**: a layer a sentence classifier puts on" in line.help and "pooler\\.dense" in line.help


def test_unused_tensors_of_a_causal_checkpoint_are_buffers_and_heads():
    from ui.page.controls import unused_tensors

    line, why = unused_tensors(
        ("h.0.attn.bias", "h.0.attn.masked_bias", "lm_head.weight", "score.weight", "score.bias")
    )
    assert line == "Unused tensors: 4 (saved buffers, word-prediction head, task head), none read by attention"
    assert "h\\.0\\.attn\\.bias, h\\.0\\.attn\\.masked\\_bias" in why  # a buffer keeps its whole name
    assert "**word-prediction head**" in why and "**task head**" in why and why.endswith("score")


def test_ablation_gives_the_pronoun_to_answer_margin_before_and_after(minilm):
    model, tokenizer = minilm
    at = start(view="ablation", layer="5", head="11")
    no_errors(at)
    enc = encode(tokenizer, SENTENCE)
    mask = np.ones((6, 12), dtype=np.float32)
    mask[5, 11] = 0
    result = ablate(model, enc.input_ids, enc.attention_mask, enc.token_type_ids, head_mask=mask)
    change = margin_change(
        result, CorefExample(SENTENCE, "it", ("animal", "street"), "animal"), enc.tokens, enc.word_ids, enc.offsets
    )
    table = at.dataframe[-1].value
    layer, head = change.best
    assert list(table["measure"]) == [
        f"best head before ablation (L{layer} H{head})",
        "mean over heads",
        "heads above 0",
    ]
    assert list(table["before"]) == [
        f"{change.best_before:+.3f}",
        f"{change.mean_before:+.3f}",
        str(change.preferring_before),
    ]
    assert list(table["after"]) == [
        f"{change.best_after:+.3f}",
        f"{change.mean_after:+.3f}",
        str(change.preferring_after),
    ]
    assert "<figcaption>The pronoun → answer margin</figcaption>" in report(at)
    at.text_area(key="text").input("The cat sat on the mat.")
    next(b for b in at.button if b.label == "Run").click()
    at.run()
    assert not any("measure" in d.value.columns for d in at.dataframe)  # no known antecedent: no margin


def table_rows(page: str, caption: str) -> list[list[str]]:
    """The cells of the report's table under `caption`, row by row (the header row first)."""
    table = page[page.index(f"<figcaption>{caption}</figcaption>") :]
    table = table[: table.index("</table>")]
    return [
        [html.unescape(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", table)
    ]


def test_the_coreference_reports_hold_the_ranked_heads_and_the_suites_mcnemar_table():
    at = start(view="coref")
    no_errors(at)
    shown = at.dataframe[0].value
    rows = table_rows(report(at), "Heads ranked")
    assert rows[0] == list(shown.columns)
    assert [r[0] for r in rows[1:]] == list(shown["head"])
    at = start(view="coref", coref="suite")
    no_errors(at)
    page = report(at)
    rows = table_rows(page, "The best heads against the best: accuracy, exact 95% interval, McNemar")
    header = rows[0]
    assert header[:3] == ["head", "accuracy", "95% interval"] and header[-1].startswith("p vs best (Holm over ")
    shown = next(d.value for d in at.dataframe if "95% interval" in d.value.columns)
    assert [r[2] for r in rows[1:]] == list(shown["95% interval"])
    assert "examples from" in page and "Best head: layer" in page


def facts(page: str) -> dict[str, str]:
    return {name: html.unescape(value) for name, value in re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", page)}


def captions(page: str) -> list[str]:
    return [html.unescape(c) for c in re.findall(r"<figcaption>(.*?)</figcaption>", page)]


def test_an_encoders_report_gives_no_writing_settings_and_nothing_left_empty():
    """The bundled MiniLM cannot write: no Continue, New tokens, Sampled, Temperature, Top-k, Top-p or Seed; the
    lines view's heads, none chosen, and a short input's (unfolded) strip are not said."""
    at = start(view="head")
    no_errors(at)
    said = facts(report(at))
    assert {"View", "Layer", "Head", "Draw as", "Hide [CLS]/[SEP]"} <= set(said)
    for name in ("Continued", "New tokens", "Sampled", "Temperature", "Top-k (0: off)", "Top-p", "Seed"):
        assert name not in said
    assert "Heads drawn as lines" not in said and "Token strip of a long input" not in said


def test_a_coreference_report_gives_only_its_modes_choices_and_names_its_parts_in_words():
    at = start(view="coref", coref="suite")
    no_errors(at)
    page = report(at)
    said = facts(page)
    assert said["Coreference mode"] == "Suite" and said["Coreference examples"] == "Built-in"
    for name in ("Twin sentences", "Twin sentences from", "Second model", "Group by", "Pronoun", "Rank heads by"):
        assert name not in said  # another mode's, or not set
    shown = captions(page)
    assert "Coreference: heads ranked by accuracy" in shown
    assert not [c for c in shown if re.fullmatch(r"[a-z0-9]+(-[a-z0-9_]+)+", c)]  # no internal name
    at = start(view="stats")
    no_errors(at)
    shown = captions(report(at))
    assert "Heads compared across sentences" in shown and "head-embedding" not in shown and "Tokens" in shown


def test_the_minimal_pairs_report_names_the_twins_not_their_index():
    at = start(view="coref", coref="pairs")
    no_errors(at)
    said = facts(report(at))
    assert said["Twin sentences from"] == "The suite's twins"
    twins = at.selectbox(key="coref_pair")
    assert said["Twin sentences"] == twins.format_func(twins.value) and " / " in said["Twin sentences"]
    assert "Pronoun" not in said and "Group by" not in said
