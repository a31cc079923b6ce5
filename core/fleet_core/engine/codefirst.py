"""Code-first Flex: the small-model profile's code route (docs/engine.md#code-first-flex).

A small model does not drive an iterative REPL well (it re-sends the same cell and never calls
SUBMIT: docs/benchmarks.md), but it writes a short complete program well. So the host asks for
one program that reads the inputs, writes the artifact the task names and prints the answer;
runs it; and on an error sends back only the error, for at most ``profile.repairs`` repairs
(and ``profile.extra_repairs`` more while the Turn's time allows).
The host recognizes completion itself: the program ran and every artifact the task names
exists. The answer is what the program printed (or, if it printed nothing, the head of those
artifacts), never text the model retyped.

The conversation is a plain chat whose start never changes: the system message is a constant
and the first user message holds the inputs, so each repair is the previous prompt plus the
model's program and the error, and llama.cpp reuses its cached prefix. Replies that are only
code (fenced or not) are accepted. On the embedded llama.cpp server ``repeat_penalty`` is sent
(and, if configured, a GBNF grammar holds the reply to a fenced Python block). The first program
is asked at the configured temperature, every repair at ``REPAIR_TEMPERATURE``; a reply that
repeats an earlier failed program is not run again, the model is asked again.

What the host judges beyond "it raised" lives in engine/repairs.py (issue 22's levers): a reply
cut by the output cap is asked again with more room and never run; the tables' columns are shown
exactly and a missing column's repair names the nearest real ones; a printed error is not a
success; a failure seen again gets the failing line, then the inputs' shape, then a simpler
plan; a task's ``@name[value]`` format is checked. The prelude defines the statistics helpers
(engine/stathelpers.py). A program that ran cleanly but left a named artifact unwritten or some
tags unprinted is continued in the same session (``_continue``), and with ``[engine]
small_vote`` a second, independently sampled program checks the first one's figures, a third
deciding when they differ (``_decide``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from dspy.lm15 import Config, Message, Request, TextPart
from dspy.primitives.code_interpreter import CodeExecutionError

from fleet_core.engine.context import TurnInputs
from fleet_core.engine.control import TurnControl, TurnStopped
from fleet_core.engine.daterewrites import DateOrder, date_order, sorted_by_date
from fleet_core.engine.fitrewrites import FIT_BY_NAME_SOURCE
from fleet_core.engine.grouprewrites import grouped_cell, grouped_saved, parse_grouped
from fleet_core.engine.inputshape import has_structure, structure_cell
from fleet_core.engine.inspection import (
    ArtifactReport,
    asks_about_variants,
    asks_per_group,
    asks_whole_rows,
    group_words,
    inspection_cell,
    parse_inspection,
)
from fleet_core.engine.interpreter import TurnInterpreter
from fleet_core.engine.profile import (
    EngineProfile,
    compact_manifest,
    dataset_preview,
    json_template_keys,
    manifest_inputs,
    named_artifacts,
)
from fleet_core.engine.programstate import state_block, state_cell
from fleet_core.engine.repairs import (
    SHAPE_CELL,
    SIMPLER,
    accessor_hint,
    case_renamed,
    column_hint,
    columns_block,
    converted_accessor,
    dated_grouping,
    estimate_tokens,
    failing_line,
    format_line,
    format_problem,
    grouped_key_kept,
    grouped_label_read,
    hidden_error,
    looks_cut,
    misshapen,
    numeric_only_added,
    own_raise_hint,
    respelled,
    restored_read,
    same_answer,
    table_columns,
    table_label,
    tag_values,
    unfinished,
)
from fleet_core.engine.rewrites import (
    FRESH_NAMESPACE,
    FRESH_NAMESPACE_SOURCE,
    KEEP_LABELS_SOURCE,
    prepare,
    rederived,
)
from fleet_core.engine.rowsrewrites import parse_rows, rows_cell, rows_saved, saved_name
from fleet_core.engine.statprompt import (
    result_cell,
    result_hint,
    stats_help,
    unpacked_by_name,
    unpacked_call,
    unpacking_hint,
)
from fleet_core.engine.tagrewrites import YES_NO_SOURCE, yes_no_fields, yes_no_names
from fleet_core.engine.textinputs import table_reader, text_block, text_inputs

SYSTEM = """You write one complete Python 3 program for the user's task. It runs in a sandbox \
whose working directory is the workspace: input files are under files/, and output files go \
under artifacts/ (create it with os.makedirs("artifacts", exist_ok=True)). Use pandas for \
tables (CSV). Read text files such as logs line by line with open(). Read a .json file \
with json.load and a .jsonl file with json.loads on each line, then loop over the records in \
plain Python (not pandas).
Start the program with comments that restate the task: for each file the task names, one \
comment saying exactly what that file must contain, and one comment saying what to print.
Then the program must:
1. read the input file(s) named in the request;
2. compute the result in simple steps, one per line, with plain for loops (no nested \
comprehensions);
3. write every file the task names, under artifacts/, with exactly the content the task asks \
for (a pandas groupby result keeps its group labels: call .reset_index() before \
to_csv(index=False));
4. print the answer: the computed figures themselves, each with its label (print a table \
with print(table.to_string(index=False)), never its index column).
Reply with only the program, in one ```python block, with no explanation.

An example. Task: List the shipments heavier than 20 kg in files/shipments.json, save them to \
artifacts/heavy.json and say how many there are and their total weight.
```python
# artifacts/heavy.json: the shipment records heavier than 20 kg, as a JSON list
# print: how many heavy shipments there are, and their total weight
import json
import os

os.makedirs("artifacts", exist_ok=True)
with open("files/shipments.json") as f:
    shipments = json.load(f)
heavy = [s for s in shipments if s["weight_kg"] > 20]
with open("artifacts/heavy.json", "w") as f:
    json.dump(heavy, f, indent=1)
