"""Summarization: an encoder-decoder from a document or sentence to its summary or headline, declared with
``task: summarization``, scored by ROUGE-1/2/L F1 (``rouge.py``) beside a lead-N baseline (``lead.py``); the
task itself in ``task.py``."""
