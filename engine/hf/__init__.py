"""Hugging Face folders both ways: one module per family, each with the one weight map its export writes and
its import reads back (``family.py``, ``maps.py``), the folder's files (``folder.py``), its special ids as the
run's record (``special.py``) and its tokenizer (``tokenizer.py``, ``vocab.py``)."""
