-- :checkhealth fleet: the server command and version, the database, the sandbox's isolation and
-- the model endpoint, from the server's own fleet/debug/info (and fleet/models/list).
local M = {}

local function line(text)
  return require('fleet.tree').lines(text, 1)[1] or ''
end

function M.check()
  local health = vim.health
  local fleet = require('fleet')
  health.start('fleet: server')
  if vim.fn.has('nvim-0.11') == 0 then
    health.error('Neovim 0.11 or newer is required')
  end
  local cmd = fleet.options().cmd
  local program = type(cmd) == 'table' and cmd[1] or nil
  if not program or vim.fn.executable(program) == 0 then
    health.error(('server command not executable: %s'):format(line(vim.inspect(cmd))),
      { 'install fleet-lsp (uv tool install fleet-lsp, or pip install fleet-lsp)',
        "or set require('fleet').setup({ cmd = { '/path/to/fleet-lsp', 'serve' } })" })
    return
  end
  health.ok('server command: ' .. line(table.concat(cmd, ' ')))
  local ok, client = pcall(fleet.client)
  if not ok or not client then
    health.error('the server did not start: ' .. line(tostring(client)))
    return
  end
  local info, err = fleet.request_sync('fleet/debug/info', vim.empty_dict(), 60000)
  if err or not info then
    health.error('fleet/debug/info failed: ' .. line(err and err.message or 'no answer'))
    return
  end
  local server = info.server or {}
  health.ok(('fleet-lsp %s (protocol %s, Python %s)'):format(line(server.version),
    line(info.protocolVersion), line(server.python)))
  if fleet.ignoring_workspace_config() then
    health.warn('the workspace configuration (config/fleet.toml, .env) is ignored: not trusted',
      { ':trust each file (or setup({ trust_workspace_config = true })), then :FleetRestart' })
  end

  health.start('fleet: database')
  health.ok(('%s, state in %s, %s sessions'):format(line(info.database), line(info.stateDir),
    line(info.sessions)))

  health.start('fleet: sandbox')
  local sandbox = info.sandbox or {}
  if sandbox.backend ~= 'local' then
    health.ok('backend ' .. line(sandbox.backend))
  elseif sandbox.isolation == 'bwrap' then
    local layers = { line(sandbox.bwrapVersion or 'bubblewrap') }
    if sandbox.cgroupPids then table.insert(layers, 'pids cgroup') end
    if sandbox.cgroupMemory then table.insert(layers, 'memory cgroup') end
    table.insert(layers, 'fork bound: ' .. line(sandbox.forkBound))
    health.ok('local, isolated: ' .. table.concat(layers, ', '))
  elseif sandbox.isolation == 'none' then
    health.warn('local, UNISOLATED: generated code can touch your files',
      { 'install bubblewrap (apt-get install bubblewrap)' })
  else
    health.error('local sandbox refused: bubblewrap (bwrap) is not available',
      { 'install bubblewrap; only on a disposable machine: FLEET_ALLOW_UNISOLATED_SANDBOX=true' })
  end

  health.start('fleet: model endpoint')
  for _, m in ipairs(info.models or {}) do
    if m.configured then
      health.ok(('%s: %s at %s'):format(line(m.role), line(m.model), line(m.endpoint or 'provider default')))
    else
      health.warn(('%s: not configured: %s'):format(line(m.role), line(m.problem)),
        { 'set FLEET_LM_API_BASE and FLEET_LM_MODEL (and FLEET_LM_API_KEY) in the environment or .env' })
    end
  end
  local listed, lerr = fleet.request_sync('fleet/models/list', vim.empty_dict(), 15000)
  if lerr and lerr.code == -32601 then
    health.info('this server does not list models (fleet/models/list)')
  elseif lerr then
    health.warn('the endpoint did not list models: ' .. line(lerr.message))
  elseif listed then
    health.ok(('the endpoint lists %d models'):format(#(listed.models or {})))
  end
end

return M
