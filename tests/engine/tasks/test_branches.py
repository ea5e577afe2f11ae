"""What varies by task is asked of the run's task (``engine/tasks/``), never tested elsewhere: the places
outside ``engine/tasks/`` and ``builder/spec/tasks.py`` (and the components, which declare the kinds) that test
which task or model kind a run is are counted, so that new ones cannot creep back in. Counted: a predicate such
as ``labelled(spec)``, an ``isinstance`` of a task's data set or head spec, and every read of ``model.kind``, a
head's or a data set's kind, ``model.prefix_lm`` or a ``GRAPHS`` entry by kind (a comparison, a branch, a table
look-up), except where the value is only shown (inside an f-string, or a value of a dict written out); and the
derived probes: a graph's ``translates`` or ``data`` read, and a ``getattr`` with a default on a head, a data set
or a spec (a head answers what it does through ``HeadBase``, ``model.output_head`` for a model without one). The
counter is tested on made-up code too.

What the data set decides is asked of it, not tested: its file layout (one text file, LABEL<TAB>TEXT lines or
two parallel files) is the ``Layout`` its spec declares (``data/corpus.py``'s ``layout_of``), its targets' whole
tokens and tree leaves are its provider's (``data/provider.py``, the treebank's in ``data/treebank.py``). What
the model section decides is asked of it (``ModelSpec.graph``, ``scores_source``, ``source_positions``); the
pieces a head reserves are its ``controls``; a module built is searched as its class says (``SEARCHES``). The
places left (``LEFT``) are export's look-ups of the Hugging Face class a graph or an encoder's head maps
to (``EXPORT_CLASSES``, ``ENCODER_HEADS``), as the builder looks up blocks, and the model section's reading of
``model.prefix_lm``."""

from __future__ import annotations

import ast

from tests.conftest import REPO

PREDICATES = {"labelled", "classifier", "tagger", "classified", "masked_lm", "is_language_model", "is_parsing",
              "text_only", "is_prefix_lm", "require_kind", "refuse_masked_lm"}
TASK_SPECS = {"TreebankDataset", "TaggingDataset", "ClassificationDataset", "TextDataset", "MaskedLMSpec",
              "SequenceClassificationSpec", "TokenClassificationSpec"}
KIND_OWNERS = {"model", "head", "output_head", "dataset"}  # spec.model.kind, model.head.kind, data.dataset.kind
PROBED = {"head", "dataset", "spec"}  # getattr(<one of these>, name, default) probes which kind of it a run has
FOLDERS = ("engine", "cli", "builder")
TASKS = "builder/spec/tasks.py"  # the tasks' declarations and the one reading of their claims (``task_name``)
SHOWN_BY = {"Row"}  # records whose fields are only shown (the inspect table's rows)
LEFT = 5  # the registry look-ups: the model's graph and its assembly, export's class of a graph and of an encoder's
# head; and the model section's one reading of model.prefix_lm (``ModelSpec.prefix``)


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


def _read(node: ast.AST) -> bool:
    """Whether ``node`` reads which kind a run is: ``<x>.model.kind``, ``<x>.head.kind``, ``<x>.dataset.kind``,
    ``<x>.prefix_lm`` or ``GRAPHS[...]``, directly or through ``getattr``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        name = getattr(node.args[1], "value", "") if len(node.args) >= 2 else ""
        return isinstance(name, str) and _read(ast.Attribute(node.args[0], name, ast.Load()))
    if isinstance(node, ast.Subscript):
        return isinstance(node.value, ast.Name) and node.value.id == "GRAPHS"
    if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
        return False
    owner = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", None)
    return (node.attr == "kind" and owner in KIND_OWNERS) or node.attr == "prefix_lm"


def _shown(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether ``node``'s value is only shown: inside an f-string, itself a value of a dict literal, or a cell
    of a table row (``Row``)."""
    parent = parents.get(node)
    if isinstance(parent, ast.Dict) and node in parent.values:
        return True
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in SHOWN_BY:
        return True
    while parent is not None and not isinstance(parent, ast.stmt):
        if isinstance(parent, ast.JoinedStr):
            return True
        parent = parents.get(parent)
    return False


