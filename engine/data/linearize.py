"""Trees as token sequences, and back. Two orders (``data.dataset.order``), each pre-terminal as ``XX``
(style ``xx``), as its tag (style ``tags``, as tensor2tensor does) or as its word (style ``words``,
lexicalized: the decoder copies the source's subword pieces); the TOP root is left out.

- ``top_down``: depth-first as in Vinyals & Kaiser et al. (2014), which §6.3 compares with:
  ``(S (NP XX XX )NP (VP XX )VP XX )S``.
- ``in_order`` (Liu & Zhang 2017, "In-Order Transition-based Constituent Parsing"; better than top-down
  for sequence-to-sequence parsing in Fernández-González & Gómez-Rodríguez 2020): a constituent's opening
  label comes after its first child, ``lin(c1) (X lin(c2) … lin(cn) )X``:
  ``XX (NP XX )NP (S XX (VP )VP XX )S`` for the same tree.

Style ``words``: ``(S (NP Ms. Haag )NP (VP plays )VP . )S``; a word with a bracket in it has it written
as the treebank writes one (``-LRB-``, ``-RRB-``, ``leaf_text``), so a leaf never reads as a bracket.

A decoded sequence is repaired into a tree over exactly the input words before it is written or scored."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from .trees import Tree

Style = Literal["xx", "tags", "words"]
Order = Literal["top_down", "in_order"]
LEAF = "XX"
_ESCAPE = {"(": "-LRB-", ")": "-RRB-"}  # a word that is a bracket would break the tree's text


@dataclass(frozen=True)
class TreeForm:
    """How a run writes its trees as tokens: the leaf token (``data.dataset.linearization``) and the
    order of a constituent's opening bracket (``data.dataset.order``)."""

    style: Style = "xx"
    order: Order = "top_down"


def linearize(tree: Tree, style: Style = "xx", order: Order = "top_down") -> str:
    """The token sequence of a (cleaned) tree, its TOP root left out."""
    tokens: list[str] = []

    def walk(node: Tree) -> None:
        if node.is_preterminal:
            tokens.append(LEAF if style == "xx" else leaf_text(str(node.children[0])) if style == "words"
                          else node.label)
            return
        children = [c for c in node.children if isinstance(c, Tree)]
        if order == "in_order" and children:  # the first child, then the label: Liu & Zhang (2017)
            walk(children[0])
            children = children[1:]
        tokens.append(f"({node.label}")
        for child in children:
            walk(child)
        tokens.append(f"){node.label}")

    for child in tree.children if tree.label == "TOP" else [tree]:
        if isinstance(child, Tree):
            walk(child)
    return " ".join(tokens)


def leaf_text(word: str) -> str:
    """A word as a ``words`` leaf: its brackets written as the treebank writes them (``-LRB-``, ``-RRB-``)."""
    return word.replace("(", _ESCAPE["("]).replace(")", _ESCAPE[")"])


