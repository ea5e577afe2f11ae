"""A run's directory and what is stored in it: the spec and its run (``directory.py``: what a user names, the result
and metrics files), the training lock, checkpoints and the one weights loader, the machines it trained on, an
adapter run's record and its merge, the model card.
"""
