"""A decoder-only run with ``model.silent_ids`` exported to ``GPT2LMHeadModel`` or ``LlamaForCausalLM``. Those
classes score every row and have no output bias to hold -inf, so the folder leaves the silent rows out: its
ids are the run's scored rows in order (the token tables, the tokenizer and the config's ids alike), and it
computes the run's logits on every one of them.

A silent row is a copy that the import made for a role with no token of its own (GPT-2 as published: PAD, UNK
and BOS copy the ``<|endoftext|>`` row, EOS's; docs/pretrained.md). In the folder a role reads the row it
copies (GPT-2's ``bos_token_id`` is ``<|endoftext|>``'s) and a silent PAD has no token (``pad_token_id`` unset,
as in GPT-2's and Llama's configs). Which row a copy copies is found by its input embedding (the import copies
it exactly; a role's own row first, EOS's before the others). A silent UNK or BOS that equals no scored row
(a fine-tune changed it, or the spec made it silent) is refused in one line: the folder would read another row
there. The numbering is the one importing the folder gives (``Renumbering``: the folder's id of each run row),
so import, export and import again give the run back."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from tbuild.builder.spec import Spec
from tbuild.builder.tokens import EOS, PAD, UNK

from ..pretrained.hf_ids import KEEPS, ROLES, Renumbering, renumbered_file
from .targets import UnsupportedExport

ROLE_ROWS = tuple(ROLES.index(role) for role in KEEPS)  # a copy's usual sources: EOS's row, then PAD's, UNK's, BOS's


def _copied(table: torch.Tensor, row: int, silent: list[int]) -> int | None:
    """The scored row of ``table`` equal to ``row``'s (a role's own row first), or None."""
    for i in ROLE_ROWS:
        if i not in silent and i < table.size(0) and torch.equal(table[i], table[row]):
            return i
    same = table.eq(table[row]).all(1)
    same[silent] = False
    return int(same.nonzero()[0, 0]) if same.any() else None


def folder_numbering(spec: Spec, model: nn.Module) -> Renumbering:
    """The hf folder's numbering of ``model``'s rows (``order[run id]``: the folder's id; a silent row's, that of
    the row it copies; ``copies``: the silent ids), the identity without silent ids; the refusal where a silent
    UNK or BOS equals no scored row."""
    silent = list(spec.model.silent_ids)
    table = model.tgt_embed.tokens.weight.detach()  # type: ignore[union-attr]
    source = {}
    for row in silent:
        found = _copied(table, row, silent)
        if found is None and row != PAD:  # the folder has no PAD: nothing there reads its row
            role = f" ({ROLES[row].upper()})" if row < len(ROLES) else ""
            raise UnsupportedExport(
                f"cannot export {spec.model.called} to hf: model.silent_ids row {row}{role} equals "
                "no scored row (the import made it a copy of one; a fine-tune changes it), and the folder, which "
                "leaves the silent rows out, would read the copied row there; --to ctranslate2 keeps every row")
        source[row] = EOS if found is None else found
    kept = [i for i in range(table.size(0)) if i not in source]
    folder = {row: j for j, row in enumerate(kept)}
    return Renumbering(tuple(folder[source.get(i, i)] for i in range(table.size(0))), frozenset(source))


def folder_roles(numbering: Renumbering) -> dict[str, int | None]:
    """Each role's id in the folder (pad, unk, bos, eos): its row's, a silent role's the row it copies, and none
    for a silent PAD."""
    return {role: None if i == PAD and i in numbering.copies else numbering.order[i] for i, role in enumerate(ROLES)}


def scored_rows(table: torch.Tensor, numbering: Renumbering) -> torch.Tensor:
    """``table``'s rows (the run's) in the folder's order, the silent ones left out."""
    return table[list(numbering.kept())]


def folder_tokenizers_file(data: dict, numbering: Renumbering) -> dict:
    """The run's tokenizers file (its JSON) in the folder's ids: the silent rows' tokens left out."""
    return renumbered_file(data, numbering.inverse())


def folder_spm(path: Path, numbering: Renumbering) -> bytes:
    """The run's sentencepiece model without the silent rows' pieces (the ``<pad>`` an import of Llama's numbering
    put first: Llama's model again), each role at its folder id (-1 where it has none)."""
    from ..pretrained.hf_source import read_spm

    if UNK in numbering.copies:
        raise UnsupportedExport(f"cannot export to hf: model.silent_ids has UNK ({UNK}), whose piece a sentencepiece "
                                "model cannot leave out")
    proto, roles = read_spm(path), folder_roles(numbering)
    pieces = [p for i, p in enumerate(proto.pieces) if i not in numbering.copies]
    del proto.pieces[:]
    proto.pieces.extend(pieces)
    spec = proto.trainer_spec
    spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id = (-1 if i in numbering.copies else roles[r]
                                                          for i, r in enumerate(ROLES))
    return proto.SerializeToString()
