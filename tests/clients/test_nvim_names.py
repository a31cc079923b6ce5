"""fleet.nvim shows outside text visibly (issue 19): a file name or answer line with C1 controls or
bidi overrides is rendered escaped in the session buffer and pickers, in a real headless Neovim."""

from __future__ import annotations

from pathlib import Path

from tests.clients.test_nvim import run_lua

CHECK = r"""
vim.opt.runtimepath:prepend('{plugin}')
local tree = require('fleet.tree')
local ui = require('fleet.ui')
io.stdout:write(tree.visible('invoice\u{{202E}}txt.exe'), '\n')
io.stdout:write(tree.lines('csi \u{{9b}}2J esc \27]0;t\7 iso \u{{2066}}x\u{{2069}}', 1)[1], '\n')
io.stdout:write(ui.short('files/a\u{{202D}}b.csv', 40), '\n')
"""


def test_names_with_bidi_overrides_and_c1_controls_are_shown_escaped(tmp_path: Path) -> None:
    out = run_lua(tmp_path, CHECK)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines == [
        "invoice<U+202E>txt.exe",
        "csi \\x9b2J esc ?]0;t? iso <U+2066>x<U+2069>",
        "files/a<U+202D>b.csv",
    ], lines
