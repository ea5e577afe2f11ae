"""Trees as token sequences, and back. Linearized depth-first as in Vinyals & Kaiser et al. (2014),
which §6.3 compares with: ``(S (NP XX XX )NP (VP XX )VP XX )S``, each pre-terminal as ``XX`` (style
``xx``) or as its tag (style ``tags``, as tensor2tensor does); the TOP root is left out. A decoded
sequence is repaired into a tree over exactly the input words before it is written or scored."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from .trees import Tree

Style = Literal["xx", "tags"]
LEAF = "XX"
_ESCAPE = {"(": "-LRB-", ")": "-RRB-"}  # a word that is a bracket would break the tree's text


def linearize(tree: Tree, style: Style = "xx") -> str:
    """The token sequence of a (cleaned) tree, its TOP root left out."""
    tokens: list[str] = []

    def walk(node: Tree) -> None:
        if node.is_preterminal:
            tokens.append(LEAF if style == "xx" else node.label)
            return
        tokens.append(f"({node.label}")
        for child in node.children:
            if isinstance(child, Tree):
                walk(child)
        tokens.append(f"){node.label}")

    for child in tree.children if tree.label == "TOP" else [tree]:
        if isinstance(child, Tree):
            walk(child)
    return " ".join(tokens)


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


def repair(sequence: str, words: list[str], tags: list[str] | None = None, style: Style = "xx",
           ) -> tuple[Tree, Repair]:
    """The tree a decoded ``sequence`` stands for, over exactly ``words``, and how it was repaired.
    Leaf ``i`` gets ``words[i]`` and the tag ``tags[i]`` if given (the gold tags, when scoring), else
    ``XX`` (style xx) or the leaf token itself, a predicted tag (style tags)."""
    fix = Repair()
    root = Tree("TOP")
    stack = [root]
    n = 0
    for tok in sequence.split():
        if tok.startswith("(") and len(tok) > 1:
            node = Tree(tok[1:])
            stack[-1].children.append(node)
            stack.append(node)
        elif tok.startswith(")"):
            if len(stack) == 1:
                fix.extra_close += 1
                continue
            node = stack.pop()
            fix.mismatched_close += len(tok) > 1 and tok[1:] != node.label
        elif style == "xx" and tok != LEAF:
            fix.junk_dropped += 1
        elif n < len(words):
            stack[-1].children.append(_leaf(words, tags, n, tok))
            n += 1
        else:
            fix.leaves_dropped += 1
    fix.unclosed = len(stack) - 1
    if n < len(words):  # under the one top constituent if there is one (usually S), else under TOP
        only = root.children[0] if len(root.children) == 1 else None
        target = only if isinstance(only, Tree) and not only.is_preterminal else root
        target.children.extend(_leaf(words, tags, i, LEAF) for i in range(n, len(words)))
        fix.leaves_added = len(words) - n
    _prune(root, fix)
    return root, fix


def _leaf(words: list[str], tags: list[str] | None, i: int, token: str) -> Tree:
    tag = tags[i] if tags is not None else token
    return Tree(tag, [_ESCAPE.get(words[i], words[i])])