total = sum(s["weight_kg"] for s in heavy)
print(f"{len(heavy)} shipments are heavier than 20 kg; their total weight is {total} kg.")
```"""
"""The code-first system prompt: a constant, the cached start of every call."""

REPAIR = (
    "The program failed:\n{error}\n"
    "Fix the line that fails; if it does several things at once, split it into simple steps "
    "with plain for loops.\nReply with the whole corrected program only."
)
MISSING = "The program ran but did not write {paths}.\nReply with the whole corrected program only."
REPEATED = "You sent the same program again, and it fails the same way:\n{error}"
REPLY_ONLY = "Reply with the whole corrected program only."
RESENT = "repeated a failed program"  # an attempt that resent a failed program: never run
FORMAT = "(the answer's format)"  # the doubt key of a printed answer's format
INCOMPLETE = (  # a next step that sees what the first one printed
    "The program ran and printed:\n{output}\nBut {problem}. The task says how to print the "
    "answer: follow it exactly, and compute what is still missing.\n"
    "Reply with the whole corrected program only."
)
SHAPE_CHARS = 1_500  # the input's real shape, shown once as a repair's help
MISSHAPEN = "The program ran but {problem}.\nReply with the whole corrected program only."
SELF_CHECK = (
    "The program ran. Its result:\n{result}\n\n"
    "Check it against the task: {task}\n"
    "Read your program again: does it compute exactly what the task asks, from all of the "
    "input? If it does, reply with only: OK\n"
    "If not, reply with the whole corrected program only."
)
HIDDEN = (
    "The program ran but printed an error instead of the answer: {said}\n"
    "Printing a message in place of a failing step is not a fix: do the step itself, "
    "correctly.{hint}\nReply with the whole corrected program only."
)
CUT = (
    "Your program was cut off: it was longer than the {tokens} tokens a reply may hold. Write "
    "a shorter program (fewer comments, no repeated code), in one ```python block."
)
MISREAD = "a text or JSON file read as a table"  # the key of a program stopped before it ran
CUT_RETRIES = 2  # a cut reply is asked again with more room at most this many times
CONTEXT_MARGIN = 48  # tokens kept free of prompt and reply (chat template, estimate error)
MIN_ROOM = 256  # older repairs are dropped from the chat when less than this would be left
QUIET = (
    "The program ran but printed nothing. It must print the answer with the computed figures.\n"
    "Reply with the whole corrected program only."
)
ERROR_CHARS = 1_200  # the error fed back: its last lines
OUTPUT_CHARS = 2_000  # the answer built from printed output
MEMORY_CHARS = 600
#: Imported for the program before it runs: a small model often uses os, json or pd
#: unimported and then fails to add the import in its repairs (docs/benchmarks.md).
PRELUDE = (
    "import collections, csv, json, math, os, re, statistics, warnings\n"
    "warnings.simplefilter('ignore', DeprecationWarning)  # not the answer's business\n"
    "warnings.simplefilter('ignore', FutureWarning)\n"
    "try:\n"
    "    import pandas as pd\n"
    "except ImportError:\n"
    "    pass"
)

#: A reply that is one fenced Python block (llama.cpp GBNF): no prose, a closing fence.
CODE_GRAMMAR = r"""root ::= "```python\n" line+ "```"
line ::= [^`\n]* "\n"
"""
REPEAT_PENALTY = 1.1  # llama_cpp.server's own default, sent explicitly
#: The first program is asked at ``[llm] temperature`` (greedy by default); every repair is
#: sampled, so that it can leave the failed program's structure (docs/benchmarks.md).
REPAIR_TEMPERATURE = 0.7
#: ``[engine] small_vote``: the second and third programs are sampled from the first prompt alone
#: (a fresh chat on the cached prefix), at this temperature, so they are independent draws.
VOTE_TEMPERATURE = 0.7
#: ``[engine] small_fresh_retry``: a Turn whose programs all failed gets one more, sampled
#: afresh, only if it is this young (seconds): every Turn stays well under 3 minutes.
FRESH_RETRY_BEFORE = 100.0
#: ``[engine] small_extra_repairs``: a repair beyond ``small_repairs`` is begun only if, at the
#: run's pace, it would end within this many seconds: every Turn stays under 3 minutes.
EXTRA_REPAIR_BEFORE = 120.0
HOST_FIXES = 3  # programs run again mended by the host (engine/repairs.py), at most, per reply
VOTE_MARGIN = 1.5  # a vote's next program is asked only if the deadline leaves this many calls
CONTINUATIONS = 2  # steps that continue a program that ran cleanly but left work undone
CONTINUE = (
    "The program ran and printed:\n{output}\nIt is not finished: {what}.\n"
    "Its variables are still defined (the same Python session). Reply with only the code that "
    "finishes the task from there, in one ```python block; do not repeat what it already did."
)

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_FIELD = re.compile(r"\[\[ ## \w+ ## \]\]")


def json_shapes(task: str, targets: list[str]) -> list[tuple[str, list[str]]]:
    """The named JSON artifacts to check, each with the keys its object must have: the task's
    one template's keys when it names one JSON artifact, else none (it must only parse)."""
    paths = [p for p in targets if p.lower().endswith(".json")]
    keys = json_template_keys(task) if len(paths) == 1 else []
    return [(path, keys) for path in paths]


def failure_summary(attempts: list[Attempt]) -> str:
    """How the programs failed, for the failed Turn's error: the last exception line (not the
    repair's help or instructions), else what the host found last, without its closing line."""
    if not attempts:
        return "no program"
    raised = next((a for a in reversed(attempts) if a.exception), None)
    said = raised.exception if raised else _body(attempts[-1].error or "") or "no error text"
    return _tail(" ".join(said.split()), 300)


class CodeFirstFailed(RuntimeError):
    """The program still failed after every repair (the Turn fails with this message)."""


def extract_code(reply: str) -> str:
    """The program in a reply: the first fenced block, else the whole reply (code only)."""
    text = reply.split("</think>", 1)[-1]
    match = _FENCE.search(text)
    code = match.group(1) if match is not None else _FIELD.sub("", text)
    return code.strip()


def approves(reply: str, checked: str) -> bool:
    """Whether a reply to the self-check keeps the checked program: it says OK (or other
    prose, no program), or sends the same program again."""
    text = reply.split("</think>", 1)[-1].strip()
    code = extract_code(text)
    if normalized(code) == normalized(checked) or code.strip(" .!`").upper() in ("OK", "YES", ""):
        return True
    if _FENCE.search(text) is not None:
        return False
    try:
        compile(code, "<reply>", "exec")
    except SyntaxError:
        return True  # prose
    return False


def normalized(code: str) -> str:
    """``code`` with blank lines, comments-only lines and trailing spaces dropped."""
    lines = [line.rstrip() for line in code.splitlines()]
    return "\n".join(line for line in lines if line.strip() and not line.lstrip().startswith("#"))


def _body(message: str) -> str:
    """A feedback message without its closing "reply with the program" line."""
    return message.replace(REPLY_ONLY, "").rstrip()


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "..." + text[-(limit - 3) :]


