"""What varies by task is asked of the run's task (``engine/tasks/``), never tested elsewhere: the places
outside ``engine/tasks/`` (and the components, which declare the kinds) that test which task a run is (a
predicate such as ``labelled(spec)``, an ``isinstance`` of a task's data set or head spec, a comparison of
``model.kind``, a head's or a data set's kind, or a graph's data, with a string) are counted, so that new
ones cannot creep back in. The counter is tested on made-up code too.

What the data set decides is asked of it, not tested: its file layout (one text file, LABEL<TAB>TEXT lines or
two parallel files) is the ``Layout`` its spec declares (``data/corpus.py``'s ``layout_of``), its targets' whole
tokens and tree leaves are its provider's (``data/provider.py``, the treebank's in ``data/treebank.py``). The
places left (``LEFT``) are not the task's: the search of a prefix LM is how the module built decodes (the
translator's ``searched``, for the trainer's validation as for every command), the masked LM's [MASK] piece
belongs to its head, reserved when the tokenizer is trained. Export looks up which Hugging Face class a graph
maps to by its kind (``GRAPH_CLASSES``, ``ENCODER_HEADS``), as the builder looks up blocks."""

from __future__ import annotations

import ast

from tests.conftest import REPO

PREDICATES = {"labelled", "classifier", "tagger", "classified", "masked_lm", "is_language_model", "is_parsing",
              "text_only", "is_prefix_lm", "require_kind", "refuse_masked_lm"}
TASK_SPECS = {"TreebankDataset", "TaggingDataset", "ClassificationDataset", "TextDataset", "MaskedLMSpec",
              "SequenceClassificationSpec", "TokenClassificationSpec"}
KIND_OWNERS = {"model", "head", "dataset"}  # spec.model.kind, model.head.kind, data.dataset.kind
FOLDERS = ("engine", "cli")
LEFT = 2  # the places left: the prefix LM's search, the masked LM's [MASK] piece


def _names(node: ast.expr) -> set[str]:
    """The names in an attribute chain or subscript: ``GRAPHS[spec.model.kind].data`` → GRAPHS, spec, model,
    kind, data."""
    nodes = (n for n in ast.walk(node) if isinstance(n, ast.Name | ast.Attribute))
    return {n.id if isinstance(n, ast.Name) else n.attr for n in nodes}


def _kind(node: ast.expr) -> bool:
    """Whether ``node`` reads a model's, head's or data set's kind, or a graph's data."""
    if not isinstance(node, ast.Attribute):
        return False
    return (node.attr == "kind" and bool(_names(node.value) & KIND_OWNERS)) or (
        node.attr == "data" and "GRAPHS" in _names(node.value))


def _text(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return isinstance(node, ast.Tuple | ast.List | ast.Set) and all(_text(e) for e in node.elts)


def branches(source: str) -> list[tuple[int, str]]:
    """Each place in ``source`` that tests which task a run is, as (line, what)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name in PREDICATES:
                found.append((node.lineno, f"{name}()"))
            elif name == "isinstance" and len(node.args) == 2 and _names(node.args[1]) & TASK_SPECS:
                found.append((node.lineno, f"isinstance(..., {ast.unparse(node.args[1])})"))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_kind(s) for s in sides) and any(_text(s) for s in sides):
                found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def task_branches() -> list[str]:
    """Every such place in engine/ and cli/ outside engine/tasks/, as ``path:line what``."""
    out = []
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            where = path.relative_to(REPO)
            if where.parts[:2] != ("engine", "tasks"):
                out += [f"{where}:{line} {what}" for line, what in branches(path.read_text())]
    return out


def test_the_commands_and_stages_ask_the_task() -> None:
    """No command (cli/) and no stage of the engine (training, serving, tune, export's choice) tests the
    task; what is left is listed here, and may only shrink."""
    found = task_branches()
    assert not [f for f in found if f.startswith(("cli/", "engine/training/", "engine/serving/", "engine/tune/"))]
    assert len(found) <= LEFT, "\n".join(found)


def test_the_counter_finds_each_kind_of_test() -> None:
    """Made-up code: a predicate, an isinstance of a task's spec, kind and graph comparisons are found; a
    sampler's kind, a registry look-up and a task's method are not."""
    source = ("if labelled(spec): pass\n"
              "x = isinstance(spec.data.dataset, TreebankDataset)\n"
              "y = spec.model.kind in ('decoder_only', 'encoder_only')\n"
              "z = GRAPHS[spec.model.kind].data == 'labels'\n"
              "w = run.spec.model.head.kind != 'masked_lm'\n"
              "a = cfg.kind == 'grid'\n"
              "b = GRAPHS[spec.model.kind].stacks\n"
              "c = task_of(spec).evaluate(runs, call)\n")
    assert [line for line, _ in branches(source)] == [1, 2, 3, 4, 5]
