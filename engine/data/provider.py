"""What a data set's provider (registered in ``DATASETS`` by its module, ``datasets.py``) says of its targets
beyond putting its files in place, with the defaults of plain text: no target token is kept whole, and the
targets are no trees. The treebank's provider says otherwise (``treebank.py``)."""

from __future__ import annotations


class Provider:
    """Base of the data sets' providers."""

    leaves: str | None = None  # how a target writes a tree's leaves (xx, tags or words); None: no trees

    def whole_targets(self, target: list[str]) -> list[str]:
        """The tokens of the training targets (``target``) made whole pieces under
        ``data.tokenizer.target_tokens: auto``: none (subwords, as the source)."""
        return []
