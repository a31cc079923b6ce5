"""fleet.nvim's feedback without a server or plugins, in a real headless Neovim: a missing
server is one ERROR notification per command (the command tried, :checkhealth fleet), never a
Lua stack trace; the progress echo turns itself on only when nothing else consumes LspProgress."""

from __future__ import annotations

from pathlib import Path

from tests.clients.test_nvim import run_lua

MISSING = r"""
vim.opt.runtimepath:prepend('{plugin}')
vim.g.fleet_no_auto_setup = true
vim.cmd('runtime plugin/fleet.lua')
local fleet = require('fleet')
fleet.setup({{ cmd = {{ 'fleet-lsp-not-installed-here', 'serve' }} }})
local notes = {{}}
vim.notify = function(msg, level) table.insert(notes, {{ msg = msg, level = level }}) end
-- the first commands a user types, each as a command line (errors would surface as E5108)
local commands = {{ 'Fleet new demo', 'FleetSessions', 'Fleet load demo', 'Fleet sessions' }}
for _, cmd in ipairs(commands) do
  local ok, err = pcall(vim.cmd, cmd)
  if not ok then io.stdout:write('ERROR ', tostring(err), '\n') end
end
vim.wait(500, function() return false end, 20)
for _, n in ipairs(notes) do
  io.stdout:write(tostring(n.level), ' ', n.msg, '\n')
end
"""


def test_a_missing_server_is_one_error_naming_the_command_and_checkhealth(
    tmp_path: Path,
) -> None:
    out = run_lua(tmp_path, MISSING)
    assert out.returncode == 0, out.stderr
    assert "stack traceback" not in out.stdout + out.stderr
    assert "attempt to index" not in out.stdout + out.stderr
    lines = out.stdout.splitlines()
    # each of the four commands (each needing the server, some several requests) says it once
    assert len(lines) == 4 and len(set(lines)) == 1, lines
    level, message = lines[0].split(" ", 1)
    assert level == "4"  # vim.log.levels.ERROR
    assert "`fleet-lsp-not-installed-here serve`" in message
    assert message.startswith("fleet: cannot start the server: `fleet-lsp-not-installed-here`")
    assert message.endswith("see :checkhealth fleet")


PROGRESS = r"""
vim.opt.runtimepath:prepend('{plugin}')
vim.g.fleet_no_auto_setup = true
vim.cmd('runtime plugin/fleet.lua')
local fleet = require('fleet')
fleet.setup({{}})
io.stdout:write('alone ', tostring(fleet.progress_consumed()), '\n')
local id = vim.api.nvim_create_autocmd('LspProgress', {{ callback = function() end }})
io.stdout:write('with an LspProgress autocommand ', tostring(fleet.progress_consumed()), '\n')
vim.api.nvim_del_autocmd(id)
local builtin = vim.lsp.handlers['$/progress']
vim.lsp.handlers['$/progress'] = function(...) return builtin(...) end
io.stdout:write('with a replaced handler ', tostring(fleet.progress_consumed()), '\n')
"""


def test_the_progress_echo_is_on_only_when_nothing_else_shows_progress(tmp_path: Path) -> None:
    out = run_lua(tmp_path, PROGRESS)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "alone false",  # stock Neovim: the plugin echoes progress itself
        "with an LspProgress autocommand true",  # fidget.nvim, a statusline refresh, ...
        "with a replaced handler true",  # a plugin that took over $/progress
    ]


DOCUMENT = r"""
vim.opt.runtimepath:prepend('{plugin}')
local fleet = require('fleet')
for _, text in ipairs({{ 'a\r\nb\r\n', 'a\nb\n', 'a\nb', 'a\r\nb\nc\n', '' }}) do
  local lines, format, eol = fleet.document_lines(text)
  io.stdout:write(vim.json.encode({{ lines = lines, format = format, eol = eol }}), '\n')
end
"""


def test_document_lines_detect_crlf_and_the_final_newline(tmp_path: Path) -> None:
    import json

    out = run_lua(tmp_path, DOCUMENT)
    assert out.returncode == 0, out.stderr
    assert [json.loads(line) for line in out.stdout.splitlines()] == [
        {"lines": ["a", "b"], "format": "dos", "eol": True},
        {"lines": ["a", "b"], "format": "unix", "eol": True},
        {"lines": ["a", "b"], "format": "unix", "eol": False},
        {"lines": ["a\r", "b", "c"], "format": "unix", "eol": True},  # mixed: shown as it is
        {"lines": [""], "format": "unix", "eol": False},
    ]


LOAD = r"""
vim.opt.runtimepath:prepend('{plugin}')
vim.g.fleet_no_auto_setup = true
vim.cmd('runtime plugin/fleet.lua')
local fleet = require('fleet')
local tree = require('fleet.tree')
fleet.setup({{}})
local asked = {{}}
fleet.request = function(method, params, callback)  -- the server's answers, fabricated
  table.insert(asked, method .. ' ' .. (params.sessionId or ''))
  local answers = {{
    ['fleet/session/load'] = {{ sessionId = params.sessionId, mode = 'rlm', turnCount = 1,
      createdAt = '2026-12-01T10:00:00Z', updatedAt = '2026-12-01T10:00:00Z' }},
    ['fleet/session/history'] = {{ turns = {{ {{ turnId = 't9', seq = 7, status = 'completed',
      task = 'stored task of ' .. params.sessionId, answer = 'yes', traceId = 'tr9',
      createdAt = '2026-12-01T10:00:00Z' }} }} }},
  }}
  vim.schedule(function() callback(nil, answers[method]) end)
end
vim.notify = function() end
-- Session a's buffer is shown in a split; :FleetLoadSession b switches that window to b's
tree.show('a', {{ split = true }})
local win = vim.api.nvim_get_current_win()
vim.cmd('wincmd p')
vim.cmd('FleetLoadSession b')
assert(vim.wait(5000, function()
  return vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(win)) == 'fleet://session/b'
    and #tree.render_lines('b') > 2
end, 10), 'not switched')
io.stdout:write(table.concat(asked, '\n'), '\n')
for _, l in ipairs(vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(win), 0, -1, false)) do
  io.stdout:write(l, '\n')
end
for _, lhs in ipairs({{ '<Plug>(fleet-run)', '<Plug>(fleet-session)', '<Plug>(fleet-label)' }}) do
  io.stdout:write(lhs, ' ', vim.fn.maparg(lhs, 'n') ~= '' and 'mapped' or 'missing', '\n')
end
"""


def test_load_session_switches_the_shown_session_buffer_and_fills_it(tmp_path: Path) -> None:
    out = run_lua(tmp_path, LOAD)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["fleet/session/load b", "fleet/session/history b"]
    shown = lines[2 : lines.index("<Plug>(fleet-run) mapped")]
    assert shown[0] == "Fleet session b  (g? for help)"
    assert shown[2].startswith("Turn #7  [completed]")
    assert "Task: stored task of b" in shown
    assert "Trace: fleet:/sessions/b/traces/tr9.md" in shown
    assert lines[-3:] == [
        "<Plug>(fleet-run) mapped",
        "<Plug>(fleet-session) mapped",
        "<Plug>(fleet-label) mapped",
    ]