def error_digest(text: str) -> str:
    """What a failed program is told: the exception line, the program's own frames (with their
    source lines) and the last line, not a library's deep traceback."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return "(no error text)"
    keep = [lines[0]]
    frames: list[str] = []
    for index, line in enumerate(lines):
        if '"<cell-' in line:
            frames.append(line.strip())
            following = lines[index + 1].strip() if index + 1 < len(lines) else ""
            if following and not following.startswith(("File ", "^", "~")):
                frames.append("    " + following)
    keep += frames[-6:]
    if lines[-1] != lines[0]:
        keep.append(lines[-1])
    return _tail("\n".join(keep), ERROR_CHARS)


def task_inputs(inputs: TurnInputs) -> list[str]:
    """The input files the task names, with the dataset first."""
    paths = [p for p in manifest_inputs(inputs.workspace_manifest) if p in inputs.task]
    if inputs.dataset is not None and inputs.dataset.path not in paths:
        paths.insert(0, inputs.dataset.path)
    return paths


def task_tables(inputs: TurnInputs) -> dict[str, list[tuple[str, str]]]:
    """The columns of the dataset and of the CSV inputs the task names (from the previews)."""
    return table_columns(inputs.workspace_manifest, task_inputs(inputs))


def task_texts(inputs: TurnInputs) -> dict[str, str]:
    """The line-oriented text inputs among them, with their first lines (engine/textinputs.py)."""
    return text_inputs(inputs.workspace_manifest, task_inputs(inputs))


_NEVER_RAN = re.compile(r"^(?:SyntaxError|IndentationError|TabError)\b")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b")


def exception_line(digest: str) -> str:
    """The exception a digest reports (``KeyError: 'x'``): its last line naming one, else its
    last line (the key by which a failure is known again)."""
    lines = [line.strip() for line in digest.splitlines() if line.strip()]
    for line in reversed(lines):
        if _EXCEPTION.match(line):
            return line
    return lines[-1] if lines else ""


def first_prompt(inputs: TurnInputs, structures: str = "") -> str:
    """The first user message: the workspace (names, sizes), the dataset's first lines, the
    exact column names of the tables, the inputs' ``structures`` (a JSON input's reader and
    keys, a table's rows and missing values: engine/inputshape.py), the statistics helpers
    when the task asks for statistics, the task and, last, its answer format."""
    dataset = inputs.dataset
    parts = ["Workspace files:\n" + compact_manifest(inputs.workspace_manifest)]  # no previews
    if dataset is not None:
        head = dataset_preview(inputs.workspace_manifest, dataset.path)
        block = f"Selected dataset: {dataset.path} ({dataset.size_bytes} bytes)"
        if head:
            block += f". Its first lines:\n{head}"
        parts.append(block)
    columns = columns_block(task_tables(inputs))
    if columns:
        parts.append(columns)
    if structures.strip():
        parts.append(structures.strip())
    texts = text_block(task_texts(inputs))
    if texts:
        parts.append(texts)
    memory = inputs.memory_summary.strip()
    if memory:
        parts.append(_tail(memory, MEMORY_CHARS))
    helpers = stats_help(inputs.task)
    if helpers:
        parts.append(helpers)
    parts.append(f"Task: {inputs.task}")
    answer_format = format_line(inputs.task)
    if answer_format:
        parts.append(answer_format)
    return "\n\n".join(parts)


def prelude() -> str:
    """The host's first cell: ``PRELUDE``, the label keeper of engine/rewrites.py and the fit
    unpacker of engine/fitrewrites.py, then the statistics and log helpers' source
    (engine/stathelpers.py, engine/loghelpers.py, without their ``__future__`` imports)."""
    from fleet_core.engine import loghelpers, stathelpers

    sources = [
        Path(module.__file__ or "")
        .read_text(encoding="utf-8")
        .replace("from __future__ import annotations\n", "")
        for module in (stathelpers, loghelpers)
    ]
    fixes = [KEEP_LABELS_SOURCE, FIT_BY_NAME_SOURCE, YES_NO_SOURCE]
    return "\n".join([PRELUDE, *fixes, *sources, FRESH_NAMESPACE_SOURCE])


@dataclass(frozen=True, slots=True)
class Reply:
    """One model reply and how it ended."""

    text: str
    budget: int | None  # the output budget it was asked with
    finish_reason: str | None = None
    output_tokens: int | None = None

    @property
    def code(self) -> str:
        return extract_code(self.text)

    @property
    def cut(self) -> bool:
        return looks_cut(
            self.text,
            self.code,
            finish_reason=self.finish_reason,
            budget=self.budget,
            output_tokens=self.output_tokens,
        )


@dataclass(slots=True)
class Attempt:
    code: str
    error: str | None = None
    output: str = ""
    quiet: bool = False  # it ran and wrote the named artifacts but printed nothing
    advisory: bool = False  # it ran; the host only doubts an artifact's content
    reports: list[ArtifactReport] = field(default_factory=list)
    exception: str = ""  # a program that raised: its exception line
    cut: bool = False  # the reply was cut by the output cap: never run
    unfinished: str = ""  # it ran cleanly but left this undone (a continuation may finish it)

    @property
    def ran_to_end(self) -> bool:
        """It ran to its end and did the work, but printed nothing or left a doubt."""
        return self.quiet or self.advisory


@dataclass(slots=True)
class _Chat:
    """One Turn's conversation with the model and what ``CodeFirst.run`` keeps across it."""

    prompt: Any  # the first prompt (a fresh sample's whole chat)
    messages: list[Any]
    attempts: list[Attempt] = field(default_factory=list)
    failed: set[str] = field(default_factory=set)  # the failed programs, normalized
    last: Attempt | None = None  # the last program that failed
    temperature: float | None = None
    runs: int = 0  # programs run
    asks: int = 0  # replies asked for
    checked: Attempt | None = None  # the good result the model was asked to check
    checked_at: int = 0  # the run that produced it

    def tell(self, text: str) -> None:
        """A failure told: the next program is a repair, sampled warmer."""
        self.temperature = REPAIR_TEMPERATURE
        self.messages.append(Message.user(text))


@dataclass(slots=True)
class CodeFirstResult:
    answer: str
    attempts: list[Attempt] = field(default_factory=list)
    fallback: str = ""  # why the answer comes from what a failing program left ('' : it ran)
    vote: str = ""  # how ``small_vote`` decided ('' : no vote)


