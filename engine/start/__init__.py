"""What is written into a built model when a run starts: its initial values (``values.py``: train.init's tensors,
frozen parameters, Adam's moments) and a character input's spelling table (``spelling.py``).
"""
