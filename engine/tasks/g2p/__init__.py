"""Grapheme-to-phoneme conversion: an encoder-decoder from a word's letters to its pronunciation (a phone
sequence), declared with ``task: g2p`` or claimed by its data set (``cmudict.py``: the CMU Pronouncing
Dictionary), scored by phone and word error rates (``rates.py``); the task itself in ``task.py``, its
``POST /phonemize`` in ``endpoint.py``."""
