"""Training: the trainer, its metrics log and the learning-rate schedule."""
