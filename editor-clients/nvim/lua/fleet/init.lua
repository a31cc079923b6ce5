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
  -- Progress in the echo area: 'auto' = only when nothing else consumes LspProgress (no other
  -- LspProgress autocommand, Neovim's own $/progress handler), true = always, false = never.
  progress_echo = 'auto',
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
  missing_notified = false, -- this command's one notification about a server that cannot start
  echoed = nil, -- the last progress text echoed (progress_echo)
}

local function notify(msg, level)
  vim.notify('fleet: ' .. msg, level or vim.log.levels.INFO)
end

--- An error's message for the user, prefixed with `what` (a method or an action) unless the
--- server's message already starts with it (its invalid-params errors name the method).
function M.error_text(what, err)
  local message = type(err) == 'table' and tostring(err.message) or tostring(err)
  if what == nil or what == '' or vim.startswith(message, what) then
    return message
  end
  return what .. ': ' .. message
end

--- Notify an error once: an error the plugin already reported (`err.reported`, e.g. a server
--- that cannot start) is not reported again by each caller.
function M.notify_error(what, err)
  if type(err) == 'table' and err.reported then
    return
  end
  notify(M.error_text(what, err), vim.log.levels.ERROR)
end

--- The server command as one line, for messages.
local function command_line(cmd)
  if type(cmd) == 'table' then
    return table.concat(vim.tbl_map(tostring, cmd), ' ')
  end
  return tostring(cmd)
end

--- Why the configured server command cannot start (its program is not executable), or nil.
function M.missing_server()
  local cmd = state.opts.cmd
  if type(cmd) ~= 'table' then
    return nil -- a function (an RPC transport): nothing to check
  end
  local program = cmd[1]
  if type(program) ~= 'string' or vim.fn.executable(program) == 0 then
    return ('cannot start the server: `%s` is not an executable command (tried `%s`); install '
      .. "fleet-lsp or set require('fleet').setup({ cmd = ... }), see :checkhealth fleet")
      :format(tostring(program), command_line(cmd))
  end
  return nil
end

--- A user command begins: a server that cannot start is reported again (once per command).
function M.begin_command()
  state.missing_notified = false
end

local function report_missing(message)
  if not state.missing_notified then
    state.missing_notified = true
    notify(message, vim.log.levels.ERROR)
  end
  return { message = message, reported = true }
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

--- The running fleet-lsp client, started on first use; nil (and one ERROR notification, with
--- the command tried and a pointer to :checkhealth fleet) when the server cannot start. Second
--- result: that error (`{ message, reported = true }`).
function M.client()
  local client = state.client_id and vim.lsp.get_client_by_id(state.client_id)
  if client and not client:is_stopped() then
    return client
  end
  local missing = M.missing_server()
  if missing then
    return nil, report_missing(missing)
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
  client = id and vim.lsp.get_client_by_id(id)
  if not client then
    return nil, report_missing(('the server did not start (tried `%s`); see :checkhealth fleet')
      :format(command_line(opts.cmd)))
  end
  state.missing_notified = false
  return client
end

--- Whether the server runs (started by this Neovim and not stopped).
function M.running()
  local client = state.client_id and vim.lsp.get_client_by_id(state.client_id)
  return client ~= nil and not client:is_stopped()
end

--- Whether the running server lists `name` in capabilities.experimental.fleet.features (e.g.
--- `sessions.filter`); nil while that is not known (no server, or not initialized yet).
function M.has_feature(name)
  local client = state.client_id and vim.lsp.get_client_by_id(state.client_id)
  local caps = client and client.server_capabilities
  if not caps then
    return nil
  end
  local fleet = type(caps.experimental) == 'table' and caps.experimental.fleet or nil
  local features = type(fleet) == 'table' and fleet.features or nil
  return type(features) == 'table' and vim.tbl_contains(features, name)
end

