"""Well-formed decoding of lexicalized trees (``linearization: words``): the decoder copies the source's
subword pieces. With a sentencepiece model trained on the NLTK sample (a small vocabulary, so that many
words are several pieces): every target's words are exactly its source's pieces; forcing each of the
3,914 gold sequences through ``WellFormed`` (both orders) meets no ban, lets no other leaf than the next
source piece through, allows EOS only after a whole tree, and the forced outputs, regrouped into words and
read back, score F1 100. Hand-made pieces: any path through the allowed tokens is a tree over exactly
the source's pieces, none split by a bracket, within the length limit."""

from __future__ import annotations

import pytest
import torch

from tbuild.builder import load_spec
from tbuild.builder.spec import TokenizerSpec
from tbuild.components.specs.special import BOS, EOS, PAD, UNK
from tbuild.engine.data.linearize import TreeForm, linearize, repair
from tbuild.engine.data.tokenizer import Tokenizer, whole_target_tokens
from tbuild.engine.data.trees import Tree
from tbuild.engine.tasks.parsing.constrained import TreeVocab, WellFormed, tree_rule
from tbuild.engine.tasks.parsing.evalb import collins, evalb
from tbuild.engine.tasks.parsing.evaluation import to_trees
from tbuild.engine.tasks.parsing.lexical import flat_pieces, leaf_pieces, output_text

SPEC = load_spec({"data": {"dataset": {"kind": "treebank", "linearization": "words"}}}).spec


@pytest.fixture(scope="module")
def sample(treebank_sample: list[Tree]) -> list[Tree]:
    return treebank_sample


