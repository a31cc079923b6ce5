"""Code-first Flex: the small-model profile's code route (docs/engine.md#code-first-flex).

A small model does not drive an iterative REPL well (it re-sends the same cell and never calls
SUBMIT: docs/benchmarks.md), but it writes a short complete program well. So the host asks for
one program that reads the inputs, writes the artifact the task names and prints the answer;
runs it; and on an error sends back only the error, for at most ``profile.repairs`` repairs.
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
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dspy.lm15 import Config, Message, Request, TextPart
from dspy.primitives.code_interpreter import CodeExecutionError

from fleet_core.engine.context import TurnInputs
from fleet_core.engine.control import TurnControl, TurnStopped
from fleet_core.engine.inspection import ArtifactReport, inspection_cell, parse_inspection
from fleet_core.engine.interpreter import TurnInterpreter
from fleet_core.engine.profile import (
    EngineProfile,
    compact_manifest,
    dataset_preview,
    json_template_keys,
    manifest_inputs,
    named_artifacts,
)

SYSTEM = """You write one complete Python 3 program for the user's task. It runs in a sandbox \
whose working directory is the workspace: input files are under files/, and output files go \
under artifacts/ (create it with os.makedirs("artifacts", exist_ok=True)). Use pandas for \
tables (CSV). Read text files such as logs line by line with open(). Read JSON with \
json.load and loop over its records in plain Python (not pandas).
Start the program with comments that restate the task: for each file the task names, one \
comment saying exactly what that file must contain, and one comment saying what to print.
Then the program must:
1. read the input file(s) named in the request;
2. compute the result in simple steps, one per line, with plain for loops (no nested \
comprehensions);
3. write every file the task names, under artifacts/, with exactly the content the task asks \
for (a pandas groupby result keeps its group labels: call .reset_index() before \
to_csv(index=False));
4. print the answer: the computed figures themselves (print the table or values you saved).
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
REPEATED = (
    "You sent the same program again, and it fails the same way:\n{error}\n"
    "Change the line that fails. Reply with the whole corrected program only."
)
MISSHAPEN = "The program ran but {problem}.\nReply with the whole corrected program only."
SELF_CHECK = (
    "The program ran. Its result:\n{result}\n\n"
    "Check it against the task: {task}\n"
    "Read your program again: does it compute exactly what the task asks, from all of the "
    "input? If it does, reply with only: OK\n"
    "If not, reply with the whole corrected program only."
)
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

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_FIELD = re.compile(r"\[\[ ## \w+ ## \]\]")


def json_shapes(task: str, targets: list[str]) -> list[tuple[str, list[str]]]:
    """The named JSON artifacts to check, each with the keys its object must have: the task's
    one template's keys when it names one JSON artifact, else none (it must only parse)."""
    paths = [p for p in targets if p.lower().endswith(".json")]
    keys = json_template_keys(task) if len(paths) == 1 else []
    return [(path, keys) for path in paths]


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


def first_prompt(inputs: TurnInputs) -> str:
    """The first user message: the workspace (names, sizes), the dataset's first lines, the
    sandbox environment and the task, last."""
    dataset = inputs.dataset
    parts = ["Workspace files:\n" + compact_manifest(inputs.workspace_manifest)]  # no previews
    if dataset is not None:
        head = dataset_preview(inputs.workspace_manifest, dataset.path)
        block = f"Selected dataset: {dataset.path} ({dataset.size_bytes} bytes)"
        if head:
            block += f". Its first lines:\n{head}"
        parts.append(block)
    memory = inputs.memory_summary.strip()
    if memory:
        parts.append(_tail(memory, MEMORY_CHARS))
    parts.append(f"Task: {inputs.task}")
    return "\n\n".join(parts)


@dataclass(slots=True)
class Attempt:
    code: str
    error: str | None = None
    output: str = ""
    quiet: bool = False  # it ran and wrote the named artifacts but printed nothing
    advisory: bool = False  # it ran; the host only doubts an artifact's content
    reports: list[ArtifactReport] = field(default_factory=list)
    exception: str = ""  # a program that raised: its exception line