--- Stop the server (if it runs) and start it again: after |:trust|, to read the workspace's
--- configuration files. `callback(client)` runs once the new one is started.
function M.restart(callback)
  local old = state.client_id and vim.lsp.get_client_by_id(state.client_id)
  state.client_id = nil
  state.turn = nil
  state.progress = {}
  state.trust_notified = false -- a restart the user asked for says again what it ignores
  state.missing_notified = false
  local function start()
    local client = M.client()
    if callback then
      callback(client)
    elseif client then
      notify('server restarted: ' .. command_line(state.opts.cmd))
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

--- Send a fleet/* request; `callback(err, result)` runs on the main loop. When the server cannot
--- start, the callback gets an error marked `reported` (the one notification was given).
function M.request(method, params, callback)
  local client, missing = M.client()
  if not client then
    if callback then
      vim.schedule(function() callback(missing, nil) end)
    end
    return nil
  end
  local ok, request_id = client:request(method, params or vim.empty_dict(), function(err, result)
    if callback then
      callback(err, result)
    elseif err then
      M.notify_error(method, err)
    end
  end)
  if not ok then
    notify('could not send ' .. method, vim.log.levels.ERROR)
  end
  return request_id
end

--- Synchronous request for commands that need the answer now (bounded wait).
function M.request_sync(method, params, timeout_ms)
  local client, missing = M.client()
  if not client then
    return nil, missing
  end
  local response = client:request_sync(method, params or vim.empty_dict(), timeout_ms or 10000)
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
    notify('no session: :Fleet new [id] or :Fleet load {id} first', vim.log.levels.WARN)
    return false
  end
  return true
end

--- Make a Session current: its buffer exists, windows showing another Session's buffer switch
--- to it, and its stored Turns fill it (fleet/session/history).
local function make_current(session_id, load_history)
  state.session_id = session_id
  local tree = require('fleet.tree')
  tree.buffer(session_id, true)
  tree.switch_windows(session_id)
  if load_history then
    tree.load_history(session_id)
  else
    tree.mark_new(session_id)
    tree.render(session_id)
  end
end
M.make_current = make_current

--- Send a request answered by a SessionInfo and make that Session current.
local function request_session(method, params, verb, callback)
  M.request(method, params, function(err, info)
    if not err then
      make_current(info.sessionId, method == 'fleet/session/load')
    end
    if callback then
      callback(err, info)
    elseif err then
      M.notify_error(method, err)
    else
      notify(('session %s %s (mode %s, %d Turns)'):format(M.text(info.sessionId), verb,
        M.text(info.mode), tonumber(info.turnCount) or 0))
    end
  end)
end

--- One line of server text for a message (no control characters, bounded).
function M.text(value)
  local line = require('fleet.tree').lines(value, 1)[1] or ''
  if vim.fn.strchars(line) > 120 then
    line = vim.fn.strcharpart(line, 0, 119) .. '…'
  end
  return line
end

--- Send an action's request; without a callback, its success is confirmed in one line
--- (`confirm(result)`) and its error notified once.
local function act(method, params, callback, confirm)
  M.request(method, params, function(err, result)
    if callback then
      callback(err, result)
    elseif err then
      M.notify_error(method, err)
    else
      notify(confirm(result))
    end
  end)
end

function M.new_session(session_id, callback)
  local params = session_id and session_id ~= '' and { sessionId = session_id } or vim.empty_dict()
  request_session('fleet/session/new', params, 'created', callback)
end

function M.load_session(session_id, callback)
  request_session('fleet/session/load', { sessionId = session_id }, 'loaded', callback)
end

--- Human size: 812 B, 1.2 kB, 3.4 MB.
function M.size(bytes)
  bytes = tonumber(bytes) or 0
  if bytes < 1000 then
    return ('%d B'):format(bytes)
  elseif bytes < 1e6 then
    return ('%.1f kB'):format(bytes / 1e3)
  end
  return ('%.1f MB'):format(bytes / 1e6)
end

function M.attach(path, callback)
  if not need_session() then
    return
  end
  local uri = vim.uri_from_fname(vim.fn.fnamemodify(path, ':p'))
  local sid = state.session_id
  act('fleet/context/attach', { sessionId = sid, uri = uri }, callback, function(r)
    local extra = type(r.files) == 'table' and #r.files > 0
      and (' (%d files)'):format(#r.files) or (' (%s)'):format(M.size(r.sizeBytes))
    return ('attached %s%s to session %s'):format(M.text(r.path), extra, M.text(sid))
  end)
end

function M.set_dataset(path, description, callback)
  if not need_session() then
    return
  end
  local sid = state.session_id
  local params = { sessionId = sid, path = path, description = description }
  act('fleet/context/setDataset', params, callback, function(r)
    return ('dataset of session %s: %s'):format(M.text(sid), M.text(r.path or path))
  end)
end

function M.set_mode(mode, callback)
  if not need_session() then
    return
  end
  act('fleet/session/setMode', { sessionId = state.session_id, mode = mode }, callback, function(r)
    return ('session %s mode: %s'):format(M.text(r.sessionId), M.text(r.mode))
  end)
end

--- Whether a Turn started by this Neovim is running.
function M.turn_running()
  return state.turn ~= nil
end

--- Run a Turn with a client-created progress token; `callback(err, result)` gets the TurnResult.
function M.run_turn(task, callback)
  if not need_session() then
    return
  end
  if state.turn then
    notify('a Turn is already running; :Fleet cancel stops it', vim.log.levels.WARN)
    return
  end
  local token = 'fleet-nvim-' .. tostring(vim.uv.hrtime())
  state.turn = { token = token, session_id = state.session_id }
  local params = { sessionId = state.session_id, task = task, workDoneToken = token }
  state.turn.request_id = M.request('fleet/turn/run', params, function(err, result)
    state.turn = nil
    M.echo_progress() -- clears the echo area's progress line
    if callback then
      callback(err, result)
    elseif err then
      if not (type(err) == 'table' and err.reported) then
        notify('Turn failed: ' .. M.error_text('', err), vim.log.levels.ERROR)
      end
    else
      local message, level = M.turn_message(result)
      notify(message, level)
    end
  end)
end

--- A Turn's name for messages: `#<n>` when its number is known (the session buffer's state),
--- else its id.
function M.turn_name(session_id, turn_id)
  local known = require('fleet.tree').turn(session_id, turn_id)
  if known and known.seq then
    return '#' .. tostring(known.seq)
  end
  return M.text(turn_id)
end

--- The message that reports a finished Turn (a TurnResult), and its level: "Turn #n completed:
--- <answer>", "Turn #n completed with errors: <reasons> — answer: <answer>" (a warning) when
--- its outcome is not `submitted`, "Turn #n cancelled" and "Turn #n failed: <error>".
--- Server text is shown as text (tree.lines: no controls, bounded).
function M.turn_message(result)
  local tree = require('fleet.tree')
  local function text(value, max_lines)
    return table.concat(tree.lines(value, max_lines), '\n')
  end
  local shown, reasons = tree.shown_status(result.status, result.outcome)
  local head = ('Turn %s %s'):format(M.turn_name(result.sessionId, result.turnId), text(shown, 1))
  if reasons then
    local answer = type(result.answer) == 'string' and result.answer ~= ''
      and (' — answer: ' .. text(result.answer, 20)) or ''
    return ('%s: %s%s'):format(head, (text(reasons, 5):gsub('\n', ' ')), answer), vim.log.levels.WARN
  end
  local detail = result.answer
  if result.status ~= 'completed' then
    detail = type(result.error) == 'table' and result.error.message or nil
  end
  local level = result.status == 'failed' and vim.log.levels.ERROR
    or (result.status == 'cancelled' and vim.log.levels.WARN or vim.log.levels.INFO)
  if type(detail) ~= 'string' or vim.trim(detail) == '' then
    return head, level
  end
  return ('%s: %s'):format(head, text(detail, 20)), level
end

--- Cancel the running Turn through its progress token (the server ends the same Turn task).
function M.cancel()
  local client = state.client_id and vim.lsp.get_client_by_id(state.client_id)
  if not state.turn or not client then
    notify('no Turn is running')
    return false
  end
  client:notify('window/workDoneProgress/cancel', { token = state.turn.token })
  notify('cancelling the running Turn…')
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

--- A document's text as buffer lines and its file format: CRLF text (every line break a CRLF)
--- is `dos` without the `\r`s, so no `^M` shows; the final line break is the 'eol' (none added
--- by `:w`).
function M.document_lines(text)
  local format = 'unix'
  if text:find('\r\n', 1, true) and not text:gsub('\r\n', ''):find('\n', 1, true) then
    format = 'dos'
    text = text:gsub('\r\n', '\n')
  end
  local eol = text:sub(-1) == '\n'
  if eol then
    text = text:sub(1, -2)
  end
  return vim.split(text, '\n', { plain = true }), format, eol
end

--- BufReadCmd for fleet:/ URIs: a read-only buffer filled from workspace/textDocumentContent
--- when the answer arrives (the editor never blocks on it); `b:fleet_loading` is true until then.
--- The buffer is filled while writable, then made 'readonly', 'nomodifiable' and 'nomodified'
--- (no W10 warning), with the text's file format.
function M.read_document(buf, uri)
  local function fill(lines, loading, format, eol)
    if not vim.api.nvim_buf_is_valid(buf) then
      return
    end
    vim.bo[buf].readonly = false
    vim.bo[buf].modifiable = true
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    vim.bo[buf].fileformat = format or 'unix'
    vim.bo[buf].eol = eol ~= false
    vim.bo[buf].fixeol = false
    vim.bo[buf].modifiable = false
    vim.bo[buf].readonly = true
    vim.bo[buf].modified = false
    vim.b[buf].fleet_loading = loading
  end
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = uri:match('%.md$') and 'markdown' or (uri:match('%.csv$') and 'csv' or '')
  fill({ 'fleet: loading ' .. uri .. ' …' }, true)
  M.request('workspace/textDocumentContent', { uri = uri }, function(err, result)
    if err then
      return fill({ 'fleet: ' .. M.error_text('', err) }, false)
    end
    local lines, format, eol = M.document_lines(result.text)
    fill(lines, false, format, eol)
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

--- Whether something other than this plugin shows LSP progress: another LspProgress
--- autocommand (fidget.nvim, noice.nvim, a statusline's refresh) or a replaced $/progress handler.
function M.progress_consumed()
  for _, au in ipairs(vim.api.nvim_get_autocmds({ event = 'LspProgress' })) do
    if au.group_name ~= 'fleet' then
      return true
    end
  end
  local handler = vim.lsp.handlers['$/progress']
  return handler ~= nil and handler ~= state.builtin_progress_handler
end

--- Whether the plugin echoes progress itself (the `progress_echo` option).
local function echoing()
  local choice = state.opts.progress_echo
  if choice == 'auto' or choice == nil then
    return not M.progress_consumed()
  end
  return choice == true
end

--- The echo area's progress line: the status (every open token) cut to fit one line without a
--- hit-enter prompt; cleared when nothing runs. Not kept in :messages.
function M.echo_progress()
  local mode = vim.api.nvim_get_mode()
  if not echoing() or mode.blocking or mode.mode:sub(1, 1) == 'c' then
    return -- never over a command line or prompt being typed (vim.ui.input)
  end
  local text = M.status()
  if text ~= '' then
    text = 'fleet: ' .. text
    local room = math.max(10, (vim.v.echospace or 80) - 1)
    if vim.fn.strdisplaywidth(text) > room then
      text = vim.fn.strcharpart(text, 0, room - 1) .. '…'
    end
  end
  if text == state.echoed then
    return
  end
  state.echoed = text
  vim.api.nvim_echo({ { text, 'ModeMsg' } }, false, {})
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
  M.echo_progress()
end

function M.setup(opts)
  state.opts = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts or {})
  state.builtin_progress_handler = state.builtin_progress_handler or vim.lsp.handlers['$/progress']
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
