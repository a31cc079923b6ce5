-- User commands for fleet.nvim; call require('fleet').setup({...}) to configure.
-- :Fleet {subcommand} (lua/fleet/command.lua) does everything; the :FleetXxx commands below are
-- its aliases (kept from before :Fleet), and <Plug>(fleet-...) mappings are there to map.
if vim.g.loaded_fleet then
  return
end
vim.g.loaded_fleet = true

local function command()
  return require('fleet.command')
end

vim.api.nvim_create_user_command('Fleet', function(a) command().dispatch(a) end, {
  nargs = '*',
  bang = true,
  desc = 'Fleet: :Fleet {subcommand} (:Fleet help)',
  complete = function(arglead, cmdline, pos) return command().complete(arglead, cmdline, pos) end,
})

-- alias = the :Fleet subcommand it runs
local aliases = {
  FleetNewSession = 'new',
  FleetLoadSession = 'load',
  FleetSessions = 'sessions',
  FleetSession = 'session',
  FleetAttach = 'attach',
  FleetSetDataset = 'dataset',
  FleetMode = 'mode',
  FleetRun = 'run',
  FleetCancel = 'cancel',
  FleetOpen = 'open',
  FleetArtifacts = 'artifacts',
  FleetTrace = 'trace',
  FleetLabel = 'label',
  FleetHistory = 'history',
  FleetMemory = 'memory',
  FleetModels = 'models',
  FleetRestart = 'restart',
}

for name, sub in pairs(aliases) do
  vim.api.nvim_create_user_command(name, function(a)
    command().run(sub, a.fargs, a.args, a.bang)
  end, {
    nargs = '*',
    bang = true,
    desc = 'Fleet: alias of :Fleet ' .. sub,
    complete = function(arglead) return command().complete_args(sub, arglead) end,
  })
end

-- <Plug>(fleet-<subcommand>) for the subcommands that need no argument, e.g.
--   vim.keymap.set('n', '<leader>fr', '<Plug>(fleet-run)')
for _, sub in ipairs({ 'run', 'cancel', 'session', 'sessions', 'attach', 'artifacts', 'trace',
  'label', 'history', 'memory', 'models', 'new', 'restart' }) do
  vim.keymap.set('n', ('<Plug>(fleet-%s)'):format(sub), function()
    command().run(sub, {}, '', false)
  end, { desc = 'Fleet: ' .. sub })
end

if not vim.g.fleet_no_auto_setup then
  require('fleet').setup(vim.g.fleet_options)
end
