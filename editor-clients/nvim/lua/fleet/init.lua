-- fleet.nvim: the Fleet agent runtime in Neovim (>= 0.11), as a client of `fleet-lsp serve`.
local M = {}

local defaults = {
  cmd = { 'fleet-lsp', 'serve' },
  root_dir = nil, -- where the server starts (its .fleet/); defaults to the current directory
  settings = {}, -- initializationOptions.fleet.settings (configuration overrides)
  turn_events = true, -- receive fleet/turn/didEmit (the session buffer's live agent tree)
  on_event = nil, -- function(event) called for each fleet/turn/didEmit
  -- The root's config/fleet.toml and .env (a cloned repository wrote them): nil = read them only
  -- if vim.secure trusts them (it asks), true = read them, false = never (:help fleet-trust).
  trust_workspace_config = nil,
}

--- The workspace files the server reads from its working directory (config/fleet.toml, .env).
M.WORKSPACE_CONFIG_FILES = { 'config/fleet.toml', '.env' }
--- The server's switch that makes it read neither (docs/configuration.md, Scopes).
M.IGNORE_WORKSPACE_CONFIG_ENV = 'FLEET_IGNORE_WORKSPACE_CONFIG'

local state = {
  opts = vim.deepcopy(defaults),
  client_id = nil,
  session_id = nil,
  turn = nil, -- { id = ..., token = ..., request_id = ... }
  progress = {}, -- token -> last progress value
  ignoring_workspace_config = false, -- the running server ignores the root's config files
  trust_notified = false, -- the one notification about ignored workspace files was given
}

local function notify(msg, level)
  vim.notify('fleet: ' .. msg, level or vim.log.levels.INFO)
end

--- Whether the server may read `root`'s config/fleet.toml and .env: true when there are none,
--- when `trust_workspace_config` is true, or when |vim.secure.read()| trusts every one of them
--- (it asks about a file it does not know). Second result: the files not trusted.
function M.workspace_trusted(root)
  local present = {}
  for _, name in ipairs(M.WORKSPACE_CONFIG_FILES) do
    local path = vim.fs.joinpath(root, name)
    if vim.fn.filereadable(path) == 1 then
      table.insert(present, path)
    end
  end
  local choice = state.opts.trust_workspace_config
  if #present == 0 or choice == true then
    return true, {}
  end
  if choice == false then
    return false, present
  end
  local untrusted = {}
  for _, path in ipairs(present) do
    if vim.secure.read(path) == nil then -- nil: not trusted (denied, or not allowed when asked)
      table.insert(untrusted, path)
    end
  end
  return #untrusted == 0, untrusted
end

--- Whether the running server ignores the workspace's config/fleet.toml and .env.
function M.ignoring_workspace_config()
  return state.ignoring_workspace_config
end

--- The running fleet-lsp client, started on first use.
function M.client()
  local client = state.client_id and vim.lsp.get_client_by_id(state.client_id)
  if client and not client:is_stopped() then
    return client
  end
  local opts = state.opts
  local root = opts.root_dir or vim.fn.getcwd()
  local trusted, untrusted = M.workspace_trusted(root)
  local cmd_env = nil
  state.ignoring_workspace_config = not trusted
  if not trusted then
    cmd_env = { [M.IGNORE_WORKSPACE_CONFIG_ENV] = '1' }
    if not state.trust_notified then
      state.trust_notified = true
      local names = vim.tbl_map(function(path)
        return vim.fn.fnamemodify(path, ':~:.')
      end, untrusted)
      notify(('not trusted: %s, so the server ignores the workspace configuration '
        .. '(config/fleet.toml and .env). If you trust them: :trust each file, or '
        .. 'trust_workspace_config = true, then :FleetRestart (:help fleet-trust)')
        :format(table.concat(names, ', ')), vim.log.levels.WARN)
    end
  end
  local id = vim.lsp.start({
    name = 'fleet',
    cmd = opts.cmd,
    cmd_env = cmd_env,
    root_dir = root,
    cmd_cwd = opts.root_dir, -- the server keeps .fleet/ in its working directory
    init_options = {
      fleet = {
        protocolVersion = 1,
        client = 'neovim',
        turnEvents = opts.turn_events,
        settings = opts.settings,
      },
    },
    handlers = {
      ['fleet/turn/didEmit'] = function(_, event)
        require('fleet.tree').on_event(event)
        if opts.on_event then
          opts.on_event(event)
        end
      end,
      ['fleet/session/didChange'] = function() end,
    },
  }, { attach = false })
  state.client_id = id
  return vim.lsp.get_client_by_id(id)
end

--- Stop the server (if it runs) and start it again: after |:trust|, to read the workspace's
--- configuration files. `callback(client)` runs once the new one is started.
function M.restart(callback)
  local old = state.client_id and vim.lsp.get_client_by_id(state.client_id)
  state.client_id = nil
  state.turn = nil
  state.progress = {}
  state.trust_notified = false -- a restart the user asked for says again what it ignores
  local function start()
    local client = M.client()
    if callback then
      callback(client)
    end
  end
  if not old then
    return start()
  end
  old:stop()
  if not vim.wait(5000, function() return old:is_stopped() end, 20) then
    old:stop(true)
  end
  return start()
end

--- Send a fleet/* request; `callback(err, result)` runs on the main loop.
function M.request(method, params, callback)
  local client = M.client()
  local ok, request_id = client:request(method, params or vim.empty_dict(), function(err, result)
    if callback then
      callback(err, result)
    elseif err then
      notify(method .. ': ' .. err.message, vim.log.levels.ERROR)
    end
  end)
  if not ok then
    notify('could not send ' .. method, vim.log.levels.ERROR)
  end
  return request_id
end

--- Synchronous request for commands that need the answer now (bounded wait).
function M.request_sync(method, params, timeout_ms)
  local response = M.client():request_sync(method, params or vim.empty_dict(), timeout_ms or 10000)
  if not response then
    return nil, { message = method .. ' timed out' }
  end
  return response.result, response.err
end

function M.session_id()
  return state.session_id
end

--- The options in effect (after setup).
function M.options()
  return state.opts
end

function M.use_session(session_id)
  state.session_id = session_id
end

local function need_session()
  if not state.session_id then
    notify('no session: run :FleetNewSession or :FleetLoadSession first', vim.log.levels.WARN)
    return false
  end
  return true
end

--- Send a request answered by a SessionInfo and make that Session current.
local function request_session(method, params, callback)
  M.request(method, params, function(err, info)
    if not err then
      state.session_id = info.sessionId
      require('fleet.tree').buffer(info.sessionId, true)
    end
    if callback then
      callback(err, info)
    elseif err then
      notify(err.message, vim.log.levels.ERROR)
    else
      notify('session ' .. info.sessionId .. ' (' .. info.mode .. ')')
    end
  end)
end

function M.new_session(session_id, callback)
  local params = session_id and session_id ~= '' and { sessionId = session_id } or vim.empty_dict()
  request_session('fleet/session/new', params, callback)
end

function M.load_session(session_id, callback)
  request_session('fleet/session/load', { sessionId = session_id }, callback)
end

function M.attach(path, callback)
  if not need_session() then
    return
  end
  local uri = vim.uri_from_fname(vim.fn.fnamemodify(path, ':p'))
  M.request('fleet/context/attach', { sessionId = state.session_id, uri = uri }, callback)
end

function M.set_dataset(path, description, callback)
  if not need_session() then
    return
  end
  local params = { sessionId = state.session_id, path = path, description = description }
  M.request('fleet/context/setDataset', params, callback)
end

function M.set_mode(mode, callback)
  if not need_session() then
    return
  end
  M.request('fleet/session/setMode', { sessionId = state.session_id, mode = mode }, callback)
end

--- Run a Turn with a client-created progress token; `callback(err, result)` gets the TurnResult.
function M.run_turn(task, callback)
  if not need_session() then
    return
  end
  if state.turn then
    notify('a Turn is already running; :FleetCancel stops it', vim.log.levels.WARN)
    return
  end
  local token = 'fleet-nvim-' .. tostring(vim.uv.hrtime())
  state.turn = { token = token }
  local params = { sessionId = state.session_id, task = task, workDoneToken = token }
  state.turn.request_id = M.request('fleet/turn/run', params, function(err, result)
    state.turn = nil
    if callback then
      callback(err, result)
    elseif err then
      notify('Turn failed: ' .. err.message, vim.log.levels.ERROR)
    else
      local message, level = M.turn_message(result)
      notify(message, level)
    end
  end)
end

--- The message that reports a finished Turn (a TurnResult), and its level: "Turn <id> completed:
--- <answer>", or "Turn <id> completed with errors: <reasons> — answer: <answer>" (a warning) when
--- its outcome is not `submitted`. Server text is shown as text (tree.lines: no controls, bounded).
function M.turn_message(result)
  local tree = require('fleet.tree')
  local function text(value, max_lines)
    return table.concat(tree.lines(value, max_lines), '\n')
  end
  local shown, reasons = tree.shown_status(result.status, result.outcome)
  local head = ('Turn %s %s'):format(text(result.turnId, 1), text(shown, 1))
  if reasons then
    local answer = type(result.answer) == 'string' and result.answer ~= ''
      and (' — answer: ' .. text(result.answer, 20)) or ''
    return ('%s: %s%s'):format(head, (text(reasons, 5):gsub('\n', ' ')), answer), vim.log.levels.WARN
  end
  return ('%s: %s'):format(head, text(result.answer or '', 20)), vim.log.levels.INFO
end

--- Cancel the running Turn through its progress token (the server ends the same Turn task).
function M.cancel()
  if not state.turn then
    notify('no Turn is running')
    return false
  end
  M.client():notify('window/workDoneProgress/cancel', { token = state.turn.token })
  return true
end

--- Open an artifact or trace (a fleet:/ URI) in a read-only buffer.
function M.open(uri)
  vim.cmd.edit(vim.fn.fnameescape(uri))
end

function M.artifact_uri(path)
  local rest = path:gsub('^artifacts/', '')
  return ('fleet:/sessions/%s/artifacts/%s'):format(state.session_id, rest)
end

function M.list_artifacts(callback)
  if not need_session() then
    return
  end
  M.request('fleet/artifact/list', { sessionId = state.session_id }, callback)
end

function M.label_trace(trace_id, labels, callback)
  local params = vim.tbl_extend('force', { traceId = trace_id }, labels or {})
  M.request('fleet/trace/label', params, callback)
end

--- BufReadCmd for fleet:/ URIs: a read-only buffer filled from workspace/textDocumentContent
--- when the answer arrives (the editor never blocks on it); `b:fleet_loading` is true until then.
function M.read_document(buf, uri)
  local function fill(lines, loading)
    if not vim.api.nvim_buf_is_valid(buf) then
      return
    end
    vim.bo[buf].modifiable = true
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    vim.bo[buf].modifiable = false
    vim.b[buf].fleet_loading = loading
  end
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].swapfile = false
  vim.bo[buf].readonly = true
  vim.bo[buf].filetype = uri:match('%.md$') and 'markdown' or (uri:match('%.csv$') and 'csv' or '')
  fill({ 'fleet: loading ' .. uri .. ' …' }, true)
  M.request('workspace/textDocumentContent', { uri = uri }, function(err, result)
    local text = err and ('fleet: ' .. tostring(err.message)) or result.text
    fill(vim.split(text, '\n', { plain = true }), false)
  end)
end

--- A one-line status for statuslines: the newest progress message of every open token.
function M.status()
  local parts = {}
  for _, value in pairs(state.progress) do
    local text = value.title or ''
    if value.message then
      text = (text ~= '' and (text .. ': ') or '') .. value.message
    end
    table.insert(parts, text)
  end
  table.sort(parts)
  return table.concat(parts, ' | ')
end

local function on_progress(ev)
  local client = state.client_id and vim.lsp.get_client_by_id(state.client_id)
  if not client or ev.data.client_id ~= client.id then
    return
  end
  local params = ev.data.params
  local value = params.value or {}
  if value.kind == 'end' then
    state.progress[params.token] = nil
  else
    local previous = state.progress[params.token] or {}
    state.progress[params.token] = {
      title = value.title or previous.title,
      message = value.message or previous.message,
    }
  end
  vim.cmd.redrawstatus()
end

function M.setup(opts)
  state.opts = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts or {})
  local group = vim.api.nvim_create_augroup('fleet', { clear = true })
  vim.api.nvim_create_autocmd('LspProgress', { group = group, callback = on_progress })
  vim.api.nvim_create_autocmd('BufReadCmd', {
    group = group,
    pattern = 'fleet:/*',
    callback = function(ev)
      M.read_document(ev.buf, ev.match)
    end,
  })
end

return M
