"""Decoding with language codes (M2M100/NLLB, mBART-50) against Hugging Face `generate`: the source's code starts
each line, the target's is the target prefix (tbuild) and `forced_bos_token_id` (HF)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from typer.testing import CliRunner

from tbuild.cli.app import app

LINES = ["the cat sat", "a dog ran in the park"]


def assert_decodes_as_generate(run: Path, hf: Any, tk: Any, codes: list[str], max_new_tokens: int) -> None:
    """Greedy `tbuild decode` of LINES with ``codes`` (source, target) at most 10 tokens long gives `generate`'s
    text from the same source ids with ``max_new_tokens`` (the same limit as the class counts it)."""
    source, target = (tk.token_to_id(c) for c in codes)
    result = CliRunner().invoke(app, ["decode", str(run), "--beam", "1", "--device", "cpu", "--set",
                                      "decode.max_len_a=0", "--set", "decode.max_len_b=10"],
                                input="".join(f"{codes[0]} {line}\t{codes[1]}\n" for line in LINES))
    assert result.exit_code == 0, result.output
    ours = result.output.rstrip("\n").split("\n")[-len(LINES):]
    for line, text in zip(LINES, ours, strict=True):
        src = [source, *tk.encode(line, add_special_tokens=False).ids, 2]
        out = hf.generate(input_ids=torch.tensor([src]), forced_bos_token_id=target, num_beams=1, do_sample=False,
                          max_new_tokens=max_new_tokens)[0].tolist()
        assert text == tk.decode(out, skip_special_tokens=True), (text, out)
