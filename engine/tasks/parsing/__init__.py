"""Constituency parsing (§6.3): treebank trees, their linearization and repair, and EVALB scoring."""
