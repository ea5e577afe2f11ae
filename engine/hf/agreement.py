"""Whether an imported run encodes text as the folder's own tokenizer does: transformers' ``AutoTokenizer`` on the
folder, which is what ``tok(text)`` gives a user of the published model. tbuild reads a folder's tokenizer.json as
the ``tokenizers`` library reads it, with the record's adding around it; transformers may build some classes'
pipeline from the class instead (transformers 5 builds ``BertTokenizer`` with ``do_lower_case`` from
tokenizer_config.json, True where unset, whatever the file's normalizer, and ``GPT2Tokenizer`` with no
normalizer). Probe lines (case, accents, compatibility characters, spaces, each added token) encoded both ways
must agree; the first that does not is refused in one line. A translator's folder (its ``src_lang`` token is in
tbuild's input text) and a sentencepiece model (each class converts it its own way) are not probed."""

from __future__ import annotations

from pathlib import Path

from ..data.tokenizer import Tokenizer
from .folder import UnsupportedImport

PROBES = ("Hello World", "The Café's NAÏVE ﬁancée", "  two  spaces\tand a tab", "ünïcödé ½ x²", "the cat sat")


def probe_lines(tok: Tokenizer) -> list[str]:
    """The probe lines, and one around each of the tokenizer's added tokens (a tokenizers file's)."""
    added = getattr(tok.sp, "tk", None)
    contents = [t.content for t in added.get_added_tokens_decoder().values()] if added is not None else []
    return [*PROBES, *(f"a {c} b" for c in contents[:20])]


def check_agreement(folder: Path, tok: Tokenizer) -> None:
    """Refuse in one line where AutoTokenizer on ``folder`` encodes a probe line otherwise than the run (the
    record's ``source`` adding around the tokenizer's ids); a folder transformers cannot load is not compared."""
    import transformers
    from transformers.utils import logging

    logging.set_verbosity_error()
    try:
        own = transformers.AutoTokenizer.from_pretrained(str(folder))
    except Exception:  # noqa: BLE001 - a class transformers lacks, a missing optional package: nothing to compare
        return
    for line in probe_lines(tok):
        ours = tok.special.wrap(tok.encode([line])[0], "source")
        theirs = list(own(line)["input_ids"])
        if ours != theirs:
            raise UnsupportedImport(
                f"{folder}: {type(own).__name__} (transformers' AutoTokenizer on the folder) encodes {line!r} as "
                f"{theirs[:12]}, its {tok.path.name} as {ours[:12]}; make tokenizer_config.json name the class and "
                "flags (do_lower_case, add_bos_token) that read the file as it is, e.g. tokenizer_class "
                "PreTrainedTokenizerFast")
