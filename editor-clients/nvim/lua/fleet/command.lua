-- :Fleet {subcommand} [args]: one command for everything, with completion of its subcommands and
-- of their arguments (Sessions, artifacts, traces, modes, files). The old :FleetXxx commands are
-- aliases of subcommands (plugin/fleet.lua).
local M = {}

local function fleet()
  return require('fleet')
end

local function ui()
  return require('fleet.ui')
end

local function notify(msg, level)
  vim.notify('fleet: ' .. msg, level or vim.log.levels.INFO)
end

M.MODES = { 'hybrid', 'rlm', 'flex' }

--- What a completion may ask the server for: a short wait, nothing when the server is not
--- running yet (completion never starts it) or the request fails.
local function ask(method, params)
  if not fleet().running() then
    return nil
  end
  local result, err = fleet().request_sync(method, params, 2000)
  return not err and result or nil
end

local function session_ids()
  local listed = ask('fleet/session/list', { limit = 200 })
  return vim.tbl_map(function(s) return s.sessionId end, listed and listed.sessions or {})
end

local function artifact_paths()
  local sid = fleet().session_id()
  local listed = sid and ask('fleet/artifact/list', { sessionId = sid })
  return vim.tbl_map(function(a)
    return (a.path:gsub('^artifacts/', ''))
  end, listed and listed.artifacts or {})
end

local function trace_ids()
  local sid = fleet().session_id()
  local listed = sid and ask('fleet/trace/list', { sessionId = sid, limit = 50 })
  return vim.tbl_map(function(t) return t.traceId end, listed and listed.traces or {})
end

local function files(arglead)
  return vim.fn.getcompletion(arglead, 'file')
end

--- The subcommands: `run(args, bang)` (args: the words after the subcommand, `args.line` the
--- rest of the line as typed), `complete(arglead, n)` for the n-th argument, `desc` for :Fleet
--- help and the <Plug> mappings.
M.subcommands = {
  new = { desc = 'create a Session (optional id) and make it current',
    run = function(a) fleet().new_session(a[1]) end },
  load = { desc = 'load a stored Session; its buffer shows its stored Turns',
    run = function(a)
      if not a[1] then
        return ui().sessions()
      end
      ui().load(a[1])
    end,
    complete = function() return session_ids() end },
  sessions = { desc = 'pick a Session to load or delete',
    run = function(a) ui().sessions(ui().session_filter(a)) end,
    complete = function() return ui().session_filter_words() end },
  session = { desc = "show the current Session's buffer (in a split)",
    run = function()
      local sid = fleet().session_id()
      if sid then
        require('fleet.tree').show(sid, { split = true })
      else
        notify('no session: :Fleet new or :Fleet load {id} first', vim.log.levels.WARN)
      end
    end },
  attach = { desc = "attach a file or folder (default: the current buffer's file)",
    run = function(a) fleet().attach(a.line ~= '' and a.line or vim.api.nvim_buf_get_name(0)) end,
    complete = files },
  dataset = { desc = 'select an attached file (files/<name>) as the dataset',
    run = function(a)
      if not a[1] then
        return notify('usage: :Fleet dataset {files/<name>} [description]', vim.log.levels.WARN)
      end
      local description = vim.trim(a.line:sub(#a[1] + 1))
      fleet().set_dataset(a[1], description ~= '' and description or nil)
    end },
  mode = { desc = "set the Session's mode (hybrid, rlm, flex)",
    run = function(a)
      if not a[1] then
        return notify('usage: :Fleet mode {hybrid|rlm|flex}', vim.log.levels.WARN)
      end
      fleet().set_mode(a[1])
    end,
    complete = function() return M.MODES end },
  run = { desc = 'run a Turn (without a task: a prompt buffer)',
    run = function(a) ui().run_prompt(a.line) end },
  cancel = { desc = 'cancel the running Turn', run = function() fleet().cancel() end },
  open = { desc = 'open an artifact by its path',
    run = function(a)
      if not a[1] then
        return ui().artifacts()
      end
      fleet().open(fleet().artifact_uri(a.line))
    end,
    complete = function() return artifact_paths() end },
  artifacts = { desc = 'pick an artifact to open', run = function() ui().artifacts() end },
  trace = { desc = "open a Turn's trace (picked, or by its id)",
    run = function(a)
      local sid = fleet().session_id()
      if a[1] and sid then
        return fleet().open(require('fleet.tree').trace_uri(sid, a[1]))
      end
      ui().trace()
    end,
    complete = function() return trace_ids() end },
  label = { desc = 'label a trace (in a trace buffer: that one)',
    run = function(a) ui().label(a[1] and { traceId = a[1] } or nil) end,
    complete = function() return trace_ids() end },
  history = { desc = "the Session's Turns in a buffer", run = function() ui().history() end },
  memory = { desc = 'review or reject memories', run = function() ui().memory() end },
  models = { desc = "pick the Session's models (! or refresh: ask the endpoint again)",
    run = function(a, bang) ui().models(bang or a[1] == 'refresh') end,
    complete = function() return { 'refresh' } end },
  restart = { desc = 'restart the server', run = function() fleet().restart() end },
  help = { desc = 'list the subcommands', run = function() M.help() end },
}

--- The subcommand names, sorted.
function M.names()
  local names = vim.tbl_keys(M.subcommands)
  table.sort(names)
  return names
end

function M.help()
  local lines = { { ':Fleet {subcommand} — :help fleet-commands\n' } }
  for _, name in ipairs(M.names()) do
    table.insert(lines, { ('  %-10s %s\n'):format(name, M.subcommands[name].desc) })
  end
  vim.api.nvim_echo(lines, false, {})
end

--- Run subcommand `name` with the words `args` (a list) and the rest of the line `line`.
function M.run(name, args, line, bang)
  local sub = M.subcommands[name]
  if not sub then
    return notify(('unknown subcommand %q: :Fleet help lists them'):format(tostring(name)),
      vim.log.levels.ERROR)
  end
  args = vim.deepcopy(args or {})
  args.line = vim.trim(line or table.concat(args, ' '))
  fleet().begin_command()
  sub.run(args, bang)
end

--- :Fleet's handler (`opts` from nvim_create_user_command).
function M.dispatch(opts)
  local name = opts.fargs[1]
  if not name then
    return M.help()
  end
  local rest = opts.args:gsub('^%s*%S+%s*', '', 1)
  M.run(name, vim.list_slice(opts.fargs, 2), rest, opts.bang)
end

local function matching(items, arglead)
  return vim.tbl_filter(function(item)
    return vim.startswith(item, arglead)
  end, items)
end

--- Completion of :Fleet: subcommands, then the subcommand's arguments.
function M.complete(arglead, cmdline, _)
  local words = vim.split(vim.trim(cmdline:gsub('^%s*%S+', '', 1)), '%s+', { trimempty = true })
  local n = #words + (arglead == '' and 1 or 0) -- the word being completed, 1 = the subcommand
  if n <= 1 then
    return matching(M.names(), arglead)
  end
  return M.complete_args(words[1], arglead)
end

--- Completion of a subcommand's arguments (also the aliases').
function M.complete_args(name, arglead)
  local sub = M.subcommands[name]
  if not sub or not sub.complete then
    return {}
  end
  return matching(sub.complete(arglead) or {}, arglead)
end

return M
