"""The native engine: a trained run of any model kind loaded for decoding (its weights selected, its linears
packed or quantized, its decoder step compiled if asked), decoding lines in length-sorted batches by beam search,
sampling or greedy search (``NativeEngine``; ``load_native`` for one run or an ensemble)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import nn

from tbuild.builder import build_model
from tbuild.builder.spec import Spec
from tbuild.components.transformer import EncoderDecoder

from ..data.tokenizer import Tokenizer, run_tokenizer
from ..device.policy import Policy, choose_device, choose_policy, model_widths
from ..errors import TbuildError
from ..run.directory import Run
from ..run.weights import load_weights, weights_files
from .constraints import Phrases
from .ensemble import Ensemble
from .model import SearchModel, search_model
from .packed import pack_linears
from .precision_record import BF16_LOGITS, FLOAT_LOGITS, INT8_LOGITS, CheckMetric, ensure_record, recorded
from .prefix_lm import PrefixLMSearch
from .quantize import check_quantization, quantize_model
from .request import NO_HOOKS, DecodeRequest, Hooks, LineConstraints, check_request
from .search import Hypothesis, Rules, Sampling, beam_search, max_lengths, temperature, top_k, top_p

DEFAULT_MAX_SOURCE = 1024  # source tokens kept when the model has no max_positions
NO_INT8_RECORD = "no int8 check recorded for this run on this CPU; tbuild decode, evaluate and serve make one"


@dataclass
class NativeEngine:
    """A run loaded for decoding (an encoder-decoder, a prefix LM, a tagger or classifier, or an ensemble of
    them): the ``Engine`` protocol of ``engines.py`` named ``native``."""

    model: EncoderDecoder | Ensemble  # searched through its ``SearchModel`` (model.py)
    tokenizer: Tokenizer
    policy: Policy  # device and precision of decoding (and of evaluation's perplexity)
    weights: str  # which weights were loaded, for reports
    max_source_tokens: int
    max_output_len: int | None  # |Y| limit (EOS included): the decoder's max_positions, if set
    quantization: str = "float32"  # float32 or int8 (``quantize.py``)
    note: str = ""  # what it computes in and why (``tbuild evaluate`` prints it)
    name = "native"

    @property
    def precision(self) -> str:
        return "int8" if self.quantization == "int8" else self.policy.precision

    def translate(self, lines: list[str], request: DecodeRequest, hooks: Hooks = NO_HOOKS) -> list[list[Hypothesis]]:
        """``translate(self, ...)``: the ``Engine`` protocol of ``engines.py``."""
        return translate(self, lines, request, hooks)

    def alignments(self, lines: list[str], results: list[list[Hypothesis]]) -> list[list[int]]:
        """A source position per output token of each line's best hypothesis (``alignment.align``; an
        ensemble's first model)."""
        from .alignment import align

        search = searched(self.model)
        if isinstance(search, PrefixLMSearch):
            raise TbuildError("alignments read an encoder-decoder's cross-attention; a decoder-only translator "
                              "(model.prefix_lm) has none")
        model = search.members[0]
        sources = encode_sources(self.tokenizer, lines, self.max_source_tokens)
        return [align(model, source, hyps[0].tokens, self.policy.device) if hyps and source else []
                for source, hyps in zip(sources, results, strict=True)]


def load_native_engine(run: Run, *, checkpoint: Path | None = None, average: int | None = None,
                    device: str = "auto", quantization: str = "float32",
                    notify: Callable[[str], None] = lambda _: None, compiled: bool = False,
                    precision: str | None = None, int8_logits: bool | None = None,
                    bf16_logits: bool = False) -> NativeEngine:
    """The run's model with its weights (see ``load_weights``) on the decoding policy's device, its
    linear layers in ``quantization`` (``quantize.py``: int8 is CPU-only, so device auto picks the
    CPU for it and fp32 compute; ``int8_logits``: the output projection in int8 too, default as the
    run's record says, ``precision_record.py``, else not), its decoder step compiled if asked
    (``compiled.py``), else, on a CPU, its linear weights packed for oneDNN (``packed.py``) in the
    policy's products' dtype (its output projection in float32, or bf16 where the run's record chose bf16
    logits or ``bf16_logits`` asks for them with bf16 products). ``precision`` (default: the spec's
    ``decode.precision``; ``auto`` on a CPU: as the run's record says, else fp32). ``notify`` hears the
    precision chosen and why."""
    precision = precision or run.spec.decode.precision
    if quantization == "int8":
        if device == "auto":
            device = "cpu"
        if precision == "bf16":
            raise TbuildError("int8 decoding computes in float32: set decode.precision to auto or fp32")
    tokenizer = run_tokenizer(run.tokenizer, run.spec)  # an untrained run fails here, before any other line is printed
    files = weights_files(run, checkpoint=checkpoint, average=average)
    policy = decoding_policy(run, precision, device, files, quantization, compiled)
    notify(policy.note)
    if policy.warning:
        notify(f"warning: {policy.warning}")
    check_quantization(quantization, policy.device)
    model = build_model(run.spec)
    weights = load_weights(model, run, checkpoint=checkpoint, average=average)
    model = model.eval().to(policy.device)
    note = policy.note
    if quantization == "int8":
        note = quantize_run_model(model, run, files, int8_logits)
        notify(note)
    if compiled:
        from .compiled import compile_decoder

        compile_decoder(model)
        notify("decoder step compiled with torch.compile (the first batches wait for the compilation)")
    elif policy.autocast_dtype is None:
        products = policy.products or torch.float32
        logits = products if bf16_logits else policy.logits or torch.float32
        pack_linears(model, products, logits)  # CPU float32 weights only; elsewhere a no-op
    max_positions = run.spec.model.max_positions
    return NativeEngine(model, tokenizer, policy, weights, max_source(run.spec), max_positions, quantization, note)


