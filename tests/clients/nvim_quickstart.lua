-- Headless Neovim scenario driven by tests/clients/test_nvim.py: the quickstart through the
-- fleet.nvim plugin against a real `fleet-lsp serve` over stdio. Writes a JSON report.
local env = vim.env
vim.opt.runtimepath:prepend(env.FLEET_NVIM_PLUGIN)
vim.g.fleet_no_auto_setup = true
vim.cmd('runtime plugin/fleet.lua')

local report = { steps = {}, progress = {}, errors = {} }
local function step(name, value)
  report.steps[name] = value
end
local function finish(code)
  local file = assert(io.open(env.FLEET_NVIM_OUT, 'w'))
  file:write(vim.json.encode(report))
  file:close()
  vim.cmd(code == 0 and 'qa!' or ('cquit ' .. code))
end

local ok, err = pcall(function()
  local fleet = require('fleet')
  fleet.setup({ cmd = vim.json.decode(env.FLEET_NVIM_CMD) })
  vim.api.nvim_create_autocmd('LspProgress', {
    callback = function(ev)
      local v = ev.data.params.value
      table.insert(report.progress, {
        token = ev.data.params.token,
        kind = v.kind,
        title = v.title,
        message = v.message,
        agentId = v.agentId,
        status = fleet.status(),
      })
    end,
  })

  local function await(start, timeout_ms)
    local done, err_, result = false, nil, nil
    start(function(e, r)
      done, err_, result = true, e, r
    end)
    assert(vim.wait(timeout_ms or 30000, function() return done end, 20), 'timed out')
    return err_, result
  end

  local e, info = await(function(cb) fleet.new_session('nvim1', cb) end)
  assert(not e, e and e.message)
  step('session', info)
  local e2, attached = await(function(cb) fleet.attach(env.FLEET_NVIM_CSV, cb) end)
  assert(not e2, e2 and e2.message)
  step('attached', attached)
  local e3, dataset = await(function(cb) fleet.set_dataset('files/sales.csv', 'sales', cb) end)
  assert(not e3, e3 and e3.message)
  step('dataset', dataset)

  local e4, result = await(function(cb) fleet.run_turn(env.FLEET_NVIM_TASK, cb) end, 180000)
  assert(not e4, e4 and e4.message)
  step('turn', result)
  step('status_after', fleet.status())

  fleet.open(fleet.artifact_uri('revenue_by_region.csv'))
  step('artifact_lines', vim.api.nvim_buf_get_lines(0, 0, -1, false))
  step('artifact_modifiable', vim.bo.modifiable)
  step('artifact_name', vim.api.nvim_buf_get_name(0))

  if result.traceId then
    fleet.open(('fleet:/sessions/nvim1/traces/%s.md'):format(result.traceId))
    step('trace_lines', vim.api.nvim_buf_get_lines(0, 0, 40, false))
    step('trace_filetype', vim.bo.filetype)
  end

  local e5, bad = await(function(cb) fleet.request('fleet/session/load', { sessionId = '../x' }, cb) end)
  step('bad_request', { code = e5 and e5.code, message = e5 and e5.message, result = bad })

  -- cancel a slow Turn through its progress token
  local cancelled = nil
  local seen_before = #report.progress -- only this Turn's reports count below
  fleet.run_turn(env.FLEET_NVIM_SLOW, function(err_, res) cancelled = { err = err_, result = res } end)
  assert(vim.wait(60000, function()
    for i = seen_before + 1, #report.progress do
      local p = report.progress[i]
      if p.kind == 'report' and p.message and p.message:match('cell') then return true end
    end
    return false
  end, 20), 'no progress report for the slow Turn')
  step('cancel_sent', fleet.cancel())
  assert(vim.wait(60000, function() return cancelled ~= nil end, 20), 'cancel did not end the Turn')
  step('cancelled', cancelled)
end)

if not ok then
  table.insert(report.errors, tostring(err))
  finish(3)
else
  finish(0)
end
