-- User commands for fleet.nvim; call require('fleet').setup({...}) to configure.
if vim.g.loaded_fleet then
  return
end
vim.g.loaded_fleet = true

local function fleet()
  return require('fleet')
end

local function ui()
  return require('fleet.ui')
end

local commands = {
  FleetNewSession = { function(a) fleet().new_session(a.args) end, { nargs = '?' } },
  FleetLoadSession = { function(a) fleet().load_session(a.args) end, { nargs = 1 } },
  FleetSessions = { function() ui().sessions() end, {} },
  FleetSession = {
    function()
      local sid = fleet().session_id()
      if sid then
        require('fleet.tree').show(sid)
      else
        vim.notify('fleet: no session', vim.log.levels.WARN)
      end
    end,
    {},
  },
  FleetAttach = {
    function(a) fleet().attach(a.args ~= '' and a.args or vim.api.nvim_buf_get_name(0)) end,
    { nargs = '?', complete = 'file' },
  },
  FleetSetDataset = { function(a) fleet().set_dataset(a.fargs[1], a.fargs[2]) end, { nargs = '+' } },
  FleetMode = {
    function(a) fleet().set_mode(a.args) end,
    { nargs = 1, complete = function() return { 'hybrid', 'rlm', 'flex' } end },
  },
  FleetRun = { function(a) ui().run_prompt(a.args) end, { nargs = '*' } },
  FleetCancel = { function() fleet().cancel() end, {} },
  FleetOpen = { function(a) fleet().open(fleet().artifact_uri(a.args)) end, { nargs = 1 } },
  FleetArtifacts = { function() ui().artifacts() end, {} },
  FleetTrace = { function() ui().trace() end, {} },
  FleetLabel = { function() ui().label() end, {} },
  FleetHistory = { function() ui().history() end, {} },
  FleetMemory = { function() ui().memory() end, {} },
  FleetModels = { function(a) ui().models(a.bang) end, { bang = true } },
  FleetRestart = { function() fleet().restart() end, {} },
}

for name, spec in pairs(commands) do
  vim.api.nvim_create_user_command(name, spec[1], spec[2])
end

if not vim.g.fleet_no_auto_setup then
  fleet().setup(vim.g.fleet_options)
end