def quantize_run_model(model: nn.Module, run: Run, files: list[Path], int8_logits: bool | None) -> str:
    """``model``'s linear layers in int8, its output projection too where ``int8_logits`` (None: as the
    run's record says; float32 without one); says which and why."""
    record = None if int8_logits is not None else recorded(run, files, "int8")
    logits = int8_logits if int8_logits is not None else record is not None and record[0] == INT8_LOGITS
    quantize_model(model, "int8", logits=logits)
    why = "as asked" if int8_logits is not None else record[1] if record else NO_INT8_RECORD
    return f"int8 linear layers, {'the output projection too' if logits else 'float32 logits'} ({why})"


def decoding_policy(run: Run, precision: str, device: str, files: list[Path], quantization: str,
                    compiled: bool) -> Policy:
    """The decoding policy of ``precision`` (``choose_policy``; ``auto`` on a CPU: the run's record for
    these weights); compiled, bf16 products run as bf16 autocast instead (the graph is compiled unpacked)."""
    record = None
    if precision == "auto":
        record = recorded(run, files, "precision") if quantization == "float32" else ("fp32", "int8 computes in fp32")
    policy = choose_policy(precision, device, widths=model_widths(run.spec), decoding=True,  # type: ignore[arg-type]
                           recorded=record)
    if compiled and policy.products is not None:
        policy = replace(policy, autocast_dtype=policy.products, products=None)
    return policy


def check_decoding(run: Run, *, checkpoint: Path | None = None, average: int | None = None, device: str = "auto",
                   quantization: str = "float32", notify: Callable[[str], None] = lambda _: None,
                   metric: CheckMetric | None = None) -> None:
    """Before a command decodes with the native engine on a CPU: the run's record of the precision
    (``decode.precision: auto``) or of int8's output projection (int8 asked for) measured and written if it
    has none for these weights on this CPU (``precision_record.py``), the modes compared by ``metric`` (the
    task's; a translation's by default)."""
    if choose_device("cpu" if quantization == "int8" and device == "auto" else device).type != "cpu":
        return
    what = "int8" if quantization == "int8" else "precision" if run.spec.decode.precision == "auto" else None
    if what is None:
        return

    def load(mode: str) -> NativeEngine:
        return engine_in_mode(run, mode, checkpoint=checkpoint, average=average)

    ensure_record(run, what, load, checkpoint=checkpoint, average=average, notify=notify, metric=metric)


def engine_in_mode(run: Run, mode: str, *, checkpoint: Path | None = None, average: int | None = None
                   ) -> NativeEngine:
    """The run's CPU engine decoding in one of the decoding check's modes ("fp32", "bf16", ``BF16_LOGITS``, or
    an int8 mode: ``INT8_LOGITS``, ``FLOAT_LOGITS``; ``precision_record.py``)."""
    int8 = mode in (INT8_LOGITS, FLOAT_LOGITS)
    return load_native_engine(run, checkpoint=checkpoint, average=average, device="cpu",
                              quantization="int8" if int8 else "float32",
                              precision="fp32" if int8 else "bf16" if mode == BF16_LOGITS else mode,
                              int8_logits=mode == INT8_LOGITS, bf16_logits=mode == BF16_LOGITS)


def max_source(spec: Spec) -> int:
    """Source tokens kept (EOS included): max_positions (or ``DEFAULT_MAX_SOURCE``); a prefix LM's source
    shares its positions with BOS and at least one output token."""
    return spec.model.source_positions(DEFAULT_MAX_SOURCE)


