"""Sentence vectors (`tbuild embed`): an encoder's final states pooled into one vector per input line; the task
of a run whose head is ``sentence_embedding`` (a headless encoder imported from Hugging Face)."""
