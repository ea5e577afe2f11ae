"""Exports of a trained run to inference runtimes: what each target can represent (``targets``) and
the writers (``ctranslate2``), with a parity check against tbuild's own decoding (``parity``)."""
