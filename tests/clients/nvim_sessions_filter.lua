-- Headless Neovim scenario driven by tests/clients/test_nvim_sessions_filter.py: Sessions created
-- by servers on two host names (FLEET_HOST_NAME), then :Fleet sessions with and without filters
-- against the real server; records each picker's items and the notifications. Writes JSON.
local env = vim.env
vim.opt.runtimepath:prepend(env.FLEET_NVIM_PLUGIN)
vim.g.fleet_no_auto_setup = true
vim.cmd('runtime plugin/fleet.lua')

local report = { steps = {}, errors = {} }
local notes = {}
vim.notify = function(msg, level) table.insert(notes, { msg = msg, level = level }) end
local shown = nil -- the items of the last picker (then dismissed)
vim.ui.select = function(items, opts, on_choice)
  shown = vim.tbl_map(function(i) return opts.format_item(i) end, items)
  vim.schedule(function() on_choice(nil) end)
end

local function finish(code)
  local file = assert(io.open(env.FLEET_NVIM_OUT, 'w'))
  file:write(vim.json.encode(report))
  file:close()
  vim.cmd(code == 0 and 'qa!' or ('cquit ' .. code))
end

local ok, err = pcall(function()
  local fleet = require('fleet')
  local python = vim.json.decode(env.FLEET_NVIM_CMD)
  local function serve_as(host)
    fleet.setup({ cmd = vim.list_extend({ 'env', 'FLEET_HOST_NAME=' .. host }, python) })
    fleet.restart(function() end)
  end
  local function new(id)
    local done = false
    fleet.new_session(id, function(e) assert(not e, e and e.message); done = true end)
    assert(vim.wait(60000, function() return done end, 20), 'no session ' .. id)
  end
  serve_as('host-b')
  new('theirs')
  serve_as(env.FLEET_HOST_NAME) -- this Neovim's host: what `mine` means
  new('mine1')
  local function list(name, command)
    shown, notes = nil, {}
    vim.cmd(command)
    assert(vim.wait(30000, function() return shown ~= nil or #notes > 0 end, 20), name .. ' never answered')
    report.steps[name] = { items = shown, notes = vim.tbl_map(function(n) return n.msg end, notes) }
  end
  list('all', 'Fleet sessions')
  list('mine', 'Fleet sessions mine')
  list('host_b', 'Fleet sessions host=host-b')
  list('nobody', 'Fleet sessions user=nobody-here')
  list('since', 'Fleet sessions since=1d')
  list('bad', 'Fleet sessions yesterday')
  report.steps.completion = vim.fn.getcompletion('Fleet sessions ', 'cmdline')
end)

if not ok then
  table.insert(report.errors, tostring(err))
  finish(3)
else
  finish(0)
end