def _text(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return isinstance(node, ast.Tuple | ast.List | ast.Set) and all(_text(e) for e in node.elts)


def branches(source: str) -> list[tuple[int, str]]:
    """Each place in ``source`` that tests which task a run is, as (line, what)."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found, compared = [], set()
    for node in ast.walk(tree):
        if _read(node) and not _shown(node, parents) and not _inside(node, parents, compared):
            found.append((node.lineno, ast.unparse(node)))
        if _derived(node) and not _shown(node, parents):
            found.append((node.lineno, ast.unparse(node)))
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
                compared.add(node)
    return sorted(set(found))


def _derived(node: ast.AST) -> bool:
    """Whether ``node`` reads the task through what a kind implies: a graph's ``translates`` or ``data``
    (``model.graph.translates``), or a probe of a head's, data set's or spec's fields with a default
    (``getattr(head, "vocab_sized", False)``: a head answers through ``HeadBase``)."""
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
        graph = isinstance(node.value, ast.Attribute) and node.value.attr == "graph"
        return node.attr == "translates" or (node.attr == "data" and graph)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        return len(node.args) == 3 and bool(_names(node.args[0]) & PROBED)
    return False


def _inside(node: ast.AST, parents: dict[ast.AST, ast.AST], nodes: set[ast.AST]) -> bool:
    """Whether ``node`` lies within one of ``nodes`` or within a read already counted (``a.b.prefix_lm.loss``
    counts once)."""
    parent = parents.get(node)
    while parent is not None:
        if parent in nodes or _read(parent):
            return True
        parent = parents.get(parent)
    return False


def task_branches() -> list[str]:
    """Every such place in engine/, cli/ and builder/ outside engine/tasks/ and the builder's tasks (``TASKS``:
    where a spec's claims say which task it is), as ``path:line what``."""
    out = []
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            where = path.relative_to(REPO)
            if where.parts[:2] != ("engine", "tasks") and where.as_posix() != TASKS:
                out += [f"{where}:{line} {what}" for line, what in branches(path.read_text())]
    return out


def test_the_commands_and_stages_ask_the_task() -> None:
    """No command (cli/) and no stage of the engine (training, serving, tune, export's choice) tests the
    task; what is left is listed here, and may only shrink."""
    found = task_branches()
    assert not [f for f in found if f.startswith(("cli/", "engine/training/", "engine/serving/", "engine/tune/"))]
    assert len(found) <= LEFT, "\n".join(found)


def test_the_counter_finds_each_kind_of_test() -> None:
    """Made-up code: a predicate, an isinstance of a task's spec, kind and graph comparisons, table look-ups
    by kind and prefix-LM reads are found; a sampler's kind, a kind only shown and a task's method are not."""
    source = ("if labelled(spec): pass\n"
              "x = isinstance(spec.data.dataset, TreebankDataset)\n"
              "y = spec.model.kind in ('decoder_only', 'encoder_only')\n"
              "z = GRAPHS[spec.model.kind].data == 'labels'\n"
              "w = run.spec.model.head.kind != 'masked_lm'\n"
              "a = cfg.kind == 'grid'\n"
              "b = GRAPHS[spec.model.kind].stacks\n"
              "c = task_of(spec).evaluate(runs, call)\n"
              "d = CLASSES[spec.model.head.kind]\n"
              "e = spec.model.prefix_lm.loss == 'both'\n"
              "f = f'a {spec.model.kind} model'\n"
              "g = {'kind': run.spec.model.kind}\n"
              "h = {'task': TASKS.get(run.spec.model.kind)}\n"
              "i = getattr(spec.model, 'prefix_lm', None)\n"
              "j = getattr(spec.model.head, 'kind', None) == 'masked_lm'\n"
              "k = getattr(spec.model, 'bias', None)\n"
              "m = spec.model.graph.translates\n"
              "n = model.graph.data == 'labels'\n"
              "o = getattr(model.head, 'vocab_sized', False)\n"
              "p = spec.model.output_head.vocab_sized\n"
              "q = ENCODER_HEADS[spec.model.output_head.kind]\n")
    assert [line for line, _ in branches(source)] == [1, 2, 3, 4, 5, 7, 9, 10, 13, 14, 15, 16, 17, 18, 19, 21]
