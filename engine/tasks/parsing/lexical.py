"""Lexicalized trees (``data.dataset.linearization: words``) and the shared sentencepiece vocabulary: the
brackets are whole pieces, a word is written in the pieces the source is split into (one or several), so
the decoder can copy it. Here: each source word's pieces (what the well-formed rule lets the decoder
place, in order) and a decoded output's pieces regrouped into whole words for the reader."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...data.linearize import TreeForm, leaf_text
from ...data.tokenizer import Tokenizer

SPACE = "\u2581"  # sentencepiece's word boundary, the first character of a word's first piece
USER_DEFINED = 4  # sentencepiece's ModelProto.SentencePiece.Type.USER_DEFINED: the whole target tokens


def leaf_pieces(tok: Tokenizer, lines: list[str]) -> list[list[list[int]]]:
    """Per line, each word's pieces as its leaf is written in a target (``leaf_text``); sentencepiece
    splits at whitespace, so a word's pieces are the same alone as in its line. A word the normaliser
    leaves empty is one unknown piece."""
    unknown = [tok.special.ids("unk")]
    return [[ids or unknown for ids in tok.encode([leaf_text(w) for w in line.split()])] if line.split() else []
            for line in lines]


def flat_pieces(pieces: list[list[list[int]]], device: torch.device | str,
                fill: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``leaf_pieces`` as tensors: (B, L + 1) the pieces of each line's words in order, ``fill`` after them,
    (B, L + 1) whether each piece begins a word (True after the last: nothing is left unfinished there), and
    (B,) each line's count of pieces."""
    rows = [[p for word in line for p in word] for line in pieces]
    width = max((len(r) for r in rows), default=0) + 1
    ids = torch.full((len(rows), width), fill, dtype=torch.long)
    start = torch.ones(len(rows), width, dtype=torch.bool)
    for i, line in enumerate(pieces):
        at = 0
        for word in line:
            ids[i, at: at + len(word)] = torch.tensor(word, dtype=torch.long)
            start[i, at + 1: at + len(word)] = False
            at += len(word)
    return ids.to(device), start.to(device), torch.tensor([len(r) for r in rows], dtype=torch.long, device=device)


def output_text(tok: Tokenizer, form: TreeForm) -> Callable[[list[int], str], str]:
    """The text of a decoded output (ids) of a source line, for the reader (``repair``): the tokenizer's
    own for XX and tags; for words each bracket one token and each word's pieces joined into one (the
    unknown piece's surface `` ⁇ `` kept inside its word), so a word is one leaf however it was split."""
    if form.style != "words":
        return lambda ids, source: tok.decode(ids)
    bracket = bracket_pieces(tok)

    def text(ids: list[int], source: str) -> str:
        groups = _words(tok, [int(i) for i in ids if int(i) not in tok.special.skipped], bracket, source)
        return " ".join("".join(tok.sp.decode(g).split()) or "\u2047" for g in groups)

    return text


def _words(tok: Tokenizer, ids: list[int], bracket: list[bool], source: str) -> list[list[int]]:
    """The pieces grouped into tokens: a bracket alone; a word's pieces together. While the leaf pieces
    are the source's (as well-formed decoding makes them), the source's words say where each begins;
    after the first other piece, a piece that begins with the word boundary or follows a bracket does."""
    flat = [(p, i == 0) for word in leaf_pieces(tok, [source])[0] for i, p in enumerate(word)]
    groups: list[list[int]] = []
    after_bracket, placed, copying = True, 0, True
    for i in ids:
        if bracket[i]:
            groups.append([i])
            after_bracket = True
            continue
        copying = copying and placed < len(flat) and flat[placed][0] == i
        begins = flat[placed][1] if copying else tok.sp.id_to_piece(i).startswith(SPACE)
        if begins or after_bracket:
            groups.append([i])
        else:
            groups[-1].append(i)
        after_bracket, placed = False, placed + 1
    return groups


def bracket_pieces(tok: Tokenizer) -> list[bool]:
    """Per piece id, whether it is a whole bracket token (a user-defined ``▁(X`` or ``▁)X``)."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.ParseFromString(tok.sp.serialized_model_proto())
    return [p.type == USER_DEFINED and len(text := p.piece.removeprefix(SPACE)) > 1 and text[0] in "()"
            for p in proto.pieces]
