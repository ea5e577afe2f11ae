"""Data: data sets, parallel files, the tokenizer, encoded pairs and batches."""