@dataclass
class Repair:
    """What it took to make a decoded sequence a tree over the input words (counts of each fix)."""

    extra_close: int = 0  # closing brackets with no open bracket: dropped
    unclosed: int = 0  # brackets still open at the end: closed
    mismatched_close: int = 0  # ')X' closing '(Y': closed as Y
    leaves_added: int = 0  # fewer leaves than words: the rest attached at the end
    leaves_dropped: int = 0  # more leaves than words: the extra ones dropped
    empty_removed: int = 0  # constituents left with no word: removed
    junk_dropped: int = 0  # style xx: tokens neither a bracket nor XX (pieces of words): dropped
    open_without_child: int = 0  # in_order: '(X' with no completed item before it: opened without one
    words_replaced: int = 0  # style words: a leaf that is not the input's word at its place: the word put there

    @property
    def needed(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def add(self, other: Repair) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def counts(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _prune(node: Tree, fix: Repair) -> bool:
    """Remove constituents without words below ``node``; whether ``node`` keeps any word."""
    if node.is_preterminal:
        return True
    kept = [c for c in node.children if isinstance(c, Tree) and _prune(c, fix)]
    fix.empty_removed += len(node.children) - len(kept)
    node.children = list(kept)
    return bool(kept)


def _kind(tok: str, style: Style) -> str:
    """``open``, ``close``, ``leaf`` or ``junk`` (style xx: a token neither a bracket nor XX). Style words:
    every other token is a word (a leaf), whatever its text."""
    if tok.startswith("(") and len(tok) > 1:
        return "open"
    if tok.startswith(")"):
        return "close"
    return "junk" if style == "xx" and tok != LEAF else "leaf"


def repair(sequence: str, words: list[str], tags: list[str] | None = None, style: Style = "xx",
           order: Order = "top_down") -> tuple[Tree, Repair]:
    """The tree a decoded ``sequence`` (written in ``order``) stands for, over exactly ``words``, and how
    it was repaired. Leaf ``i`` gets ``words[i]`` and the tag ``tags[i]`` if given (the gold tags, when
    scoring), else ``XX`` (styles xx and words) or the leaf token itself, a predicted tag (style tags).
    Style words: the leaves are the input's words by position, as XX leaves are; one whose text differs
    is counted (``words_replaced``)."""
    fix = Repair()
    read = _read_in_order if order == "in_order" else _read_top_down
    root, n = read(sequence.split(), words, tags, style, fix)
    if n < len(words):  # under the one top constituent if there is one (usually S), else under TOP
        only = root.children[0] if len(root.children) == 1 else None
        target = only if isinstance(only, Tree) and not only.is_preterminal else root
        target.children.extend(_leaf(words, tags, i, LEAF) for i in range(n, len(words)))
        fix.leaves_added = len(words) - n
    _prune(root, fix)
    return root, fix


def _read_top_down(tokens: list[str], words: list[str], tags: list[str] | None, style: Style, fix: Repair,
                   ) -> tuple[Tree, int]:
    """The TOP tree of a top-down sequence and how many leaves it placed, fixes counted in ``fix``."""
    root = Tree("TOP")
    stack = [root]
    n = 0
    for tok in tokens:
        kind = _kind(tok, style)
        if kind == "open":
            node = Tree(tok[1:])
            stack[-1].children.append(node)
            stack.append(node)
        elif kind == "close":
            if len(stack) == 1:
                fix.extra_close += 1
                continue
            node = stack.pop()
            fix.mismatched_close += len(tok) > 1 and tok[1:] != node.label
        elif kind == "junk":
            fix.junk_dropped += 1
        elif n < len(words):
            stack[-1].children.append(_placed(words, tags, n, tok, style, fix))
            n += 1
        else:
            fix.leaves_dropped += 1
    fix.unclosed = len(stack) - 1
    return root, n


def _read_in_order(tokens: list[str], words: list[str], tags: list[str] | None, style: Style, fix: Repair,
                   ) -> tuple[Tree, int]:
    """The TOP tree of an in-order sequence and how many leaves it placed, fixes counted in ``fix``. A
    stack of items, each a completed subtree (False) or an open constituent (True): a leaf pushes a
    completed item; ``(X`` takes the completed item on top as X's first child and pushes X open; ``)X``
    moves the completed items above the innermost open constituent into it and completes it. What is
    still open at the end is closed; the items left go under TOP."""
    stack: list[tuple[Tree, bool]] = []
    n = 0
    for tok in tokens:
        kind = _kind(tok, style)
        if kind == "open":
            node = Tree(tok[1:])
            if stack and not stack[-1][1]:
                node.children.append(stack.pop()[0])
            else:
                fix.open_without_child += 1
            stack.append((node, True))
        elif kind == "close":
            if not any(is_open for _, is_open in stack):
                fix.extra_close += 1
                continue
            node = _close(stack)
            fix.mismatched_close += len(tok) > 1 and tok[1:] != node.label
        elif kind == "junk":
            fix.junk_dropped += 1
        elif n < len(words):
            stack.append((_placed(words, tags, n, tok, style, fix), False))
            n += 1
        else:
            fix.leaves_dropped += 1
    while any(is_open for _, is_open in stack):
        _close(stack)
        fix.unclosed += 1
    return Tree("TOP", [node for node, _ in stack]), n


def _close(stack: list[tuple[Tree, bool]]) -> Tree:
    """Complete the innermost open constituent of ``stack`` (there is one) with the items above it."""
    done: list[Tree | str] = []
    while stack[-1][1] is False:
        done.append(stack.pop()[0])
    node = stack.pop()[0]
    node.children.extend(reversed(done))
    stack.append((node, False))
    return node


def _placed(words: list[str], tags: list[str] | None, i: int, token: str, style: Style, fix: Repair) -> Tree:
    """The pre-terminal of the ``i``-th leaf token read (style words: the token is a word, its tag XX;
    one that is not ``words[i]`` counted)."""
    if style != "words":
        return _leaf(words, tags, i, token)
    fix.words_replaced += token != leaf_text(words[i])
    return _leaf(words, tags, i, LEAF)


def _leaf(words: list[str], tags: list[str] | None, i: int, token: str) -> Tree:
    tag = tags[i] if tags is not None else token
    return Tree(tag, [_ESCAPE.get(words[i], words[i])])
