"""Tasks (as fairseq's ``tasks/``): what varies between translation, language modelling (and the prefix LM),
tagging, sequence classification, the masked LM and parsing, one module each, behind one ``Task`` protocol
(``base.py``) and a registry that says which task a spec is (``registry.task_of``)."""