class CodeFirst:
    """One code-first run on one interpreter (see the module docstring)."""

    def __init__(
        self,
        *,
        lm: Any,
        control: TurnControl,
        interpreter: Callable[[], TurnInterpreter],
        profile: EngineProfile,
        system: str | None = None,
    ) -> None:
        self.lm = lm  # a MeteredLM: each call is charged and reported
        self.system = system or SYSTEM  # an approved program's ``codefirst`` replaces it
        self.control = control
        self.make_interpreter = interpreter
        self.profile = profile
        self._targets: list[str] = []
        self._inspect_code = ""
        self._doubted: dict[str, set[str]] = {}  # path -> the programs its doubt was said to
        self._misshaped: dict[str, str] = {}  # tag -> a value printed in the wrong shape
        self._task = ""
        self._tables: dict[str, list[tuple[str, str]]] = {}  # the inputs' columns, exactly
        self._sources: list[str] = []  # the inputs a repair's help may show the shape of
        self._seen: set[str] = set()  # the failures already told (exception lines)
        self._help_level = 0  # how far the help for a failure seen again has gone
        self._raised = False  # the last program raised: the next whole one starts afresh
        self._yes_no: list[str] = []  # the task's @name[yes or no] tags
        self._date_order: DateOrder | None = None  # the one date column, and the end kept
        self._kept = ""  # the code whose names the sandbox holds (the host's fixes read it)
        self._calls = 0  # model calls made by this run (a vote's cost estimate)
        self._started = time.monotonic()
        self._continued = 0  # continuation steps taken
        self._vote = ""

    def _ask(
        self, messages: list[Any], temperature: float | None, budget: int | None = None
    ) -> str:
        return self._call(messages, temperature, budget).text

    def _call(
        self, messages: list[Any], temperature: float | None, budget: int | None = None
    ) -> Reply:
        extensions: dict[str, Any] | None = None
        if self.profile.constrained:
            extensions = {"repeat_penalty": REPEAT_PENALTY}
            if self.profile.grammar:
                extensions["grammar"] = CODE_GRAMMAR
        if temperature is None:  # an explicit Request carries no LM defaults: the configured one
            temperature = (getattr(self.lm, "kwargs", None) or {}).get("temperature")
        if budget is None:
            budget = self._budget(messages, self.profile.max_tokens)
        config = Config(max_tokens=budget, temperature=temperature, extensions=extensions)
        model = str(getattr(self.lm, "model", "") or "")
        request = Request(model=model, system=self.system, messages=tuple(messages), config=config)
        self._calls += 1
        response = self.lm(request)
        text = getattr(response, "text", None)
        if text is None and isinstance(response, list) and response:
            first = response[0]
            text = first.get("text") if isinstance(first, dict) else first
        usage = getattr(response, "usage", None)
        tokens = getattr(usage, "output_tokens", None)
        return Reply(
            text=str(text or ""),
            budget=budget,
            finish_reason=getattr(response, "finish_reason", None),
            output_tokens=tokens if isinstance(tokens, int) else None,
        )

    def _prompt_tokens(self, messages: list[Any]) -> int:
        texts = [self.system] + [str(getattr(m, "text", "") or "") for m in messages]
        return sum(estimate_tokens(t) for t in texts) + 4 * len(texts)  # the chat template

    def _budget(self, messages: list[Any], wanted: int | None) -> int | None:
        """The output budget of the next call: ``wanted``, bounded by the context left."""
        left = self.profile.context_tokens - self._prompt_tokens(messages) - CONTEXT_MARGIN
        if wanted is None:
            return None
        return max(64, min(wanted, left))

    def _fit(self, messages: list[Any]) -> None:
        """Drop the oldest program and its error (after the inputs) while the chat leaves less
        than ``small_max_tokens`` (at least ``MIN_ROOM``) for the reply (the prefix cache is
        lost, the Turn goes on)."""
        needed = max(MIN_ROOM, self.profile.max_tokens or 0)
        while len(messages) > 3 and (
            self.profile.context_tokens - self._prompt_tokens(messages) - CONTEXT_MARGIN < needed
        ):
            del messages[1:3]

    def _reply(self, messages: list[Any], temperature: float | None) -> Reply:
        """A program reply that was not cut by the output cap, if the context has room for one:
        a reply that stopped for length is asked again (the same chat) with more room, at most
        ``CUT_RETRIES`` times; the last reply is returned cut when there is no more room."""
        self._fit(messages)
        budget = self._budget(messages, self.profile.max_tokens)
        reply = self._call(messages, temperature, budget)
        for _ in range(CUT_RETRIES):
            if not reply.cut or budget is None:
                break
            room = self._budget(messages, self.profile.program_tokens) or 0
            if room <= budget:
                break  # no more room: the caller asks for a shorter program
            budget = min(room, budget * 3)
            self.control.check()
            reply = self._call(messages, temperature, budget)
        return reply

    def run(self, inputs: TurnInputs) -> CodeFirstResult:
        targets = self._targets = named_artifacts(inputs.task)
        shapes = json_shapes(inputs.task, targets)
        dataset = inputs.dataset.path if inputs.dataset is not None else None
        sources = sorted(  # the inputs the task names, then the dataset (a doubt shows its start)
            manifest_inputs(inputs.workspace_manifest),
            key=lambda path: (path not in inputs.task, path != dataset),
        )
        whole_rows = asks_whole_rows(inputs.task)  # rows kept, not groups: no per-group doubt
        self._inspect_code = (
            inspection_cell(
                targets,
                shapes,
                sources,
                grouped=asks_per_group(inputs.task) and not whole_rows,
                keys=group_words(inputs.task),
                whole_rows=whole_rows,
                variants=asks_about_variants(inputs.task),
            )
            if targets
            else ""
        )
        self._doubted = {}
        self._misshaped = {}
        self._task = inputs.task
        self._yes_no = yes_no_names(inputs.task)
        self._tables = task_tables(inputs)
        self._date_order = date_order(inputs.task, self._tables)  # the latest row kept: by date
        self._texts = task_texts(inputs)
        self._sources = [p for p in sources if p in inputs.task or p == dataset][:4]
        self._seen, self._help_level, self._raised, self._kept = set(), 0, False, ""
        self._started, self._calls, self._continued, self._vote = time.monotonic(), 0, 0, ""
        interpreter = self.make_interpreter()
        try:
            self._host_cell(interpreter, prelude(), "(host: prelude)")
            prompt = Message.user(first_prompt(inputs, self._structures(interpreter)))
            chat = _Chat(prompt=prompt, messages=[prompt])
            before = self._inspect(interpreter)
            while self._may_ask(chat):
                result = self._step(interpreter, chat)
                if result is not None:
                    return result
            result = self._last_resort(interpreter, chat, before)
            if result is not None:
                return result
            summary = failure_summary(chat.attempts)
            raise CodeFirstFailed(
                f"code-first: the program failed {len(chat.attempts)} time(s); {summary}"
            )
        finally:
            interpreter.shutdown()

    def _step(self, interpreter: TurnInterpreter, chat: _Chat) -> CodeFirstResult | None:
        """One reply asked for and dealt with: the Turn's result when it settles the Turn,
        else None (the chat holds what the model is told next)."""
        self.control.check()
        chat.asks += 1
        fresh = self._fresh(chat.runs, chat.checked, chat.attempts)
        reply = self._reply([chat.prompt] if fresh else chat.messages, chat.temperature)
        code = reply.code
        chat.messages.append(Message.assistant([TextPart(f"```python\n{code}\n```")]))
        if reply.cut:  # never run, never "the same program": ask for a shorter one
            chat.attempts.append(Attempt(code=code, error="cut by the output cap", cut=True))
            chat.messages.append(Message.user(CUT.format(tokens=reply.budget)))
            return None
        checked = chat.checked
        if (
            checked is not None
            and chat.runs == chat.checked_at
            and approves(reply.text, checked.code)
        ):
            return CodeFirstResult(self._answer(checked), chat.attempts)
        if self._not_run(interpreter, chat, code):
            return None
        code, attempt = self._run_mended(interpreter, chat, code)
        return self._settle(interpreter, chat, code, attempt)

    def _not_run(self, interpreter: TurnInterpreter, chat: _Chat, code: str) -> bool:
        """Whether the reply is not run: a JSON or text input read as a table (told so), or a
        failed program sent again (asked again, warmer: one such re-ask is free)."""
        misread = table_reader(code, self._texts, self._sources)
        if misread is not None and normalized(code) not in chat.failed:
            chat.last = Attempt(code=code, error=misread, exception=MISREAD)
            chat.attempts.append(chat.last)
            chat.failed.add(normalized(code))
            chat.tell(misread)
            return True
        if normalized(code) in chat.failed and chat.last is not None:
            chat.attempts.append(Attempt(code=code, error=RESENT))
            said = REPEATED.format(error=_body(chat.last.error or ""))
            chat.tell(self._feedback(said, chat.last, interpreter, True))
            return True
        return False

    def _run_mended(
        self, interpreter: TurnInterpreter, chat: _Chat, code: str
    ) -> tuple[str, Attempt]:
        """A program run, with the host's mends and a continuation step (whose doubt may be
        mended too): the code that ran last and its attempt."""
        chat.runs += 1
        attempt = self._run(interpreter, code)
        chat.attempts.append(attempt)
        original = code
        code, attempt = self._host_fix(interpreter, chat.messages, code, attempt, chat.attempts)
        if code != original:
            chat.failed.add(normalized(original))
        stepped = self._continue(interpreter, chat.messages, attempt, chat.attempts)
        if stepped is not attempt and stepped.advisory:  # a step's doubt, maybe mended
            code, stepped = self._host_fix(
                interpreter, chat.messages, stepped.code, stepped, chat.attempts
            )
        return code, stepped

    def _settle(
        self, interpreter: TurnInterpreter, chat: _Chat, code: str, attempt: Attempt
    ) -> CodeFirstResult | None:
        """A program that ran: the self-check asked of its first good result, a good result
        decided on (the vote), or its failure told; the Turn's result when it settles it."""
        if attempt.error is None and self.profile.self_check and chat.checked is None:
            chat.checked, chat.checked_at, chat.temperature = attempt, chat.runs, None
            result = self._answer(attempt)
            chat.messages.append(Message.user(SELF_CHECK.format(result=result, task=self._task)))
            return None
        if attempt.error is None:
            chosen = self._decide(interpreter, chat.prompt, attempt, chat.attempts)
            return CodeFirstResult(self._answer(chosen), chat.attempts, vote=self._vote)
        if not attempt.advisory:
            chat.failed.add(normalized(code))
            chat.last = attempt
        chat.tell(self._feedback(attempt.error, attempt, interpreter, False))
        return None

    def _last_resort(
        self, interpreter: TurnInterpreter, chat: _Chat, before: list[ArtifactReport]
    ) -> CodeFirstResult | None:
        """When the repairs ran out: the checked program again (its correction failed), a
        fresh program (``small_fresh_retry``), or the fallback answer; None when none holds."""
        if chat.checked is not None:
            again = self._run(interpreter, chat.checked.code)
            if again.error is None:
                return CodeFirstResult(self._answer(again), chat.attempts)
        retried = self._retry(interpreter, chat.prompt, chat.attempts, chat.failed)
        if retried is not None:
            return CodeFirstResult(self._answer(retried), chat.attempts)
        fallback = self._fallback(interpreter, chat.attempts, before)
        if fallback is None:
            return None
        why = _tail(chat.attempts[-1].error or "", 200) if chat.attempts else ""
        return CodeFirstResult(
            fallback, chat.attempts, fallback=f"no program fully succeeded ({why.strip()})"
        )

    def _retry(
        self, interpreter: TurnInterpreter, prompt: Any, attempts: list[Attempt], failed: set[str]
    ) -> Attempt | None:
        """``[engine] small_fresh_retry``: when no program ran to its end, one more is sampled
        afresh from the first prompt alone (a chat of its own, at ``VOTE_TEMPERATURE``) and run,
        with the host's mends and a continuation; begun only in the Turn's first
        ``FRESH_RETRY_BEFORE`` seconds and within its budget and deadline. The attempt when it
        fully succeeded, else None (the fallback answers as before)."""
        ran_to_end = any(a.ran_to_end for a in attempts)
        late = time.monotonic() - self._started > FRESH_RETRY_BEFORE
        if not self.profile.fresh_retry or ran_to_end or late or not self._affordable(2):
            return None
        self.control.check()
        chat: list[Any] = [prompt]
        reply = self._reply(chat, VOTE_TEMPERATURE)
        if reply.cut or not reply.code or normalized(reply.code) in failed:
            error = "cut by the output cap" if reply.cut else RESENT
            attempts.append(Attempt(code=reply.code, error=error, cut=reply.cut))
            return None
        chat.append(Message.assistant([TextPart(f"```python\n{reply.code}\n```")]))
        attempt = self._run(interpreter, reply.code)
        attempts.append(attempt)
        _, attempt = self._host_fix(interpreter, chat, reply.code, attempt, attempts)
        attempt = self._continue(interpreter, chat, attempt, attempts)
        return attempt if attempt.error is None else None

    def _may_ask(self, chat: _Chat) -> bool:
        """Whether another program may be asked for: the repairs allowed, one more run and one
        more reply while a good result is being checked, and one free re-ask of a reply that
        repeated a failed program."""
        allowed = self._repairs(chat.runs) + (chat.checked is not None)
        return chat.runs < 1 + allowed and chat.asks < 2 + allowed

    def _repairs(self, runs: int) -> int:
        """The repairs allowed after ``runs`` programs: ``profile.repairs``, and each of
        ``profile.extra_repairs`` more only while the Turn's budget allows a call and, at this
        run's pace, it would end within ``EXTRA_REPAIR_BEFORE`` seconds."""
        base = self.profile.repairs
        if runs <= base or runs > base + self.profile.extra_repairs:
            return base
        elapsed = time.monotonic() - self._started
        pace = elapsed / max(1, self._calls)
        in_time = elapsed + pace <= EXTRA_REPAIR_BEFORE
        return runs if in_time and self._affordable(1) else base

    def _fresh(self, runs: int, checked: Attempt | None, attempts: list[Attempt]) -> bool:
        """Whether the next program is the last one and, with ``[engine] small_fresh_last``, is
        sampled afresh from the first prompt alone (the failed programs and their errors left
        out of its chat) rather than repaired: only after a program that ran and failed (not a
        cut reply, a resend or a doubt) and outside the self-check."""
        if not self.profile.fresh_last or checked is not None or not attempts:
            return False
        previous = attempts[-1]
        failed = previous.error is not None and not (previous.cut or previous.advisory)
        resend = previous.error == RESENT
        return runs == self.profile.repairs >= 1 and failed and not resend

    def _feedback(
        self, said: str, attempt: Attempt, interpreter: TurnInterpreter, repeated: bool
    ) -> str:
        """What a failure is told: its message, and, when the failure was seen before (the same
        program again, or the same exception), the next kind of help: the failing line, then
        the input's real shape, then a simpler plan."""
        key = attempt.exception or attempt.error or ""
        again = repeated or (not attempt.advisory and key in self._seen)
        if key and not attempt.advisory:
            self._seen.add(key)
        if not again:
            return said
        self._help_level += 1
        help_text = ""
        if self._help_level == 1:
            located = failing_line(attempt.error or "", attempt.code)
            if located is not None:
                number, text = located
                help_text = (
                    f"The line that fails is line {number}: {text}\n"
                    "Write that step another way (split it into simpler steps)."
                )
            else:
                self._help_level = 2
        if self._help_level == 2:
            shape = self._shape(interpreter)
            if shape:
                help_text = "What the input files really hold:\n" + shape
            else:
                self._help_level = 3
        if self._help_level >= 3:
            help_text = SIMPLER
        return f"{_body(said)}\n{help_text}\n{REPLY_ONLY}"

    def _shape(self, interpreter: TurnInterpreter) -> str:
        """The inputs' real shape (rows, columns with dtypes, first rows), from a host cell."""
        if not self._sources:
            return ""
        code = f"PATHS = {self._sources!r}\n{SHAPE_CELL}"
        shown = self._optional_cell(interpreter, code, "(host: input shape)")
        if shown is None:
            return ""
        return _tail(shown.strip(), SHAPE_CHARS)

    def _structures(self, interpreter: TurnInterpreter) -> str:
        """The inputs' structures (engine/inputshape.py), from a host cell; "" for none."""
        paths = [p for p in self._sources if has_structure(p)]
        if not paths:
            return ""
        shown = self._optional_cell(interpreter, structure_cell(paths), "(host: input structure)")
        return shown or ""

    def _state(self, interpreter: TurnInterpreter, digest: str) -> str:
        """What the failed program's variables held (engine/programstate.py); "" for a program
        that never ran (a syntax error) or when the host cell fails."""
        if _NEVER_RAN.match(exception_line(digest)):
            return ""
        shown = self._optional_cell(interpreter, state_cell(), "(host: the program's variables)")
        if shown is None:
            return ""
        return state_block(shown)

    def _result_hint(self, interpreter: TurnInterpreter, error: str, code: str) -> str:
        """For a library call's result unpacked wrongly: what it really returns (the call
        evaluated again in a host cell, where the failed program's names are still defined)."""
        call = unpacked_call(error, code)
        if call is None:
            return ""
        shown = self._optional_cell(interpreter, result_cell(call), "(host: a call's result)")
        if shown is None:
            return ""
        return result_hint(call, shown)

    def _fallback(
        self, interpreter: TurnInterpreter, attempts: list[Attempt], before: list[ArtifactReport]
    ) -> str | None:
        """The answer when no program fully succeeded, if one still did the task's work: from
        the last that ran and wrote the artifacts (printing nothing, or doubted; when it printed
        nothing, with what the last such program that printed printed), else from the artifacts
        when every named one was written this Turn before a later step failed."""
        quiet = next((a for a in reversed(attempts) if a.ran_to_end), None)
        if quiet is not None:
            said = next(
                (a for a in reversed(attempts) if a.ran_to_end and a.output.strip()), quiet
            )  # a correction that printed nothing: what the program it corrected printed
            return self._answer(Attempt(quiet.code, None, said.output, reports=quiet.reports))
        after = self._inspect(interpreter)
        if not after or not all(
            a.written and not a.problem and a.sha256 != b.sha256
            for a, b in zip(after, before, strict=True)
        ):  # a misshapen artifact is no answer
            return None
        ran = next(
            (a for a in reversed(attempts) if not a.cut and a.error != RESENT),
            None,
        )
        if ran is None:
            return None
        output = f"(The program's last step failed: {ran.exception or ran.error})"
        return self._answer(Attempt(ran.code, None, output, reports=after))

    def _host_fix(
        self,
        interpreter: TurnInterpreter,
        messages: list[Any],
        code: str,
        attempt: Attempt,
        attempts: list[Attempt],
    ) -> tuple[str, Attempt]:
        """A program that failed on a slip the host can mend runs again mended, at most
        ``HOST_FIXES`` times, and the chat shows the program so; no model call. The last
        program and its attempt. See ``_mended``."""
        for _ in range(HOST_FIXES):
            fixed = (
                self._mended(code, attempt, attempts)
                or self._whole_rows(interpreter, attempt)
                or self._grouped(interpreter, attempt)
                if attempt.error
                else None
            )
            if fixed is None:
                break
            code = fixed
            messages[-1] = Message.assistant([TextPart(f"```python\n{code}\n```")])
            attempt = self._run(interpreter, code)
            attempts.append(attempt)
        return code, attempt

    def _whole_rows(self, interpreter: TurnInterpreter, attempt: Attempt) -> str | None:
        """The program saving the whole rows of the table it took a column of, where the task
        asks for rows with all their columns (``engine/rowsrewrites.py``); None otherwise."""
        report = next((r for r in attempt.reports if r.rows_from), None)
        if report is None:
            return None
        cell = partial(rows_cell, source=report.rows_from)
        what = "the rows a column came from"
        found = self._saved_and_shown(interpreter, attempt, report.path, cell, what)
        table = parse_rows(found[1]) if found is not None else None
        if found is None or not table:
            return None
        return rows_saved(attempt.code, report.path, found[0], table)

    def _grouped(self, interpreter: TurnInterpreter, attempt: Attempt) -> str | None:
        """The program saving the grouped table it made, where it saved the rows before
        grouping them (``engine/grouprewrites.py``); None otherwise."""
        report = next((r for r in attempt.reports if r.grouped_by), None)
        if report is None:
            return None
        cell = partial(grouped_cell, keys=report.grouped_by)
        found = self._saved_and_shown(interpreter, attempt, report.path, cell, "the grouped table")
        grouped = parse_grouped(found[1]) if found is not None else None
        if found is None or grouped is None:
            return None
        table, columns = grouped
        return grouped_saved(attempt.code, report.path, found[0], table, columns, report.grouped_by)

    def _saved_and_shown(
        self,
        interpreter: TurnInterpreter,
        attempt: Attempt,
        path: str,
        cell: Callable[[str], str],
        what: str,
    ) -> tuple[str, str] | None:
        """The name of the table the program saved as the artifact ``path`` and what the host
        cell ``cell(name)`` printed about it; None when no saved name is found or the optional
        cell gave nothing."""
        saved = saved_name(attempt.code, path)
        if saved is None:
            return None
        shown = self._optional_cell(interpreter, cell(saved), f"(host: {what})")
        return (saved, shown) if shown is not None else None

    def _mended(self, code: str, attempt: Attempt, attempts: list[Attempt]) -> str | None:
        """``code`` mended for its failure, or None: a column it misspelled (exactly one real
        column meant: ``repairs.respelled``), a name written in another case than the one it
        bound (``repairs.case_renamed``), an aggregation over a date or text column
        (``repairs.numeric_only_added``), a ``.dt``/``.str`` accessor used on the other
        kind of column (``repairs.converted_accessor``), a group key read as a column after
        ``groupby`` put it in the index (``repairs.grouped_key_kept``), a group's label looked
        up in the ungrouped table (``repairs.grouped_label_read``), an attribute read of a
        table's ``idxmax()`` (``repairs.table_label``), a helper's figures unpacked into
        another number of names (``statprompt.unpacked_by_name``), a grouping by month
        that did not name the date column (``repairs.dated_grouping``), or an input an earlier
        program read into a name this one uses without reading it (``repairs.restored_read``)."""
        error = attempt.error or ""
        earlier = [a.code for a in attempts[:-1] if a.code and not a.cut]
        return (
            respelled(code, attempt.exception, self._tables)
            or case_renamed(code, attempt.exception)
            or numeric_only_added(error, code)
            or converted_accessor(error, code)
            or grouped_key_kept(error, code)
            or grouped_label_read(error, code)
            or table_label(error, code)
            or unpacked_by_name(error, code)
            or dated_grouping(error, code, self._tables)
            or restored_read(error, code, earlier)
        )

    def _affordable(self, calls: int) -> bool:
        """Whether ``calls`` more model calls (and their programs) fit the Turn's budget and, at
        this run's pace so far, its deadline: optional steps are not begun otherwise."""
        control = self.control
        if control.max_units - control.units < calls:
            return False
        remaining = control.remaining_seconds()
        if remaining is None:
            return True
        pace = (time.monotonic() - self._started) / max(1, self._calls)
        return remaining > VOTE_MARGIN * pace * calls

    def _continue(
        self,
        interpreter: TurnInterpreter,
        messages: list[Any],
        attempt: Attempt,
        attempts: list[Attempt],
    ) -> Attempt:
        """A program that ran cleanly but left work undone (a named artifact not written, some
        of the task's tags not printed) gets a next step that sees its output and continues in
        the same session (its variables kept), at most ``CONTINUATIONS`` times, within the
        Turn's budget and deadline. Not a repair: no error is fed back. The result is the
        steps judged together (their code and output joined)."""
        while attempt.unfinished and self._continued < CONTINUATIONS and self._affordable(1):
            self._continued += 1
            shown = _tail(attempt.output.strip(), 600) or "(nothing)"
            messages.append(Message.user(CONTINUE.format(output=shown, what=attempt.unfinished)))
            reply = self._reply(messages, None)
            code = reply.code
            messages.append(Message.assistant([TextPart(f"```python\n{code}\n```")]))
            if reply.cut or not code:
                attempts.append(Attempt(code=code, error="cut by the output cap", cut=True))
                return attempt
            step = self._run(interpreter, code, before=attempt)
            attempts.append(step)
            if step.exception:  # the continuation raised: repaired as a whole program
                return step
            attempt = step
        return attempt

    def _decide(
        self, interpreter: TurnInterpreter, prompt: Any, first: Attempt, attempts: list[Attempt]
    ) -> Attempt:
        """``[engine] small_vote``: a second program, sampled independently from the first
        prompt, is run; if its figures agree with the first one's (``repairs.same_answer``) it
        stands; if not, a third decides (the one it agrees with wins); with no majority, or
        when a vote program fails, the first stands (run again, so that its artifacts are the
        ones left). Each step is begun only within the Turn's budget and deadline."""
        if not self.profile.vote or self._vote or not self._affordable(1):
            return first
        second = self._sample(interpreter, prompt, attempts)
        if second is None:
            self._vote = "the second program failed: the first stands"
            return self._restore(interpreter, first)
        if same_answer(self._task, self._answer(first), self._answer(second)):
            self._vote = "two programs agreed"
            return second
        if not self._affordable(1):
            self._vote = "two programs disagreed, no time for a third: the first stands"
            return self._restore(interpreter, first)
        third = self._sample(interpreter, prompt, attempts)
        if third is not None:
            for name, other in (("first", first), ("second", second)):
                if same_answer(self._task, self._answer(other), self._answer(third)):
                    self._vote = f"two programs disagreed; a third agreed with the {name}"
                    return third
        self._vote = "three programs disagreed: the first stands"
        return self._restore(interpreter, first)

    def _sample(
        self, interpreter: TurnInterpreter, prompt: Any, attempts: list[Attempt]
    ) -> Attempt | None:
        """One independently sampled program (a fresh chat: the first prompt alone), run; None
        when it was cut or did not fully succeed."""
        self.control.check()
        reply = self._reply([prompt], VOTE_TEMPERATURE)
        if reply.cut or not reply.code:
            attempts.append(Attempt(code=reply.code, error="cut by the output cap", cut=True))
            return None
        attempt = self._run(interpreter, reply.code)
        attempts.append(attempt)
        return attempt if attempt.error is None else None

    def _restore(self, interpreter: TurnInterpreter, first: Attempt) -> Attempt:
        """The first program run again when the task names artifacts (a vote program may have
        overwritten them); its answer is the first run's when the rerun does not succeed."""
        if not self._targets:
            return first
        again = self._run(interpreter, first.code)
        return again if again.error is None else first

    def _run(
        self, interpreter: TurnInterpreter, code: str, before: Attempt | None = None
    ) -> Attempt:
        """Run one program (or a continuation of ``before``: then judged with it, their code
        and output joined) and judge what it left: the first failure found is its error."""
        if not code:
            return Attempt(code=code, error=REPAIR.format(error="(the reply held no code)"))
        # the host's fixes (engine/rewrites.py), line numbers kept; the names a program may
        # use without defining them come from the steps it continues, or from the last
        # program that ran to its end (its namespace is kept)
        kept = before.code if before is not None else self._kept  # "" after a raise
        if before is None:  # a figure it uses but no longer computes: from its own data
            code = rederived(code, kept)
        code = sorted_by_date(yes_no_fields(prepare(code, kept), self._yes_no), self._date_order)
        if before is None and self._raised:  # a whole program: none of a half-run one's names
            self._host_cell(interpreter, f"{FRESH_NAMESPACE}()", "(host: a fresh namespace)")
        self._raised = False
        try:
            result = interpreter.execute(code, None)
        except TurnStopped:
            raise
        except (CodeExecutionError, SyntaxError) as exc:
            self._raised, self._kept = True, ""
            self.control.check()
            digest = error_digest(str(exc))
            hints = (
                column_hint(digest, self._tables),
                unpacking_hint(digest, code) or self._result_hint(interpreter, digest, code),
                own_raise_hint(digest, code),
                accessor_hint(digest, code),
            )
            hint = "\n".join(h for h in (*hints, self._state(interpreter, digest)) if h)
            return Attempt(
                code=code,
                error=REPAIR.format(error=digest + (f"\n{hint}" if hint else "")),
                exception=exception_line(digest),
            )
        output = "" if result is None else str(result)
        self._kept = f"{kept}\n{code}" if kept else code
        if before is not None:
            code = f"{before.code}\n{code}"
            output = "\n".join(p for p in (before.output.rstrip("\n"), output) if p)
        return self._judge(interpreter, code, output)

    def _judge(self, interpreter: TurnInterpreter, code: str, output: str) -> Attempt:
        """What a program that ran left, judged (see ``_run``)."""
        reports = self._inspect(interpreter)
        attempt = Attempt(code=code, output=output, reports=reports)
        missing = [r.path for r in reports if not r.written]
        problems = [r.problem for r in reports if r.problem]
        program = normalized(code)
        doubts = [r for r in reports if r.doubt and program not in self._doubted.get(r.path, ())]
        hidden = hidden_error(code, output)
        shape = format_problem(self._task, output, self._misshaped) if output.strip() else None
        printed = tag_values(output)
        self._misshaped |= {t: printed[t] for t in misshapen(self._task, output)}
        if hidden is None and not problems:
            attempt.unfinished = unfinished(self._task, output, missing)
        if hidden is not None:  # a repair may not hide the error: not a success
            hint = column_hint(hidden, self._tables)
            attempt.error = HIDDEN.format(said=hidden, hint=f"\n{hint}" if hint else "")
            attempt.exception = hidden
        elif missing:
            attempt.error = MISSING.format(paths=", ".join(missing))
        elif problems:
            attempt.error = MISSHAPEN.format(problem="; ".join(problems))
        elif doubts:  # not a failure: the same program again is run, and then accepted
            for report in doubts:
                self._doubted.setdefault(report.path, set()).add(program)
            attempt.error = MISSHAPEN.format(problem="; ".join(r.doubt for r in doubts))
            attempt.advisory = True
        elif not output.strip():  # ran, wrote what it should, printed no answer
            attempt.error, attempt.quiet = QUIET, True
        elif shape is not None and program not in self._doubted.get(FORMAT, ()):
            self._doubted.setdefault(FORMAT, set()).add(program)  # said once a program
            attempt.error = INCOMPLETE.format(output=_tail(output.strip(), 600), problem=shape)
            attempt.advisory = True
        return attempt

    @staticmethod
    def _host_cell(interpreter: TurnInterpreter, code: str, shown: str) -> str:
        result = interpreter.run_cell(code, None, bootstrap=True, shown=shown)
        return "" if result is None else str(result)

    def _optional_cell(self, interpreter: TurnInterpreter, code: str, shown: str) -> str | None:
        """A host cell whose help or mend is optional: its output, or None when it failed (the
        Turn goes on without it); a stopped Turn still stops."""
        try:
            return self._host_cell(interpreter, code, shown)
        except TurnStopped:
            raise
        except Exception:
            return None

    def _inspect(self, interpreter: TurnInterpreter) -> list[ArtifactReport]:
        """The named artifacts as they are now (one host cell; none when the task names none)."""
        if not self._targets:
            return []
        output = self._host_cell(interpreter, self._inspect_code, "(host: artifact check)")
        return parse_inspection(output, self._targets)

    @staticmethod
    def _answer(attempt: Attempt) -> str:
        """What the program printed, then the head of each named artifact (its figures, even
        when the program printed only a sentence)."""
        parts = [_tail(attempt.output.strip(), OUTPUT_CHARS)]
        for report in attempt.reports:
            head = report.head.strip()
            parts.append(
                f"Saved {report.path}:\n{head}" if head else f"Saved {report.path} (empty)."
            )
        return "\n\n".join(p for p in parts if p) or "The program ran and printed nothing."