def encode_sources(tok: Tokenizer, lines: list[str], limit: int,
                   warn: Callable[[str], None] = lambda _: None) -> list[list[int]]:
    """Source ids with what the vocabulary adds around a source (tbuild's: EOS after them), cut to ``limit``
    tokens (with a warning naming the line); an empty line gives an empty list."""
    sources: list[list[int]] = []
    added = sum(map(len, tok.special.around("source")))
    for n, pieces in enumerate(tok.encode(lines), 1):
        if len(pieces) + added > limit:
            warn(f"line {n}: {len(pieces) + added} tokens exceed the model's limit of {limit}; truncated")
            pieces = pieces[: limit - added]
        sources.append(tok.special.wrap(pieces) if pieces else [])
    return sources


def length_batches(lengths: list[int], budget: int, *, same_length: bool = False) -> list[list[int]]:
    """Indices sorted by length, cut so that (longest source · sentences) ≤ budget; ``same_length``: cut
    where the length changes too (a prefix LM whose positional scheme has no shifted view, ``prefix_lm.py``)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (lengths[i] * (len(current) + 1) > budget
                        or same_length and lengths[i] != lengths[current[0]]):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def limited_batches(sources: list[list[int]], spec: DecodeRequest,
                    max_output_len: int | None) -> Iterator[tuple[list[int], list[int]]]:
    """For another runtime's search: the non-empty sources' indices in length batches, each with its
    rows' output length limits as the native search computes them (``search.max_lengths``)."""
    todo = [i for i, s in enumerate(sources) if s]
    for batch in length_batches([len(sources[i]) for i in todo], spec.batch_tokens):
        rows = [todo[j] for j in batch]
        lengths = torch.tensor([len(sources[i]) for i in rows])
        pad = torch.arange(int(lengths.max()))[None, :] >= lengths[:, None]  # (B, S) as the native search sees it
        yield rows, max_lengths(pad, spec.max_len_a, spec.max_len_b, max_output_len).tolist()


def translate(translator: NativeEngine, lines: list[str], request: DecodeRequest,
              hooks: Hooks = NO_HOOKS) -> list[list[Hypothesis]]:
    """n-best hypotheses for each line, in input order. Empty lines give an empty hypothesis list;
    lines over the model's source limit are truncated with a warning. The request's ``prefixes`` (one
    per line, "" for none) are forced at the start of each output, which includes them; its
    ``constraints`` (one per line) name phrases each output must or must not contain (``constraints.py``);
    its ``step_rule`` gives the search a ban for each batch's line indices (well-formed trees)."""
    check_request(translator.name, request)
    model, policy, r = searched(translator.model), translator.policy, request
    joined = isinstance(model, PrefixLMSearch)
    one_length = joined and not model.mixes_lengths  # type: ignore[union-attr]
    sources = encode_sources(translator.tokenizer, lines, translator.max_source_tokens, hooks.warn)
    targets = translator.tokenizer.encode(list(r.prefixes)) if r.prefixes else None
    include, exclude = encode_constraints(translator.tokenizer, r.constraints)
    results: list[list[Hypothesis]] = [[] for _ in lines]
    todo = [i for i, s in enumerate(sources) if s]
    sampling = sampler(r, policy.device)
    fill = translator.tokenizer.special.fill
    for batch in length_batches([len(sources[i]) for i in todo], r.batch_tokens, same_length=one_length):
        rows = [todo[j] for j in batch]
        src, src_pad = (t.to(policy.device) for t in padded([sources[i] for i in rows], fill))
        prefix, prefix_pad = (None, None) if targets is None else padded([targets[i] for i in rows], fill)
        rules = Rules(prefix=None if prefix is None else prefix.to(policy.device),
                      prefix_len=None if prefix_pad is None else (~prefix_pad).sum(1).to(policy.device),
                      no_repeat_ngram=r.no_repeat_ngram,
                      include=None if include is None else Phrases.of([include[i] for i in rows], device=policy.device),
                      exclude=None if exclude is None else Phrases.of([exclude[i] for i in rows], right=True,
                                                                      device=policy.device),
                      step_rule=None if r.step_rule is None else r.step_rule(rows))
        with policy.autocast():
            hyps = beam_search(model, src, src_pad=src_pad, beam=r.width, alpha=r.alpha, max_len_a=r.max_len_a,
                               max_len_b=r.max_len_b, nbest=r.nbest, min_len=r.min_len,
                               max_len_cap=output_cap(translator, (~src_pad).sum(1) if joined else None),
                               rules=rules, sampling=sampling, token_scores=r.token_scores, stopping=r.stopping,
                               patience=r.patience)
        for i, h in zip(rows, hyps, strict=True):
            results[i] = h
        hooks.after_batch()
        hooks.progress(len(rows))
    return results


