"""How a serving process ends (``fleet_lsp.transport.finish_process``): its exit callbacks run,
but neither a callback that never returns nor an import whose lock a stuck thread holds keeps
the process after ``exit``. With ``sys.exit`` both scripts below hang for good (the second is
the shape of a CI hang: the main thread waiting on a module lock at interpreter exit)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

TIMEOUT = 30.0


def run_script(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body), encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def test_exit_callbacks_run_and_the_exit_code_is_kept(tmp_path: Path) -> None:
    done = run_script(
        tmp_path,
        """
        import atexit, pathlib
        from fleet_lsp.transport import finish_process
        atexit.register(pathlib.Path("cleaned").write_text, "yes")
        print("before", flush=False)
        finish_process(3, grace=5)
        """,
    )
    assert done.returncode == 3
    assert (tmp_path / "cleaned").read_text() == "yes"
    assert done.stdout == "before\n"  # buffered output is flushed


def test_an_exit_callback_that_never_returns_does_not_keep_the_process(tmp_path: Path) -> None:
    done = run_script(
        tmp_path,
        """
        import atexit, threading
        from fleet_lsp.transport import finish_process
        atexit.register(threading.Event().wait)
        finish_process(0, grace=0.5)
        """,
    )
    assert done.returncode == 0


def test_an_import_locked_by_a_stuck_thread_does_not_keep_the_process(tmp_path: Path) -> None:
    (tmp_path / "slow_module.py").write_text(
        "import threading\nSTARTED.set()\nthreading.Event().wait()\n", encoding="utf-8"
    )
    done = run_script(
        tmp_path,
        """
        import atexit, builtins, sys, threading
        sys.path.insert(0, ".")
        builtins.STARTED = threading.Event()
        from fleet_lsp.transport import finish_process

        def import_slow_module():
            import slow_module  # noqa: F401

        threading.Thread(target=import_slow_module, daemon=True).start()
        builtins.STARTED.wait()
        atexit.register(import_slow_module)  # waits on the module lock the thread holds
        finish_process(1, grace=0.5)
        """,
    )
    assert done.returncode == 1
