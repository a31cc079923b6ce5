"""fleet.nvim's :FleetHistory shows a stored Turn's outcome: a Turn this Neovim did not hear end
(run before a restart) whose stored ``TurnSummary.outcome`` is ``partial`` reads "completed with
errors" and its reasons, never a clean "completed". Pure Lua in a headless Neovim:
``fleet.request`` and ``fleet.session_id`` are stubbed with a fabricated
``fleet/session/history`` answer (no server)."""

from __future__ import annotations

from pathlib import Path

from tests.clients.test_nvim import run_lua

CHECK = r"""
vim.opt.runtimepath:prepend('{plugin}')
local fleet = require('fleet')
local ui = require('fleet.ui')
local asked = {{}}
fleet.session_id = function() return 's1' end
fleet.request = function(method, params, callback)
  table.insert(asked, method)
  callback(nil, {{ turns = {{
    {{ turnId = 't1', seq = 1, status = 'completed', task = 'sum it', route = 'rlm', answer = '42',
      createdAt = 'now', outcome = {{ kind = 'partial', reasons = {{
        {{ kind = 'sandbox_errors', count = 2, detail = '2 sandbox cells failed' }},
        {{ kind = 'child_failed', count = 1, detail = '1 child agent failed' }} }} }} }},
    {{ turnId = 't2', seq = 2, status = 'completed', task = 'old', route = 'rlm',
      createdAt = 'now' }},
    {{ turnId = 't3', seq = 3, status = 'completed', task = 'clean', route = 'rlm',
      createdAt = 'now', outcome = {{ kind = 'submitted', reasons = {{}} }} }},
  }} }})
end
ui.history()
local shown = vim.wait(5000, function() return vim.bo.filetype == 'fleethistory' end, 10)
assert(shown, 'no history buffer')
assert(asked[1] == 'fleet/session/history', vim.inspect(asked))
for _, line in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do
  io.stdout:write(line, '\n')
end
"""


def test_fleet_history_shows_a_stored_partial_outcome_as_completed_with_errors(
    tmp_path: Path,
) -> None:
    out = run_lua(tmp_path, CHECK)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "Fleet history of s1  (<CR> opens a Turn's trace)",
        "#1  completed with errors rlm    sum it",
        "      ! 2 sandbox cells failed; 1 child agent failed",
        "      → 42",
        # a summary stored before outcomes existed, and a clean one: plain "completed"
        "#2  completed rlm    old",
        "#3  completed rlm    clean",
    ], out.stdout