def searched(model: nn.Module) -> SearchModel:
    """The translator's model as the search sees it: the search of the module built (a prefix LM's
    prefix-then-steps, ``prefix_lm.py``; an encoder-decoder as ``search_model`` has it), or an ensemble
    of encoder-decoders as it is."""
    members = model.members if isinstance(model, Ensemble) else (model,)
    searches = [search_model(m) for m in members]
    if not isinstance(model, Ensemble):
        return searches[0]
    if any(isinstance(s, PrefixLMSearch) for s in searches):
        raise TbuildError("an ensemble of decoder-only translators (model.prefix_lm) is not supported yet: "
                          "decode with one run")
    return model


def output_cap(translator: NativeEngine, source: torch.Tensor | None) -> int | torch.Tensor | None:
    """The longest output (EOS included) the model's positions allow: max_positions, or for a prefix LM
    (``source`` (B,): each row's source length, EOS included) what each row's prefix (BOS, source) leaves."""
    cap = translator.max_output_len
    return cap if cap is None or source is None else (cap - source - 1).clamp(min=1)


def encode_constraints(tok: Tokenizer, constraints: Sequence[LineConstraints] | None
                       ) -> tuple[list[list[list[int]]] | None, list[list[list[int]]] | None]:
    """Each line's phrases to include and to exclude as token ids (each phrase tokenized alone); None
    for a kind no line has."""
    if not constraints:
        return None, None

    def ids(kind: str) -> list[list[list[int]]] | None:
        if not any(getattr(c, kind) for c in constraints):
            return None
        return [tok.encode(list(getattr(c, kind))) if getattr(c, kind) else [] for c in constraints]

    return ids("include"), ids("exclude")


def padded(rows: list[list[int]], fill: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, max length) ids, ``fill`` after each row (at least one column), and the (B, max length) padding
    mask, True past each row's length: what tells the padding (never the fill id)."""
    width = max(1, *(len(r) for r in rows))
    out = torch.full((len(rows), width), fill, dtype=torch.long)
    for r, ids in enumerate(rows):
        out[r, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)
    return out, torch.arange(width)[None, :] >= lengths[:, None]


def sampler(request: DecodeRequest, device: torch.device) -> Sampling | None:
    """The request's sampling as the search's step: its temperature, then its cut (top-k or top-p),
    drawn with a generator seeded by ``request.seed`` (None: beam search)."""
    if request.sampling is None:
        return None
    generator = torch.Generator(device=device)
    generator.manual_seed(request.seed)
    cut = {"topk": (top_k(request.topk),), "topp": (top_p(request.topp),), "temperature": ()}[request.sampling]
    return Sampling((temperature(request.temperature), *cut), generator)


def decode_lines(data: bytes, name: str) -> list[str]:
    """Split raw input on newlines and decode UTF-8, naming the first bad line."""
    if not data:
        return []
    raw = data.split(b"\n")
    if raw[-1] == b"":
        raw.pop()
    lines = []
    for n, line in enumerate(raw, 1):
        try:
            lines.append(line.decode("utf-8").rstrip("\r").strip())
        except UnicodeDecodeError as e:
            raise TbuildError(f"{name}: line {n} is not valid UTF-8 (byte {e.start})") from None
    return lines


def load_native(runs: list[Run], *, quantization: str | None = None, checkpoint: Path | None = None,
                average: int | None = None, device: str = "auto", notify: Callable[[str], None] = lambda _: None,
                weights: list[float] | None = None, combine: str = "logprob", compiled: bool = False,
                labels: Callable | None = None) -> NativeEngine:
    """The native translator of one run (``load_native_engine``; ``quantization`` default: the spec's
    ``decode.quantization``) or, of several, their ensemble (``labels``: of taggers or classifiers,
    ``load_ensemble``), checked for a shared tokenizer before any model is loaded, its combination rule told to
    ``notify``."""
    from .ensemble import ensemble_header, load_ensemble

    def load(run: Run, checkpoint: Path | None = None) -> NativeEngine:
        return load_native_engine(run, checkpoint=checkpoint, average=average, device=device, notify=notify,
                               quantization=quantization or run.spec.decode.quantization, compiled=compiled)

    if len(runs) == 1:
        if weights is not None:
            raise TbuildError("--weights needs several runs (an ensemble)")
        return load(runs[0], checkpoint)
    if checkpoint is not None:
        raise TbuildError("--checkpoint names one run's weights; an ensemble takes runs or checkpoint files")
    translator = load_ensemble(runs, weights, combine, load=load, labels=labels)
    notify(ensemble_header(len(runs), weights or [1.0] * len(runs), combine))
    return translator
