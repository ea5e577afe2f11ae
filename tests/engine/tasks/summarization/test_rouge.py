"""ROUGE-1/2/L F1 against their definitions (Lin 2004) worked by hand, the word-cached tokenizer against
rouge-score's own, the measures of paired bootstrap against the corpus score, and the lead-N baseline."""

from __future__ import annotations

import numpy as np
import pytest
from rouge_score import tokenizers

from tbuild.engine.significance import paired_bootstrap
from tbuild.engine.tasks.summarization.lead import choose_lead, lead
from tbuild.engine.tasks.summarization.rouge import Rouge, WordCachedTokenizer, rouge_measures, sentence_f1


def f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


def test_rouge_f1_is_the_definition() -> None:
    """ref "the cat sat on the mat", output "the cat on mat": 4 of the output's 4 unigrams are in the reference's
    6 (clipped counts), 1 of its 3 bigrams in the reference's 5, and their longest common subsequence is 4 long."""
    got = sentence_f1(["the cat on mat"], ["the cat sat on the mat"])[0]
    assert got == pytest.approx([f1(4 / 4, 4 / 6), f1(1 / 3, 1 / 5), f1(4 / 4, 4 / 6)])


def test_rouge_lowercases_and_stems_words_past_three_letters() -> None:
    """"Cats RUNNING!" is "cat run", as is the end of "the cat runs": 2 of 2 unigrams (of 3), 1 of 1 bigram (of 2)."""
    assert sentence_f1(["Cats RUNNING!"], ["the cat runs"])[0] == pytest.approx([f1(2 / 2, 2 / 3), f1(1 / 1, 1 / 2),
                                                                                  f1(2 / 2, 2 / 3)])


def test_a_corpus_score_is_the_mean_of_the_outputs_f1() -> None:
    outputs, refs = ["a b c", "x y", ""], ["a b d", "x y", "q"]
    rows = sentence_f1(outputs, refs)
    assert rows.shape == (3, 3) and rows[2].tolist() == [0.0, 0.0, 0.0] and rows[1].tolist() == [1.0, 1.0, 1.0]
    scored = Rouge.of(outputs, refs)
    assert [scored.rouge1, scored.rouge2, scored.rouge_l] == pytest.approx(100 * rows.mean(axis=0))


@pytest.mark.parametrize("text", ["The U.S.-led talks, in São Paulo, ended.", "  two  spaces\tand a tab ",
                                  "running runners ran 3,000 km", ""])
def test_the_word_cached_tokenizer_gives_rouge_scores_own_tokens(text: str) -> None:
    assert WordCachedTokenizer().tokenize(text) == tokenizers.DefaultTokenizer(use_stemmer=True).tokenize(text)


def test_the_measures_score_the_corpus_as_rouge_does_and_compare_by_bootstrap() -> None:
    refs = ["the cat sat on the mat", "a dog barked at night", "rain fell all day long"]
    ours, theirs = ["the cat on mat", "a dog barked", "rain all day"], ["mat", "night", "day"]
    measures = rouge_measures(refs)
    assert [m.key for m in measures] == ["rouge_l", "rouge1", "rouge2"]  # the headline first
    scored = Rouge.of(ours, refs)
    for m in measures:
        stats = m.statistics(ours)
        assert stats.shape == (3, 2) and m.score(stats.sum(0).tolist()) == pytest.approx(getattr(scored, m.key))
    found = paired_bootstrap(measures[0], [measures[0].statistics(ours)], [measures[0].statistics(theirs)], 200)
    assert found.system == pytest.approx(scored.rouge_l) and found.difference > 0


def test_lead_n_takes_the_first_words_and_n_is_chosen_on_rouge_l() -> None:
    assert lead("one two  three four", 2) == "one two" and lead("one", 5) == "one"
    sources = ["w1 w2 w3 w4 w5 w6", "v1 v2 v3 v4 v5", "u1 u2 u3 u4 u5 u6 u7"]
    refs = [" ".join(s.split()[:3]) for s in sources]
    chosen = choose_lead(sources, refs)
    assert chosen.n == 3 and chosen.valid.rouge_l == pytest.approx(100.0)
    assert chosen.summaries(sources) == refs
    assert choose_lead(["a b c d"], ["a b c d"], longest=2).n == 2  # no longer than asked
    assert np.isclose(choose_lead(["x y"], ["z"]).valid.rouge_l, 0.0) and choose_lead(["x y"], ["z"]).n == 1
