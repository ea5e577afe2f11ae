"""A Hugging Face folder's generation defaults as the imported run's ``decode`` section, so ``tbuild generate`` and
``tbuild decode`` default to what the folder's ``generate`` does: its ``generation_config.json`` (else the
generation keys of a config.json written before that file existed), on top of transformers' own defaults (greedy,
length penalty 1.0). What tbuild has no equivalent for is not applied and said in one line each (``note``).

- ``num_beams`` → ``beam``; ``num_return_sequences`` → ``nbest`` (at most the beam);
- ``do_sample`` → ``sampling``: ``topp`` where ``top_p`` < 1 (transformers' ``top_k`` is then not applied: tbuild
  samples with one cut), else ``topk`` (``top_k``, 50 unless set) or ``temperature`` where ``top_k`` is 0 or
  None; ``temperature`` as it is;
- ``length_penalty`` → ``alpha``: transformers divides a beam's log-probability by |Y|^α, tbuild by
  ((5+|Y|)/6)^α (§6.1, Wu et al. 2016), so beam search past 1 ranks alike but not identically (greedy search is
  the same);
- ``max_new_tokens`` → ``max_len_b`` (the new tokens; a translator's ``max_len_a`` 0); ``max_length`` → a
  translator's ``max_len_a`` 0 and ``max_len_b`` max_length − 1 (transformers counts the decoder's start); a
  language model's counts the prompt too, which tbuild's limit does not: not applied;
- ``no_repeat_ngram_size`` → ``no_repeat_ngram``;
- ``eos_token_id`` beyond the record's eos (Llama 3's list), ``bad_words_ids`` and ``suppress_tokens`` other than
  what tbuild bans anyway, and the ``UNSUPPORTED`` settings (``forced_bos_token_id``: give it as the target
  prefix): not applied, each said. ``forced_eos_token_id`` is what tbuild does at the length limit."""

from __future__ import annotations

from pathlib import Path

from tbuild.components.specs.special import Specials

from .special import Note, optional_json

HF = {"num_beams": 1, "do_sample": False, "length_penalty": 1.0, "top_k": 50, "top_p": 1.0, "temperature": 1.0,
      "num_return_sequences": 1, "no_repeat_ngram_size": 0}  # transformers' GenerationConfig defaults used here
UNSUPPORTED = {"repetition_penalty": 1.0, "min_length": 0, "min_new_tokens": None, "typical_p": 1.0,
               "num_beam_groups": 1, "penalty_alpha": None, "forced_bos_token_id": None,
               "begin_suppress_tokens": None, "encoder_repetition_penalty": 1.0, "epsilon_cutoff": 0.0,
               "eta_cutoff": 0.0, "diversity_penalty": 0.0, "guidance_scale": None, "min_p": None}
KEYS = (*HF, *UNSUPPORTED, "max_length", "max_new_tokens", "eos_token_id", "bad_words_ids", "suppress_tokens")


def generation_settings(folder: Path, config: dict) -> dict:
    """The folder's generation settings: generation_config.json's, else config.json's generation keys."""
    found = optional_json(folder / "generation_config.json")
    return found if found else {k: config[k] for k in KEYS if k in config}


def _sampling(given: dict, note: Note) -> dict:
    """The sampling fields of ``decode`` for ``do_sample`` (module docstring)."""
    top_k, top_p = given.get("top_k", HF["top_k"]), given.get("top_p", HF["top_p"])
    fields = {"temperature": float(given.get("temperature", HF["temperature"]))}
    if top_p is not None and top_p < 1:
        if top_k:
            note(f"generation_config.json top_k {top_k} with top_p {top_p}: tbuild samples with one cut, top_p")
        return fields | {"sampling": "topp", "topp": float(top_p)}
    if top_k:
        return fields | {"sampling": "topk", "topk": int(top_k)}
    return fields | {"sampling": "temperature"}


def _lengths(given: dict, translator: bool, note: Note) -> dict:
    """The length fields of ``decode`` from ``max_new_tokens`` or ``max_length`` (module docstring)."""
    new, longest = given.get("max_new_tokens"), given.get("max_length")
    if isinstance(new, int):
        return {"max_len_b": new} | ({"max_len_a": 0.0} if translator else {})
    if isinstance(longest, int) and translator:
        return {"max_len_a": 0.0, "max_len_b": max(1, longest - 1)}
    if isinstance(longest, int):
        note(f"generation_config.json max_length {longest}: counts the prompt, which tbuild's limit does not; "
             "not applied (tbuild generate --max-new-tokens, decode.max_len_b)")
    return {}


def _not_applied(given: dict, special: Specials, translator: bool, note: Note) -> None:
    """One line for each setting tbuild has no equivalent for (module docstring)."""
    for key, default in UNSUPPORTED.items():
        if given.get(key, default) not in (default, None):
            note(f"generation_config.json {key} {given[key]!r}: tbuild has no equivalent; not applied")
    eos = given.get("eos_token_id")
    others = sorted(set(eos if isinstance(eos, list) else [eos]) - {special.eos, None})
    if others:
        note(f"generation_config.json eos_token_id {eos}: tbuild stops at the record's eos {special.eos} only")
    banned = set(special.never if translator else special.generating().never)  # what tbuild's search bans
    for key in ("bad_words_ids", "suppress_tokens"):
        ids = {i for row in given.get(key) or [] for i in (row if isinstance(row, list) else [row])}
        if ids - banned:
            note(f"generation_config.json {key} {given[key]}: not applied (tbuild bans {sorted(banned) or 'nothing'})")


def decode_section(folder: Path, config: dict, special: Specials, translator: bool, note: Note) -> dict:
    """The imported run's ``decode`` fields: what the folder's ``generate`` does by default (module docstring),
    each setting tbuild has no equivalent for said in ``note``."""
    given = generation_settings(folder, config)
    beams = int(given.get("num_beams") or HF["num_beams"])
    fields: dict = {"beam": beams, "alpha": float(given.get("length_penalty", HF["length_penalty"]))}
    if beams > 1:
        note(f"generation_config.json length_penalty {fields['alpha']} as decode.alpha: transformers divides by "
             "|Y|^alpha, tbuild by ((5+|Y|)/6)^alpha, so beams may rank differently")
    returned = int(given.get("num_return_sequences") or 1)
    if returned > 1:
        fields["nbest"] = min(returned, beams)
    if given.get("do_sample"):
        fields |= _sampling(given, note)
    fields |= _lengths(given, translator, note)
    if given.get("no_repeat_ngram_size"):
        fields["no_repeat_ngram"] = int(given["no_repeat_ngram_size"])
    _not_applied(given, special, translator, note)
    return fields
