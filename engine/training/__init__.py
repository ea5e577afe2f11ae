"""Training: the trainer, its state and its metrics log."""
