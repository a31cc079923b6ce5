"""The engine profile: how much prompt and output a Turn's model is given (no dspy here).

``default`` is the program as it always was. ``small`` is for a model of a few billion
parameters or less on a CPU (the embedded Qwen2.5-Coder-1.5B; docs/engine.md#the-small-model-
profile): compact prompts whose start never changes (so llama.cpp's prefix cache is reused), no
triage when a dataset is selected, code-first Flex (engine/codefirst.py), host-recognized
completion in RLM (engine/completion.py), the action output capped and a little temperature
after a repeated cell. ``[engine] profile = "auto"`` (the default) picks ``small`` exactly when
the root role runs on the embedded model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from fleet_core.config import EngineSettings

ProfileName = Literal["default", "small"]

MANIFEST_CHARS = 1_500  # the small profile's workspace listing, at most
PREVIEW_LINES = 6  # lines of the dataset shown to the model
PREVIEW_LINE_CHARS = 160
CATALOG_CHARS = 600  # the small profile's Skills catalog: names and short descriptions
HISTORY_CHARS = 1_500
REPEAT_TEMPERATURE = 0.4  # the next step's temperature after a repeated cell
CONTEXT_TOKENS = 8_192  # the embedded server's n_ctx by default ([local_model] n_ctx)
PROGRAM_TOKENS = 1_200  # a cut program is asked again with up to this much room

_ENTRY = re.compile(r"^(?P<path>\S.*?)  \((?P<size>\d+) bytes, sha256 [0-9a-f]+\)(?P<rest>.*)$")
_SKILL_ROW = re.compile(r'<skill name="(?P<name>[^"]*)">(?P<desc>.*?)</skill>', re.DOTALL)


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """The resolved profile of one Turn."""

    name: ProfileName = "default"
    max_tokens: int | None = None  # one code step's output cap (small only)
    repairs: int = 2  # code-first Flex's repairs after a failed program
    extra_repairs: int = 0  # more, each only while the Turn's time allows (code-first)
    # the embedded llama.cpp server: llama.cpp's own sampling fields (repeat_penalty) are sent
    constrained: bool = False
    grammar: bool = False  # and the code-first reply is held to a GBNF grammar
    self_check: bool = False  # code-first: the model checks its first good result once
    vote: bool = False  # code-first: a second sampled program checks the first one's figures
    fresh_last: bool = False  # code-first: the last program is sampled afresh, not repaired
    fresh_retry: bool = False  # code-first: one more program, sampled afresh, when all failed
    # the model's context window: each code-first call's output budget is what it leaves
    context_tokens: int = CONTEXT_TOKENS
    program_tokens: int = PROGRAM_TOKENS  # the most a re-ask for a cut program is given

    @property
    def small(self) -> bool:
        return self.name == "small"


DEFAULT = EngineProfile()


def resolve_profile(
    settings: EngineSettings, *, embedded_root: bool, context_tokens: int | None = None
) -> EngineProfile:
    """``settings.profile``, with ``auto`` meaning ``small`` on the embedded model;
    ``context_tokens`` is the model's context window when known (the embedded server's)."""
    name: ProfileName
    if settings.profile == "auto":
        name = "small" if embedded_root else "default"
    else:
        name = settings.profile
    if name == "default":
        return DEFAULT
    return EngineProfile(
        name="small",
        max_tokens=settings.small_max_tokens,
        repairs=settings.small_repairs,
        extra_repairs=settings.small_extra_repairs,
        constrained=embedded_root,
        grammar=embedded_root and settings.small_grammar,
        self_check=settings.small_self_check,
        vote=settings.small_vote,
        fresh_last=settings.small_fresh_last,
        fresh_retry=settings.small_fresh_retry,
        context_tokens=context_tokens or CONTEXT_TOKENS,
        program_tokens=max(PROGRAM_TOKENS, settings.small_max_tokens),
    )


def _clip_line(line: str, limit: int = PREVIEW_LINE_CHARS) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


def compact_manifest(manifest: str, *, dataset_path: str | None = None) -> str:
    """The workspace as names and sizes only (no sha256, no previews), bounded; the bundled
    Skills' files are left out (the catalog names them), and the dataset keeps a short preview.
    Inputs (``files/``) come first, so a Turn's new artifacts never move the prompt's start."""
    blocks: list[list[str]] = []
    current: str | None = None
    shown = 0
    for line in manifest.splitlines():
        match = _ENTRY.match(line)
        if match is None:
            if line.startswith("    "):
                if current is not None and current == dataset_path and shown < PREVIEW_LINES:
                    blocks[-1].append("    " + _clip_line(line[4:]))
                    shown += 1
                continue
            current = None
            if not line.startswith("skills/"):
                blocks.append([_clip_line(line)])  # a path-only entry or "... more files"
            continue
        current = match.group("path")
        if current.startswith("skills/"):
            current = None
            continue
        shown = 0
        rest = " [binary]" if "[binary]" in match.group("rest") else ""
        blocks.append([f"{current} ({match.group('size')} bytes){rest}"])
    blocks.sort(key=lambda block: not block[0].startswith("files/"))  # stable: order kept
    text = "\n".join(line for block in blocks for line in block) or "(the workspace is empty)"
    if len(text) > MANIFEST_CHARS:
        text = text[: MANIFEST_CHARS - 4].rsplit("\n", 1)[0] + "\n..."
    return text


JSON_PREVIEW_CHARS = 600


def dataset_preview(manifest: str, dataset_path: str) -> str:
    """The first lines of the dataset as the manifest previewed them ("" when it did not). A
    JSON file's preview is its start with the whitespace collapsed, so the keys of its first
    records show (six pretty-printed lines hold hardly any)."""
    lines: list[str] = []
    inside = False
    for line in manifest.splitlines():
        match = _ENTRY.match(line)
        if match is not None:
            inside = match.group("path") == dataset_path
            continue
        if inside and line.startswith("    "):
            lines.append(line[4:])
    if dataset_path.lower().endswith((".json", ".geojson")):
        flat = " ".join(" ".join(lines).split())
        return flat if len(flat) <= JSON_PREVIEW_CHARS else flat[: JSON_PREVIEW_CHARS - 3] + "..."
    return "\n".join(_clip_line(line) for line in lines[:PREVIEW_LINES])


def compact_catalog(catalog: str) -> str:
    """The Skills catalog as ``name: description`` lines, bounded."""
    rows = [
        f"{m.group('name')}: {_clip_line(' '.join(m.group('desc').split()), 100)}"
        for m in _SKILL_ROW.finditer(catalog)
    ]
    if not rows:
        return catalog[:CATALOG_CHARS]
    text = "\n".join(rows)
    if len(text) > CATALOG_CHARS:
        text = text[: CATALOG_CHARS - 4].rsplit("\n", 1)[0] + "\n..."
    return text


def compact_history(history: str) -> str:
    """The newest ``HISTORY_CHARS`` of the Session history."""
    return history if len(history) <= HISTORY_CHARS else "..." + history[-HISTORY_CHARS:]


_ARTIFACT = re.compile(r"artifacts/[A-Za-z0-9_.\-/]*[A-Za-z0-9_]\.[A-Za-z0-9]{1,8}")


_TEMPLATE = re.compile(r"\{\s*\"[^{}]*\}")
_TEMPLATE_KEY = re.compile(r"\"([^\"]{1,40})\"\s*:")


def json_template_keys(task: str) -> list[str]:
    """The keys of the one JSON object template a task spells out (``{"item": ..., "qty":
    ...}``), in order; empty when it spells none or several (then no key is required)."""
    templates = _TEMPLATE.findall(task)
    if len(templates) != 1:
        return []
    keys: list[str] = []
    for key in _TEMPLATE_KEY.findall(templates[0]):
        if key not in keys:
            keys.append(key)
    return keys[:12]


def named_artifacts(task: str) -> list[str]:
    """The ``artifacts/...`` files a task names, in order, without duplicates (at most 5)."""
    found: list[str] = []
    for match in _ARTIFACT.finditer(task):
        path = match.group(0)
        if ".." not in path.split("/") and path not in found:
            found.append(path)
    return found[:5]


def manifest_inputs(manifest: str, *, limit: int = 10) -> list[str]:
    """The workspace's input files (``files/...``, not binary) in manifest order, at most
    ``limit``."""
    found: list[str] = []
    for line in manifest.splitlines():
        match = _ENTRY.match(line)
        if match is None or "[binary]" in match.group("rest"):
            continue
        if match.group("path").startswith("files/") and len(found) < limit:
            found.append(match.group("path"))
    return found
