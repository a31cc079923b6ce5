-- Headless Neovim scenario driven by tests/clients/test_nvim_trust.py: fleet.nvim starts the
-- server in a folder with config/fleet.toml and .env, and reads them only through trust
-- (vim.secure's database in a private XDG_STATE_HOME, or trust_workspace_config). For each case
-- it records what the real server read (fleet/debug/info's sources), the client's cmd_env and
-- the notifications. Writes a JSON report.
local env = vim.env
vim.opt.runtimepath:prepend(env.FLEET_NVIM_PLUGIN)
vim.g.fleet_no_auto_setup = true
vim.cmd('runtime plugin/fleet.lua')

local report = { cases = {}, errors = {} }
local notes = {}
vim.notify = function(msg, level)
  table.insert(notes, { msg = msg, level = level })
end
vim.fn.confirm = function()
  error('vim.secure asked interactively; the test pre-populates the trust database')
end

local function finish(code)
  local file = assert(io.open(env.FLEET_NVIM_OUT, 'w'))
  file:write(vim.json.encode(report))
  file:close()
  vim.cmd(code == 0 and 'qa!' or ('cquit ' .. code))
end

local function server_read(fleet)
  local info, err = fleet.request_sync('fleet/debug/info', vim.empty_dict(), 90000)
  assert(not err and info, err and err.message or 'no fleet/debug/info answer')
  return {
    depth = info.settings['runtime.max_agent_depth'].source,
    children = info.settings['runtime.max_child_sandboxes'].source,
  }
end

local function stop(client)
  client:stop()
  assert(vim.wait(10000, function() return client:is_stopped() end, 20), 'server did not stop')
end

local function trust(root, actions)
  for name, action in pairs(actions or {}) do
    local path = root .. '/' .. name
    local trusted, why
    if action == 'allow' then -- as :trust does: from a buffer showing the file
      vim.cmd.edit(vim.fn.fnameescape(path))
      local buf = vim.api.nvim_get_current_buf()
      trusted, why = vim.secure.trust({ action = 'allow', bufnr = buf })
      vim.cmd.bwipeout(buf)
    else
      trusted, why = vim.secure.trust({ action = action, path = path })
    end
    assert(trusted, why)
  end
end

local ok, err = pcall(function()
  local cases = vim.json.decode(env.FLEET_NVIM_CASES)
  for _, case in ipairs(cases) do
    trust(case.root, case.trust)
    package.loaded['fleet'] = nil -- a fresh plugin state, as in a new Neovim
    local fleet = require('fleet')
    local opts = { cmd = vim.json.decode(env.FLEET_NVIM_CMD), root_dir = case.root }
    if case.option ~= vim.NIL then
      opts.trust_workspace_config = case.option
    end
    fleet.setup(opts)
    notes = {}
    local client = fleet.client()
    local result = {
      read = server_read(fleet),
      cmd_env = client.config.cmd_env or vim.NIL,
      ignoring = fleet.ignoring_workspace_config(),
    }
    stop(client)
    if case.again then -- a second start in the same Neovim: no second notification
      local again = fleet.client()
      result.read_again = server_read(fleet)
      stop(again)
    end
    if case.then_allow then -- the documented way back: :trust the file, then :FleetRestart
      trust(case.root, case.then_allow)
      local restarted = fleet.client()
      vim.cmd('FleetRestart')
      assert(vim.wait(10000, function() return restarted:is_stopped() end, 20), 'no restart')
      result.read_after_restart = server_read(fleet)
      result.ignoring_after_restart = fleet.ignoring_workspace_config()
      stop(fleet.client())
    end
    result.notes = notes
    report.cases[case.name] = result
  end
end)
if not ok then
  table.insert(report.errors, tostring(err))
end
finish(ok and 0 or 1)
