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
code (fenced or not) are accepted. On the embedded llama.cpp server the reply is also held to
a fenced Python block by a GBNF grammar, with ``repeat_penalty``; a reply that repeats an
earlier failed program is not run again, the model is asked again with a little temperature.
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
from fleet_core.engine.interpreter import TurnInterpreter
from fleet_core.engine.profile import (
    REPEAT_TEMPERATURE,
    EngineProfile,
    compact_manifest,
    dataset_preview,
    json_template_keys,
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
2. compute the result;
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

REPAIR = "The program failed:\n{error}\nReply with the whole corrected program only."
MISSING = "The program ran but did not write {paths}.\nReply with the whole corrected program only."
REPEATED = (
    "You sent the same program again, and it fails the same way:\n{error}\n"
    "Change the line that fails. Reply with the whole corrected program only."
)
MISSHAPEN = "The program ran but {problem}.\nReply with the whole corrected program only."
QUIET = (
    "The program ran but printed nothing. It must print the answer with the computed figures.\n"
    "Reply with the whole corrected program only."
)
ERROR_CHARS = 1_200  # the error fed back: its last lines
OUTPUT_CHARS = 2_000  # the answer built from printed output
ARTIFACT_LINES = 12  # the answer's artifact head when nothing was printed
MEMORY_CHARS = 600
#: Imported for the program before it runs: a small model often uses os, json or pd
#: unimported and then fails to add the import in its repairs (docs/benchmarks.md).
PRELUDE = (
    "import collections, csv, json, math, os, re, statistics\n"
    "try:\n"
    "    import pandas as pd\n"
    "except ImportError:\n"
    "    pass"
)
SHAPE_SAMPLE_CHARS = 200  # of a misshapen JSON artifact, in the repair message

#: A reply that is one fenced Python block (llama.cpp GBNF): no prose, a closing fence.
CODE_GRAMMAR = r"""root ::= "```python\n" line+ "```"
line ::= [^`\n]* "\n"
"""
REPEAT_PENALTY = 1.1  # llama_cpp.server's own default, sent explicitly

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
    advisory: bool = False  # it ran; the host only questions an artifact's shape (once)


@dataclass(slots=True)
class CodeFirstResult:
    answer: str
    attempts: list[Attempt] = field(default_factory=list)


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
        self._shapes: list[tuple[str, list[str]]] = []
        self._csvs: list[str] = []
        self._hinted: set[str] = set()

    def _ask(self, messages: list[Any], temperature: float | None) -> str:
        extensions: dict[str, Any] | None = None
        if self.profile.constrained:
            extensions = {"repeat_penalty": REPEAT_PENALTY}
            if self.profile.grammar:
                extensions["grammar"] = CODE_GRAMMAR
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
        targets = named_artifacts(inputs.task)
        self._shapes = json_shapes(inputs.task, targets)
        self._csvs = [p for p in targets if p.lower().endswith(".csv")]
        self._hinted = set()
        messages: list[Any] = [Message.user(first_prompt(inputs))]
        attempts: list[Attempt] = []
        failed: set[str] = set()
        last_error = ""
        temperature: float | None = None
        interpreter = self.make_interpreter()
        try:
            self._host_cell(interpreter, PRELUDE, "(host: prelude)")
            before = self._stamps(interpreter, targets)
            runs, asks = 0, 0
            # a reply repeating a failed program is not run; one such re-ask is free
            while runs < 1 + self.profile.repairs and asks < 2 + self.profile.repairs:
                self.control.check()
                asks += 1
                reply = self._ask(messages, temperature)
                code = extract_code(reply)
                messages.append(Message.assistant([TextPart(f"```python\n{code}\n```")]))
                if normalized(code) in failed:  # the same failed program: ask again, warmer
                    attempts.append(Attempt(code=code, error="repeated a failed program"))
                    temperature = REPEAT_TEMPERATURE
                    messages.append(Message.user(REPEATED.format(error=last_error)))
                    continue
                runs += 1
                attempt = self._run(interpreter, code, targets)
                attempts.append(attempt)
                if attempt.error is None:
                    return CodeFirstResult(self._answer(interpreter, attempt, targets), attempts)
                if not attempt.advisory:
                    failed.add(normalized(code))
                last_error = attempt.error
                messages.append(Message.user(attempt.error))
            quiet = next((a for a in reversed(attempts) if a.quiet or a.advisory), None)
            if quiet is not None:  # it ran and wrote the artifacts; no repair did better
                return CodeFirstResult(self._answer(interpreter, quiet, targets), attempts)
            after = self._stamps(interpreter, targets)
            if targets and all(after[p] is not None and after[p] != before[p] for p in targets):
                # every named artifact was written this Turn before a later step failed
                ran = next(a for a in reversed(attempts) if a.error != "repeated a failed program")
                lines = (ran.error or "").splitlines()
                note = lines[-2] if len(lines) >= 2 else (lines or ["?"])[0]  # the exception
                partial = Attempt(code=ran.code, output=f"(The program's last step failed: {note})")
                return CodeFirstResult(self._answer(interpreter, partial, targets), attempts)
        finally:
            interpreter.shutdown()
        last = _tail((attempts[-1].error if attempts else None) or "no program", 500)
        raise CodeFirstFailed(f"code-first: the program failed {len(attempts)} time(s); {last}")

    def _run(self, interpreter: TurnInterpreter, code: str, targets: list[str]) -> Attempt:
        if not code:
            return Attempt(code=code, error=REPAIR.format(error="(the reply held no code)"))
        try:
            result = interpreter.execute(code, None)
        except TurnStopped:
            raise
        except (CodeExecutionError, SyntaxError) as exc:
            self.control.check()
            return Attempt(code=code, error=REPAIR.format(error=error_digest(str(exc))))
        output = "" if result is None else str(result)
        missing = [p for p in targets if not self._exists(interpreter, p)]
        if missing:
            return Attempt(code=code, output=output, error=MISSING.format(paths=", ".join(missing)))
        problem = self._json_problem(interpreter)
        if problem:
            return Attempt(code=code, output=output, error=MISSHAPEN.format(problem=problem))
        hint = self._unlabelled_hint(interpreter)
        if hint:  # not a failure: the same program again is run, and then accepted
            error = MISSHAPEN.format(problem=hint)
            return Attempt(code=code, output=output, error=error, advisory=True)
        if not output.strip():  # ran, wrote what it should, printed no answer
            return Attempt(code=code, output=output, error=QUIET, quiet=True)
        return Attempt(code=code, output=output)

    @staticmethod
    def _host_cell(interpreter: TurnInterpreter, code: str, shown: str) -> str:
        result = interpreter.run_cell(code, None, bootstrap=True, shown=shown)
        return "" if result is None else str(result)

    def _stamps(self, interpreter: TurnInterpreter, paths: list[str]) -> dict[str, str | None]:
        """Each path's sha256, None when it is not a file (one host cell)."""
        if not paths:
            return {}
        code = (
            "import hashlib as _h, os as _o\n"
            f"for _p in {paths!r}:\n"
            "    if _o.path.isfile(_p):\n"
            "        with open(_p, 'rb') as _f:\n"
            "            print(_h.sha256(_f.read()).hexdigest())\n"
            "    else:\n"
            "        print('-')\n"
        )
        lines = self._host_cell(interpreter, code, "(host: artifact check)").split()
        if len(lines) != len(paths):
            return dict.fromkeys(paths)
        return {p: (None if v == "-" else v) for p, v in zip(paths, lines, strict=True)}

    def _json_problem(self, interpreter: TurnInterpreter) -> str:
        """What is wrong with the named JSON artifacts (empty when nothing): each must parse,
        and hold an object with the keys of the template the task spells out (one host cell)."""
        if not self._shapes:
            return ""
        code = (
            "import json as _j\n"
            f"for _p, _k in {self._shapes!r}:\n"
            "    try:\n"
            "        with open(_p, encoding='utf-8') as _f:\n"
            "            _v = _j.load(_f)\n"
            "    except Exception as _e:\n"
            "        print(f'wrote {_p}, which is not valid JSON ({type(_e).__name__}: {_e})')\n"
            "        continue\n"
            "    if _k and not (isinstance(_v, dict) and all(_x in _v for _x in _k)):\n"
            f"        _s = _j.dumps(_v, default=str)[:{SHAPE_SAMPLE_CHARS}]\n"
            "        _want = ', '.join(_j.dumps(_x) for _x in _k)\n"
            "        print(f'wrote {_p} as {_s}; the task asks for one JSON object with the keys "
            "{_want}')\n"
        )
        return self._host_cell(interpreter, code, "(host: artifact check)").strip()

    def _unlabelled_hint(self, interpreter: TurnInterpreter) -> str:
        """A named CSV artifact that is one column of numbers lost its labels (pandas'
        ``Series.to_csv(index=False)``); said once per file and Turn, since it may be meant."""
        paths = [p for p in self._csvs if p not in self._hinted]
        if not paths:
            return ""
        code = (
            "import csv as _c\n"
            "def _number(_t):\n"
            "    try:\n"
            "        float(_t)\n"
            "        return True\n"
            "    except ValueError:\n"
            "        return False\n"
            f"for _p in {paths!r}:\n"
            "    with open(_p, encoding='utf-8', errors='replace', newline='') as _f:\n"
            "        _rows = [_r for _r in _c.reader(_f) if _r]\n"
            "    if len(_rows) >= 3 and all(len(_r) == 1 for _r in _rows) and all(\n"
            "        _number(_r[0]) for _r in _rows[1:]):\n"
            "        print(f'wrote {_p} as one column of numbers ({_rows[0][0]!r}) without "
            "their labels; keep the label of each value (a pandas Series loses its index in "
            "to_csv(index=False): call .reset_index() first)')\n"
        )
        hint = self._host_cell(interpreter, code, "(host: artifact check)").strip()
        if hint:
            self._hinted.update(paths)
        return hint

    def _exists(self, interpreter: TurnInterpreter, path: str) -> bool:
        code = f"import os\nprint(os.path.isfile({path!r}))"
        return self._host_cell(interpreter, code, "(host: artifact check)").strip() == "True"

    def _answer(self, interpreter: TurnInterpreter, attempt: Attempt, targets: list[str]) -> str:
        """What the program printed, then the head of each named artifact (its figures, even
        when the program printed only a sentence)."""
        parts = [_tail(attempt.output.strip(), OUTPUT_CHARS)]
        for path in targets:
            code = (
                f"with open({path!r}, encoding='utf-8', errors='replace') as _f:\n"
                f"    print(''.join(_f.readlines()[:{ARTIFACT_LINES}]).rstrip())"
            )
            head = self._host_cell(interpreter, code, "(host: answer)").strip()
            parts.append(f"Saved {path}:\n{head}" if head else f"Saved {path} (empty).")
        return "\n\n".join(p for p in parts if p) or "The program ran and printed nothing."
