"""`tbuild tune`: adaptive hyperparameter search over spec fields with Optuna."""
