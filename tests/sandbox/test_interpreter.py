"""The DSPy CodeInterpreter adapter and dspy.RLM end to end in the LocalSandbox."""

from __future__ import annotations

import contextvars
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dspy
import pytest
from sandbox_support import needs_bwrap

from fleet_core.config import SandboxSettings
from fleet_core.engine.scripted_lm import ScriptedEngine
from fleet_core.sandbox.interpreter import (
    SandboxInterpreter,
    local_interpreter_factory,
    make_local_interpreter_factory,
)

pytestmark = needs_bwrap
REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


def step(reasoning: str, code: str) -> str:
    return (
        f"[[ ## reasoning ## ]]\n{reasoning}\n\n[[ ## code ## ]]\n```python\n{code}\n```\n\n"
        "[[ ## completed ## ]]"
    )


@pytest.fixture
def interpreter(tmp_path: Path) -> Iterator[SandboxInterpreter]:
    factory = make_local_interpreter_factory(SandboxSettings(), parent_dir=tmp_path)
    interp = factory()
    yield interp
    interp.shutdown()


def test_output_semantics(interpreter: SandboxInterpreter) -> None:
    assert interpreter.execute("x = 2") is None
    assert interpreter.execute("print('hi')\nx * 21") == "hi\n42"
    with pytest.raises(dspy.CodeExecutionError) as caught:
        interpreter.execute("print('before')\n1 / 0")
    assert "ZeroDivisionError" in str(caught.value) and "before" in str(caught.value)
    with pytest.raises(SyntaxError):
        interpreter.execute("def (")
    assert interpreter.execute("SUBMIT(answer=x)") == dspy.FinalOutput({"answer": 2})


def test_a_str_value_comes_back_raw(interpreter: SandboxInterpreter) -> None:
    tricky = "a 'quoted' \"value\"\nnext line \\ ünïcødé 🚀"
    assert interpreter.execute("text", variables={"text": tricky}) == tricky  # not its repr
    dumped = interpreter.execute("import json\njson.dumps({'a': text})")
    assert dumped == json.dumps({"a": tricky}) and json.loads(dumped) == {"a": tricky}
    assert interpreter.execute("print('shown')\ntext") == "shown\n" + tricky  # both shown
    assert interpreter.execute("[text]") == repr([tricky])  # other values: their repr


def test_an_oversized_str_value_is_a_clear_code_error(tmp_path: Path) -> None:
    factory = make_local_interpreter_factory(SandboxSettings(), parent_dir=tmp_path)
    interp = factory()
    try:
        limit = interp.sandbox.spec.limits.max_value_chars
        with pytest.raises(dspy.CodeExecutionError) as caught:
            interp.execute(f"print('before')\n'x' * {limit + 1}")
        text = str(caught.value)
        assert "ValueTooLarge" in text and f"at most {limit}" in text and "before" in text
        assert interp.execute(f"len('x' * {limit})") == str(limit)  # the REPL goes on
    finally:
        interp.shutdown()


def test_tools_positional_and_contextvars(interpreter: SandboxInterpreter) -> None:
    def tag(text: str, suffix: str = "!") -> str:
        return f"{text}{suffix}:{REQUEST_ID.get()}"

    def keyword_only_shim(**kwargs: Any) -> Any:  # what RLM registers for user tools
        return tag(**kwargs)

    keyword_only_shim.__signature__ = __import__("inspect").signature(tag)  # type: ignore[attr-defined]
    interpreter.tools.update({"tag": keyword_only_shim})
    token = REQUEST_ID.set("req-7")
    try:
        out = interpreter.execute(
            "from concurrent.futures import ThreadPoolExecutor\n"
            "with ThreadPoolExecutor(4) as p:\n"
            "    r = list(p.map(tag, ['a', 'b']))\n"
            "r + [tag('c', suffix='?')]"
        )
    finally:
        REQUEST_ID.reset(token)
    assert out == "['a!:req-7', 'b!:req-7', 'c?:req-7']"


def test_timeout_with_state_is_a_code_error(tmp_path: Path) -> None:
    factory = make_local_interpreter_factory(SandboxSettings(), parent_dir=tmp_path)
    interp = factory()
    interp.cell_timeout = 0.5
    try:
        interp.execute("kept = 1")
        with pytest.raises(dspy.CodeExecutionError, match="TimeoutError"):
            interp.execute("while True:\n    pass")
        assert interp.execute("kept") == "1"
        with pytest.raises(dspy.CodeInterpreterError):
            interp.execute("import os\nos._exit(1)")
        with pytest.raises(dspy.CodeInterpreterError):
            interp.execute("1")  # no silent restart after the worker died
    finally:
        interp.shutdown()


def test_zero_argument_factory_creates_and_cleans_a_workspace() -> None:
    interp = local_interpreter_factory()
    root = Path(interp.execute("import os\nos.getcwd()").strip("'"))
    assert str(root) == "/workspace"
    workspace = interp.sandbox.spec.workspace
    assert workspace.is_dir()
    interp.shutdown()
    assert not workspace.exists()
    assert isinstance(local_interpreter_factory.execution_instructions, str)  # type: ignore[attr-defined]


def test_rlm_scripted_task_runs_in_the_sandbox(tmp_path: Path) -> None:
    main = ScriptedEngine(
        [
            step(
                "Parse the numbers with numpy.",
                "import numpy as np\nnums = np.array([int(t) for t in context.split()])\n"
                "total = int((nums ** 2).sum())\nprint(len(nums), total)",
            ),
            step(
                "Tag the extremes with sub-LLMs and count characters with the tool.",
                "tags = llm_query_batched(['max ' + str(nums.max()), 'min ' + str(nums.min())])\n"
                "n = count_chars(context)\nprint(sorted(tags), n)",
            ),
            step("Submit.", "SUBMIT(answer=' '.join(sorted(tags)), total=total, n_chars=n)"),
        ]
    )
    sub = ScriptedEngine(rules={"max ": "BIG", "min ": "SMALL"})

    def count_chars(text: str) -> int:
        """Count characters in text."""
        return len(text)

    rlm = dspy.RLM(
        "context -> answer: str, total: int, n_chars: int",
        max_iters=4,
        max_llm_calls=5,
        sub_lm=dspy.LM("openai/sub", engine=sub, cache=False),
        tools=[count_chars],
        interpreter_factory=make_local_interpreter_factory(SandboxSettings(), parent_dir=tmp_path),
    )
    context = "3 1 4 1 5 9 2 6"
    with dspy.context(lm=dspy.LM("openai/main", engine=main, cache=False)):
        prediction = rlm(context=context)
    assert prediction.total == sum(int(t) ** 2 for t in context.split()) == 173
    assert prediction.answer == "BIG SMALL"
    assert prediction.n_chars == len(context)
    outputs = [entry["output"] for entry in prediction.trajectory]
    assert outputs[0].strip() == "8 173"
    assert outputs[1].strip() == "['BIG', 'SMALL'] 15"
    assert list(tmp_path.iterdir()) == []  # the per-forward workspace was removed
