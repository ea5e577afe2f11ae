"""Special token ids, defined once: the embedding's padding row and the tokenizer's special pieces
(every sentencepiece model tbuild trains or accepts uses these ids)."""

PAD, UNK, BOS, EOS = 0, 1, 2, 3