@dataclass(slots=True)
class CodeFirstResult:
    answer: str
    attempts: list[Attempt] = field(default_factory=list)
    fallback: str = ""  # why the answer comes from what a failing program left ('' : it ran)


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

    def _ask(self, messages: list[Any], temperature: float | None) -> str:
        extensions: dict[str, Any] | None = None
        if self.profile.constrained:
            extensions = {"repeat_penalty": REPEAT_PENALTY}
            if self.profile.grammar:
                extensions["grammar"] = CODE_GRAMMAR
        if temperature is None:  # an explicit Request carries no LM defaults: the configured one
            temperature = (getattr(self.lm, "kwargs", None) or {}).get("temperature")
        config = Config(
            max_tokens=self.profile.max_tokens, temperature=temperature, extensions=extensions
        )
        model = str(getattr(self.lm, "model", "") or "")
        request = Request(model=model, system=self.system, messages=tuple(messages), config=config)
        response = self.lm(request)
        text = getattr(response, "text", None)
        if text is None and isinstance(response, list) and response:
            first = response[0]
            text = first.get("text") if isinstance(first, dict) else first
        return str(text or "")

    def run(self, inputs: TurnInputs) -> CodeFirstResult:
        targets = self._targets = named_artifacts(inputs.task)
        shapes = json_shapes(inputs.task, targets)
        dataset = inputs.dataset.path if inputs.dataset is not None else None
        sources = sorted(  # the inputs the task names, then the dataset (a doubt shows its start)
            manifest_inputs(inputs.workspace_manifest),
            key=lambda path: (path not in inputs.task, path != dataset),
        )
        self._inspect_code = inspection_cell(targets, shapes, sources) if targets else ""
        self._doubted = {}
        messages: list[Any] = [Message.user(first_prompt(inputs))]
        attempts: list[Attempt] = []
        failed: set[str] = set()
        last_error = ""
        temperature: float | None = None
        interpreter = self.make_interpreter()
        try:
            self._host_cell(interpreter, PRELUDE, "(host: prelude)")
            before = self._inspect(interpreter)
            runs, asks = 0, 0
            checked: Attempt | None = None  # the good result the model was asked to check
            checked_at = 0  # the run that produced it
            # a reply repeating a failed program is not run; one such re-ask is free; the
            # self-check's question and its corrected program are one more of each
            while runs < 1 + self.profile.repairs + (checked is not None) and asks < (
                2 + self.profile.repairs + (checked is not None)
            ):
                self.control.check()
                asks += 1
                reply = self._ask(messages, temperature)
                code = extract_code(reply)
                messages.append(Message.assistant([TextPart(f"```python\n{code}\n```")]))
                if checked is not None and runs == checked_at and approves(reply, checked.code):
                    return CodeFirstResult(self._answer(checked), attempts)
                if normalized(code) in failed:  # the same failed program: ask again, warmer
                    attempts.append(Attempt(code=code, error="repeated a failed program"))
                    temperature = REPAIR_TEMPERATURE
                    messages.append(Message.user(REPEATED.format(error=last_error)))
                    continue
                runs += 1
                attempt = self._run(interpreter, code)
                attempts.append(attempt)
                if attempt.error is None and self.profile.self_check and checked is None:
                    checked, checked_at, temperature = attempt, runs, None
                    result = self._answer(attempt)
                    messages.append(
                        Message.user(SELF_CHECK.format(result=result, task=inputs.task))
                    )
                    continue
                if attempt.error is None:
                    return CodeFirstResult(self._answer(attempt), attempts)
                if not attempt.advisory:
                    failed.add(normalized(code))
                last_error, temperature = attempt.error, REPAIR_TEMPERATURE
                messages.append(Message.user(attempt.error))
            if checked is not None:  # its correction failed: the checked program again
                again = self._run(interpreter, checked.code)
                if again.error is None:
                    return CodeFirstResult(self._answer(again), attempts)
            fallback = self._fallback(interpreter, attempts, before)
            if fallback is not None:
                why = _tail(attempts[-1].error or "", 200) if attempts else ""
                return CodeFirstResult(
                    fallback, attempts, fallback=f"no program fully succeeded ({why.strip()})"
                )
        finally:
            interpreter.shutdown()
        last = _tail((attempts[-1].error if attempts else None) or "no program", 500)
        raise CodeFirstFailed(f"code-first: the program failed {len(attempts)} time(s); {last}")

    def _fallback(
        self, interpreter: TurnInterpreter, attempts: list[Attempt], before: list[ArtifactReport]
    ) -> str | None:
        """The answer when no program fully succeeded, if one still did the task's work: from
        the last that ran and wrote the artifacts (printing nothing, or doubted), else from the
        artifacts when every named one was written this Turn before a later step failed."""
        quiet = next((a for a in reversed(attempts) if a.quiet or a.advisory), None)
        if quiet is not None:
            return self._answer(quiet)
        after = self._inspect(interpreter)
        if not after or not all(
            a.written and not a.problem and a.sha256 != b.sha256
            for a, b in zip(after, before, strict=True)
        ):  # a misshapen artifact is no answer
            return None
        ran = next(a for a in reversed(attempts) if a.error != "repeated a failed program")
        output = f"(The program's last step failed: {ran.exception or ran.error})"
        return self._answer(Attempt(ran.code, None, output, reports=after))

    def _run(self, interpreter: TurnInterpreter, code: str) -> Attempt:
        """Run one program and judge what it left: the first failure found is its error."""
        if not code:
            return Attempt(code=code, error=REPAIR.format(error="(the reply held no code)"))
        try:
            result = interpreter.execute(code, None)
        except TurnStopped:
            raise
        except (CodeExecutionError, SyntaxError) as exc:
            self.control.check()
            digest = error_digest(str(exc))
            return Attempt(
                code=code, error=REPAIR.format(error=digest), exception=digest.splitlines()[-1]
            )
        output = "" if result is None else str(result)
        reports = self._inspect(interpreter)
        attempt = Attempt(code=code, output=output, reports=reports)
        missing = [r.path for r in reports if not r.written]
        problems = [r.problem for r in reports if r.problem]
        program = normalized(code)
        doubts = [r for r in reports if r.doubt and program not in self._doubted.get(r.path, ())]
        if missing:
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
        return attempt

    @staticmethod
    def _host_cell(interpreter: TurnInterpreter, code: str, shown: str) -> str:
        result = interpreter.run_cell(code, None, bootstrap=True, shown=shown)
        return "" if result is None else str(result)

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
