"""Penn Treebank trees: reading bracketed ``.mrg`` text (several trees per file), cleaning them as
parsing papers do (no empty elements, no function tags or indices, the root labelled TOP) and writing
them one per line."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import DataError

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
KEEP = frozenset({"-LRB-", "-RRB-", "-NONE-"})  # labels that begin with '-' and are not cut


@dataclass
class Tree:
    """A constituent: a label and its children; a pre-terminal has one child, its word (a str)."""

    label: str
    children: list[Tree | str] = field(default_factory=list)

    @property
    def is_preterminal(self) -> bool:
        return len(self.children) == 1 and isinstance(self.children[0], str)

    def leaves(self) -> list[Tree]:
        """The pre-terminals, left to right."""
        if self.is_preterminal:
            return [self]
        return [leaf for c in self.children if isinstance(c, Tree) for leaf in c.leaves()]

    def words(self) -> list[str]:
        return [str(leaf.children[0]) for leaf in self.leaves()]

    def tags(self) -> list[str]:
        return [leaf.label for leaf in self.leaves()]

    def __str__(self) -> str:
        if self.is_preterminal:
            return f"({self.label} {self.children[0]})"
        return f"({self.label} {' '.join(str(c) for c in self.children)})"


def _parse(tokens: list[str]) -> Tree:
    """One tree from its tokens (which start with '(' and are balanced)."""
    stack: list[Tree] = []
    root: Tree | None = None
    for i, tok in enumerate(tokens):
        if tok == "(":
            label = tokens[i + 1] if i + 1 < len(tokens) and tokens[i + 1] not in "()" else ""
            node = Tree(label)
            if stack:
                stack[-1].children.append(node)
            else:
                root = node
            stack.append(node)
        elif tok == ")":
            stack.pop()
        elif tokens[i - 1] != "(":  # a word (a label follows its '(')
            stack[-1].children.append(tok)
    assert root is not None
    return root


def read_trees(text: str, name: str) -> list[Tree]:
    """Every tree of a bracketed treebank file's text, as written. ``name`` (the file) and the tree's
    position (1-based) name any error: unbalanced brackets, text outside a tree, an empty file."""
    trees, tokens, depth = [], [], 0
    for match in _TOKEN.finditer(text):
        tok = match.group()
        if depth == 0 and tok != "(":
            what = "a closing bracket" if tok == ")" else f"text ({tok})"
            raise DataError(f"{name}: tree {len(trees) + 1}: unbalanced brackets: {what} outside a tree")
        depth += {"(": 1, ")": -1}.get(tok, 0)
        tokens.append(tok)
        if depth == 0:
            trees.append(_parse(tokens))
            tokens = []
    if depth:
        raise DataError(f"{name}: tree {len(trees) + 1}: unbalanced brackets: {depth} left open at the end")
    if not trees:
        raise DataError(f"{name}: no trees (an empty file)")
    return trees


def clean_label(label: str) -> str:
    """``NP-SBJ-1`` → ``NP``, ``NP=2`` → ``NP``; ``-LRB-``, ``-RRB-`` and ``-NONE-`` are kept."""
    if label in KEEP:
        return label
    return re.split(r"[-=]", label, maxsplit=1)[0] or label


def _strip(node: Tree) -> Tree | None:
    """The node without empty elements (-NONE-) and the constituents left empty; labels cleaned."""
    if node.is_preterminal:
        return None if node.label == "-NONE-" else Tree(clean_label(node.label), list(node.children))
    kept = [c for c in (_strip(child) for child in node.children if isinstance(child, Tree)) if c is not None]
    return Tree(clean_label(node.label), kept) if kept else None


def clean(tree: Tree, name: str, index: int) -> Tree:
    """A treebank tree as parsers train on and EVALB scores it: no -NONE- elements, no constituents
    left empty, labels without function tags or indices, the root labelled TOP (an unlabeled root
    ``( (S …) )`` is renamed; a labelled one is put under a TOP)."""
    root = tree if tree.label in ("", "TOP", "ROOT") else Tree("", [tree])
    stripped = _strip(root)
    if stripped is None:
        raise DataError(f"{name}: tree {index}: no words (only empty elements)")
    stripped.label = "TOP"
    return stripped


def read_treebank(text: str, name: str) -> Iterator[Tree]:
    """The cleaned trees of a treebank file's text (see ``read_trees`` and ``clean``)."""
    for i, tree in enumerate(read_trees(text, name), 1):
        yield clean(tree, name, i)
