"""Special token ids, defined once (builder/build.py's PAD_ID is the same 0)."""

PAD, UNK, BOS, EOS = 0, 1, 2, 3