@pytest.fixture(scope="module")
def tok(sample: list[Tree], tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """A shared model as ``prepare_tokenizer`` trains one for a words run: sources and targets, the
    brackets whole."""
    sources = [" ".join(t.words()) for t in sample]
    targets = [linearize(t, "words") for t in sample]
    whole = whole_target_tokens(SPEC, targets)
    assert whole and all(w.startswith(("(", ")")) for w in whole)
    return Tokenizer.train(sources + targets, TokenizerSpec(vocab_size=1000), tmp_path_factory.mktemp("spm") / "spm",
                           whole=whole)


@pytest.mark.parametrize("order", ["top_down", "in_order"])
def test_the_constraint_admits_every_gold_tree(sample: list[Tree], tok: Tokenizer, order: str) -> None:
    sources = [" ".join(t.words()) for t in sample]
    sequences = tok.encode([linearize(t, "words", order) for t in sample])  # type: ignore[arg-type]
    vocab = TreeVocab.of(tok, "words")
    bracket = vocab.is_open | vocab.is_close
    pieces = leaf_pieces(tok, sources)
    # the target's words are the source's pieces, as the rule copies them; many words are several
    assert all([i for i in s if not bracket[i]] == [p for w in ws for p in w] for s, ws in zip(sequences, pieces,
                                                                                                 strict=True))
    assert sum(len(w) > 1 for ws in pieces for w in ws) > 0.15 * sum(len(ws) for ws in pieces)
    longest = max(len(s) for s in sequences)
    gold = torch.full((len(sample), longest + 1), PAD, dtype=torch.long)  # each followed by EOS
    for row, ids in enumerate(sequences):
        gold[row, : len(ids)] = torch.tensor(ids)
        gold[row, len(ids)] = EOS
    lengths = torch.tensor([len(s) for s in sequences])
    whole = _whole_prefixes(sequences, vocab, longest + 1)
    rule = tree_rule(tok, "words", sources, "cpu", order)(list(range(len(sample))))
    flat, start, _ = flat_pieces(pieces, "cpu", PAD)
    everyone = torch.arange(len(sample))
    for t in range(longest + 1):
        live = (lengths >= t).nonzero().squeeze(1)
        lprobs = torch.zeros(len(live), tok.vocab_size)
        rule.ban(lprobs, gold[live, :t], everyone[live], 1, limit=None)
        allowed = lprobs.isfinite()
        assert allowed.gather(1, gold[live, t: t + 1]).all(), f"step {t}: a gold token banned"
        placed = vocab.is_leaf[gold[live, :t]].sum(1).clamp(max=flat.size(1) - 1)
        leaves = allowed & vocab.is_leaf[None, :]  # at most one leaf: the next source piece
        assert leaves.sum(1).le(1).all() and (leaves.gather(1, flat[live, placed][:, None]).squeeze(1)
                                              | ~leaves.any(1)).all(), f"step {t}: another leaf allowed"
        inside = ~start[live, placed]  # inside a word: its next piece and nothing else
        assert allowed[inside].sum(1).eq(1).all(), f"step {t}: a word left unfinished"
        early = allowed[:, EOS] & ~whole[live, t]
        assert not early.any(), f"step {t}: EOS allowed inside trees {live[early][:5].tolist()}"
    text = output_text(tok, TreeForm("words", order))  # type: ignore[arg-type]
    outputs = [text(ids, line) for ids, line in zip(sequences, sources, strict=True)]
    tests, repairs = to_trees(outputs, sources, [t.tags() for t in sample], TreeForm("words", order))  # type: ignore[arg-type]
    assert repairs.to_json()["repaired"] == 0
    scored = evalb([str(t) for t in sample], tests, collins())
    assert scored.all.fmeasure == 100.0 and scored.all.complete_match == 100.0
    assert scored.all.valid == len(sample)


def _whole_prefixes(sequences: list[list[int]], vocab: TreeVocab, steps: int) -> torch.Tensor:
    """(B, steps) bool: whether the first t pieces of each sequence are a whole tree (its every leaf
    piece, no bracket open, the last token a closing one)."""
    whole = torch.zeros(len(sequences), steps, dtype=torch.bool)
    for row, ids in enumerate(sequences):
        last_leaf = max(i for i, p in enumerate(ids) if vocab.is_leaf[p])
        depth = 0
        for t, p in enumerate(ids, 1):
            depth += int(vocab.is_open[p]) - int(vocab.is_close[p])
            whole[row, t] = depth == 0 and t > last_leaf and bool(vocab.is_close[p])
    return whole


def test_output_text_regroups_pieces_into_words(tok: Tokenizer) -> None:
    """However a word was split, the reader gets it whole; a bracket always stands alone, and the
    unknown piece stays inside its word. While the output copies the source, the source's words say
    where each begins (a zero-width space inside a word is a word boundary to sentencepiece)."""
    sentence = "Ms. Haag plays Elianti ."
    target = "(S (NP Ms. Haag )NP (VP plays (NP Elianti )NP )VP . )S"
    ids = tok.encode([target])[0]
    assert len(ids) > len(target.split())  # some word is several pieces
    text = output_text(tok, TreeForm("words"))
    assert text(ids + [EOS], sentence) == target and output_text(tok, TreeForm())(ids, sentence) == tok.decode(ids)
    haag = tok.encode(["Haag"])[0]
    assert len(haag) > 1
    nonsense = tok.encode(["(NP"])[0] + haag[1:] + [UNK] + tok.encode([")NP"])[0] + haag[:1] + [UNK] + haag[1:]
    odd = text(nonsense, "It")  # not the source's pieces: a piece after a bracket begins a word
    assert odd.split(" ")[0] == "(NP" and odd.split(" ")[2] == ")NP" and len(odd.split(" ")) == 4
    assert "\u2047" in odd.split(" ")[1] and "\u2047" in odd.split(" ")[3]
    tree, fix = repair(odd, ["Haag", "H"], None, "words")
    assert tree.words() == ["Haag", "H"] and fix.words_replaced == 2
    joined = "Haag\u200bplays"  # one word to Python's split, two to sentencepiece
    pieces = tok.encode([joined])[0]
    assert sum(tok.sp.id_to_piece(i).startswith("\u2581") for i in pieces) == 2
    out = text(tok.encode(["(S"])[0] + pieces + tok.encode([")S"])[0], joined)
    assert len(out.split()) == 3
    assert not repair(out, [joined], None, "words")[1].leaves_dropped


# Hand-made: 4-7 brackets as in test_constrained, word pieces 9-39.
OPEN = {4: 6, 5: 7}
CLOSE = {6, 7}
NAMES = {4: "(S", 5: "(NP", 6: ")S", 7: ")NP"}


def _vocab(size: int = 40) -> TreeVocab:
    is_open, is_close = (torch.zeros(size, dtype=torch.bool) for _ in range(2))
    closer = torch.full((size,), -1, dtype=torch.long)
    for o, c in OPEN.items():
        is_open[o], closer[o] = True, c
    for c in CLOSE:
        is_close[c] = True
    is_leaf = ~(is_open | is_close)
    is_leaf[[0, 2, 3]] = False
    return TreeVocab(is_open, is_close, is_leaf, closer, BOS, EOS)


def _render(ids: list[int]) -> str:
    """Pieces as text: a piece id above 20 right after a piece continues its word."""
    out, previous = "", 0
    for i in ids:
        out += f" {NAMES[i]}" if i in NAMES else f"p{i}" if i > 20 and previous not in NAMES and out else f" p{i}"
        previous = i
    return out.strip()


@pytest.mark.parametrize("order", ["top_down", "in_order"])
def test_random_allowed_tokens_always_make_a_tree_of_the_pieces(order: str) -> None:
    """Any path through the allowed tokens, under limits down to the flattest tree's (pieces + 3, EOS
    counted), ends in a tree whose leaves are the sentence's words, each whole, within the limit."""
    g = torch.Generator().manual_seed(0)
    rows = 300
    sentences = []
    for _ in range(rows):  # 1-6 words of 1-3 pieces: a word starts with a piece 9-20, continues with 21-39
        words = int(torch.randint(1, 7, (1,), generator=g))
        sentences.append([[int(torch.randint(9, 21, (1,), generator=g))]
                          + torch.randint(21, 40, (int(torch.randint(0, 3, (1,), generator=g)),), generator=g).tolist()
                          for _ in range(words)])
    ids, start, slots = flat_pieces(sentences, "cpu", PAD)
    limit = slots + 3 + torch.randint(0, 12, (rows,), generator=g)
    rule = WellFormed(_vocab(), slots, order, (ids, start))
    history = torch.zeros(rows, 0, dtype=torch.long)
    ended = torch.full((rows,), -1)
    for t in range(int(limit.max())):
        lprobs = torch.zeros(rows, 40)
        rule.ban(lprobs, history, torch.arange(rows), 1, limit)
        pick = torch.multinomial(lprobs.isfinite().float(), 1, generator=g).squeeze(1)
        ended = torch.where(ended.lt(0) & pick.eq(EOS), t, ended)
        history = torch.cat([history, pick[:, None]], 1)
    assert ended.ge(0).all() and (ended + 1).le(limit).all()
    for row in range(rows):
        out = history[row, : int(ended[row])].tolist()
        words = [_render(w) for w in sentences[row]]
        tree, fix = repair(_render(out), words, None, "words", order)  # type: ignore[arg-type]
        root = tree.children[0] if len(tree.children) == 1 else None
        assert not fix.needed and isinstance(root, Tree) and not root.is_preterminal, (_render(out), words)
        assert linearize(tree, "words", order) == _render(out)  # type: ignore[arg-type]
    assert (ended + 1).eq(limit).sum() > 10  # many ran into the limit: the room rule was needed


def test_a_word_with_no_pieces_is_one_unknown_piece(tok: Tokenizer) -> None:
    """A word the normaliser empties (a lone zero-width space) is still one leaf to place."""
    assert tok.encode(["\u200b"]) == [[]]
    assert leaf_pieces(tok, ["Haag \u200b", ""]) == [[tok.encode(["Haag"])[0], [UNK]], []]
    ids, start, slots = flat_pieces([[[9, 21], [10]], []], "cpu", PAD)
    assert ids.tolist() == [[9, 21, 10, PAD], [PAD, PAD, PAD, PAD]] and slots.tolist() == [3, 0]
    assert start.tolist() == [[True, False, True, True], [True, True, True, True]]


def test_decoding_setup_is_per_batch(tok: Tokenizer) -> None:
    """``tree_rule`` sets up every line's pieces once; a batch's rule takes its lines' rows."""
    lines = ["Ms. Haag plays Elianti .", "It purred ."]
    make = tree_rule(tok, "words", lines, "cpu")
    rule = make([1])
    assert rule.words.tolist() == [sum(len(w) for w in leaf_pieces(tok, lines[1:])[0])]
    assert rule.pieces is not None and rule.pieces[0][0, 0] == tok.encode(["It"])[0][0]
