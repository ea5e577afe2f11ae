"""The runnable parts of the user docs (README.md, docs/*.md): fenced YAML blocks and `tbuild …` command lines,
each with the file and line it starts on. A fence preceded by ``<!-- fragment -->`` (on the line just before
it) is a fragment, not meant to run alone: it is extracted but marked so."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
FRAGMENT = "<!-- fragment -->"
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*(\S*)")
INLINE = re.compile(r"(?<!`)`(tbuild [^`]+)`(?!`)")
COMMENT = re.compile(r"(^|\s)#.*$")  # a shell comment: '#' at the start of a word
SPEC_LIKE = {"extends", "model", "data", "train", "decode", "base", "space", "rows", "grid"}


@dataclass(frozen=True)
class Snippet:
    """One runnable part of a page: ``kind`` is yaml (a fence's body), cli (a command line) or unlabelled
    (a fence without ``yaml`` that holds a spec, a sweep or a study)."""

    file: str
    line: int
    kind: str
    text: str
    fenced: bool = True  # a cli line of a fence (copied as is), else an inline `tbuild …` synopsis
    fragment: bool = False

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}"


def pages() -> list[Path]:
    """README.md and every page of docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def extract(path: Path) -> list[Snippet]:
    """The YAML blocks and command lines of one page, in order."""
    name = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.name
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Snippet] = []
    i = prose = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        out += inline_commands(name, lines[prose:i], prose + 1)
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(opening.group(2)):
            end += 1
        fragment = i > 0 and lines[i - 1].strip() == FRAGMENT
        body = [line[len(opening.group(1)):] for line in lines[i + 1:end]]
        if opening.group(3) == "yaml":
            out.append(Snippet(name, i + 2, "yaml", "\n".join(body) + "\n", fragment=fragment))
        elif opening.group(3) in ("", "bash", "sh", "console"):
            out += [Snippet(name, i + 2 + k, "cli", command, fragment=fragment)
                    for k, line in enumerate(body) if (command := tbuild_command(line))]
            if not opening.group(3) and looks_like_a_spec(body):
                out.append(Snippet(name, i + 2, "unlabelled", "\n".join(body) + "\n", fragment=fragment))
        i = prose = end + 1
    return out + inline_commands(name, lines[prose:], prose + 1)


def inline_commands(name: str, lines: list[str], first: int) -> list[Snippet]:
    """The `tbuild …` spans of prose (lines from line ``first`` on); a span may run over a line break."""
    text = "\n".join(lines)
    return [Snippet(name, first + text.count("\n", 0, m.start()), "cli", " ".join(m.group(1).split()), fenced=False)
            for m in INLINE.finditer(text)]


def looks_like_a_spec(body: list[str]) -> bool:
    """An unlabelled fence that holds a spec, a sweep or a study (it should say ```yaml, to be run)."""
    try:
        data = yaml.safe_load("\n".join(body))
    except yaml.YAMLError:
        return False
    return isinstance(data, dict) and bool(set(data) & SPEC_LIKE)


def tbuild_command(line: str) -> str | None:
    """The `tbuild …` (or ``python -m tbuild.cli …``) command a shell line runs, from ``tbuild`` on, without its
    comment, prompt, pipes and redirections; None when it runs none."""
    line = COMMENT.sub("", line.strip().removeprefix("$ "))
    for part in re.split(r"\|(?!\|)|;|&&?", line):
        words = part.split()
        for k, word in enumerate(words):
            if word == "tbuild" or word.endswith("/tbuild"):
                return " ".join(["tbuild", *words[k + 1:]])
            if word == "tbuild.cli" and k > 0 and words[k - 1] == "-m":
                return " ".join(["tbuild", *words[k + 1:]])
    return None


def all_snippets() -> list[Snippet]:
    return [s for page in pages() for s in extract(page)]
