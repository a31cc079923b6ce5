-- The interactive commands (:FleetSessions, :FleetArtifacts, :FleetTrace, :FleetLabel,
-- :FleetHistory, :FleetMemory, :FleetModels, :FleetRun), in Neovim's idiom: every choice goes
-- through vim.ui.select / vim.ui.input, so telescope/fzf-lua/dressing-style pickers replace them.
local fleet = require('fleet')
local tree = require('fleet.tree')

local M = {}

local function notify(msg, level)
  vim.notify('fleet: ' .. msg, level or vim.log.levels.INFO)
end

--- One line of server text for a picker item (no control characters, bounded).
local function short(text, n)
  local line = tree.lines(text, 1)[1] or ''
  n = n or 80
  if vim.fn.strchars(line) > n then
    line = vim.fn.strcharpart(line, 0, n - 1) .. '…'
  end
  return line
end
M.short = short

--- Run `fn` as a coroutine so prompts and requests read top to bottom; errors are notified.
function M.run(fn)
  local co = coroutine.create(fn)
  local function step(...)
    local ok, err = coroutine.resume(co, ...)
    if not ok then
      notify(tostring(err), vim.log.levels.ERROR)
    end
  end
  step()
end

local function resumer()
  local co = assert(coroutine.running(), 'fleet.ui: call inside M.run')
  return function(...)
    local args = { n = select('#', ...), ... }
    vim.schedule(function()
      local ok, err = coroutine.resume(co, (unpack or table.unpack)(args, 1, args.n))
      if not ok then
        notify(tostring(err), vim.log.levels.ERROR)
      end
    end)
  end
end

--- vim.ui.select inside M.run: the chosen item (nil when dismissed).
function M.select(items, opts)
  local resume = resumer()
  vim.ui.select(items, opts, function(choice)
    resume(choice)
  end)
  return coroutine.yield()
end

--- vim.ui.input inside M.run: the text (nil when dismissed).
function M.input(opts)
  local resume = resumer()
  vim.ui.input(opts, function(text)
    resume(text)
  end)
  return coroutine.yield()
end

--- A fleet/* request inside M.run: the result, or nil after notifying the error.
function M.call(method, params)
  local resume = resumer()
  fleet.request(method, params, function(err, result)
    resume(err, result)
  end)
  local err, result = coroutine.yield()
  if err then
    fleet.notify_error(method, err)
    return nil, err
  end
  return result
end

--- Several fleet/* requests at once inside M.run: their results in order (nil for one that
--- failed; errors are not notified: these are optional details).
function M.call_all(requests)
  if #requests == 0 then
    return {}
  end
  local resume = resumer()
  local results, left = {}, #requests
  for i, r in ipairs(requests) do
    fleet.request(r[1], r[2], function(err, result)
      results[i] = not err and result or nil
      left = left - 1
      if left == 0 then
        resume()
      end
    end)
  end
  coroutine.yield()
  return results
end

--- Every item of a paged fleet/* list inside M.run (fleet/session/list, fleet/workspace/list):
--- follows `nextCursor` until the last page; nil after notifying an error. `key` names the
--- result's list (its items are concatenated); the first request is `params` as given.
function M.call_pages(method, params, key)
  local items, seen, cursor = {}, {}, nil
  for _ = 1, 1000 do
    local request = params
    if cursor then
      request = vim.tbl_extend('force', {}, params, { cursor = cursor })
    end
    local page = M.call(method, request)
    if not page then
      return nil
    end
    vim.list_extend(items, page[key] or {})
    cursor = page.nextCursor
    if cursor == nil or cursor == vim.NIL then
      return items
    end
    if seen[cursor] then
      notify(method .. ': the server repeated a page cursor; showing what it sent', vim.log.levels.WARN)
      return items
    end
    seen[cursor] = true
  end
  notify(method .. ': more than 1000 pages; showing the first ones', vim.log.levels.WARN)
  return items
end

local function session_or_warn()
  local sid = fleet.session_id()
  if not sid then
    notify('no session: :Fleet sessions, :Fleet load {id} or :Fleet new first', vim.log.levels.WARN)
  end
  return sid
end

-- :FleetSessions ------------------------------------------------------------------------------

--- A Session's name for people: its id, cut when it is a long generated one.
local function session_name(id)
  id = short(id, 64)
  if id:match('^%x+$') and #id > 12 then
    return id:sub(1, 8) .. '…'
  end
  return id
end

--- The newest Turn's task of each Session (fleet/session/history, one Turn; at most 50 asked).
local function last_tasks(sessions)
  local requests = {}
  for i = 1, math.min(#sessions, 50) do
    table.insert(requests, { 'fleet/session/history', { sessionId = sessions[i].sessionId, limit = 1 } })
  end
  local tasks = {}
  for i, result in ipairs(M.call_all(requests)) do
    local turn = result and result.turns and result.turns[#result.turns]
    tasks[sessions[i].sessionId] = turn and turn.task or nil
  end
  return tasks
end

--- A Session as a picker item: its newest task, id, Turns, mode and when it was last used.
function M.session_item(s, task)
  local turns = tonumber(s.turnCount) or 0
  local owner = ''
  if type(s.ownerUser) == 'string' or type(s.ownerHost) == 'string' then
    owner = ('%s@%s'):format(short(s.ownerUser or '?', 32), short(s.ownerHost or '?', 64))
  end
  local parts = { session_name(s.sessionId),
    turns == 1 and '1 Turn' or (('%d Turns'):format(turns)), short(s.mode, 8),
    tree.when(s.updatedAt, 'relative'), owner }
  local head = task and (short(task, 60) .. '  ') or ''
  return head .. table.concat(vim.tbl_filter(function(p) return p ~= '' end, parts), ' · ')
end

--- Load a Session: it becomes current, its buffer shows its stored Turns in a split.
function M.load(session_id)
  M.run(function()
    local info = M.call('fleet/session/load', { sessionId = session_id })
    if info then
      fleet.make_current(info.sessionId, true)
      tree.show(info.sessionId, { split = true })
      notify(('session %s loaded (mode %s, %d Turns)'):format(short(info.sessionId),
        short(info.mode, 8), tonumber(info.turnCount) or 0))
    end
  end)
end

function M.sessions(params)
  M.run(function()
    if params and fleet.has_feature('sessions.filter') == false then
      return notify('this server does not filter Sessions (no sessions.filter): :Fleet sessions '
        .. 'lists them all', vim.log.levels.WARN)
    end
    local sessions = M.call_pages('fleet/session/list', params or vim.empty_dict(), 'sessions')
    if not sessions then
      return
    end
    if #sessions == 0 then
      return notify(params and 'no Sessions match' or 'no Sessions yet: :Fleet new')
    end
    local tasks = last_tasks(sessions)
    local session = M.select(sessions, {
      prompt = 'Fleet Session',
      kind = 'fleet.session',
      format_item = function(s)
        return M.session_item(s, tasks[s.sessionId])
      end,
    })
    if not session then
      return
    end
    local action = M.select({ 'Load', 'Delete' }, { prompt = 'Session ' .. short(session.sessionId) })
    if action == 'Load' then
      local info = M.call('fleet/session/load', { sessionId = session.sessionId })
      if info then
        fleet.make_current(info.sessionId, true)
        tree.show(info.sessionId, { split = true })
        notify('session ' .. short(info.sessionId) .. ' loaded')
      end
    elseif action == 'Delete' then
      local sure = M.select({ 'No', 'Yes, delete its history and files' },
        { prompt = 'Delete ' .. short(session.sessionId) .. '?' })
      if sure and sure:match('^Yes') then
        local _, err = M.call('fleet/session/delete', { sessionId = session.sessionId })
        if not err then
          if fleet.session_id() == session.sessionId then
            fleet.use_session(nil)
          end
          tree.reset(session.sessionId)
          notify('session ' .. short(session.sessionId) .. ' deleted')
        end
      end
    end
  end)
end

-- :Fleet sessions [mine|host=H|user=U|since=7d] ----------------------------------------------

--- The words :Fleet sessions completes.
function M.session_filter_words()
  return { 'mine', 'host=', 'user=', 'since=1d', 'since=7d', 'since=30d' }
end

--- fleet/session/list params from :Fleet sessions' words (nil: no filter). `mine` is this
--- host (FLEET_HOST_NAME, else the machine's name) and OS user; `since=N[mhdw]` an age.
function M.session_filter(words)
  if not words or #words == 0 then
    return nil
  end
  local params = {}
  local units = { m = 60, h = 3600, d = 86400, w = 7 * 86400 }
  for _, word in ipairs(words) do
    local key, value = word:match('^(%a+)=(.+)$')
    if word == 'mine' then
      params.ownerHost = vim.env.FLEET_HOST_NAME or vim.uv.os_gethostname()
      params.ownerUser = vim.uv.os_get_passwd().username
    elseif key == 'host' then
      params.ownerHost = value
    elseif key == 'user' then
      params.ownerUser = value
    elseif key == 'since' and value:match('^%d+[mhdw]$') then
      local seconds = tonumber(value:sub(1, -2)) * units[value:sub(-1)]
      params.updatedSince = os.date('!%Y-%m-%dT%H:%M:%SZ', os.time() - seconds)
    else
      notify(('not a Session filter: %s (mine, host=H, user=U, since=7d)'):format(word),
        vim.log.levels.WARN)
      return nil
    end
  end
  return params
end

-- :FleetArtifacts -----------------------------------------------------------------------------

function M.artifacts()
  M.run(function()
    local sid = session_or_warn()
    local listed = sid and M.call('fleet/artifact/list', { sessionId = sid })
    if not listed then
      return
    end
    if #listed.artifacts == 0 then
      return notify('no artifacts in session ' .. short(sid))
    end
    local artifact = M.select(listed.artifacts, {
      prompt = 'Fleet artifact',
      kind = 'fleet.artifact',
      format_item = function(a)
        return ('%s  (%d bytes)'):format(short(a.path, 100), tonumber(a.sizeBytes) or 0)
      end,
    })
    if artifact then
      fleet.open(artifact.uri)
    end
  end)
end

-- :FleetTrace / :FleetLabel -------------------------------------------------------------------

--- Pick one of the Session's traces (newest first), each shown as its Turn: number, task and
--- time (from the stored history); nil when none or dismissed.
local function pick_trace(prompt)
  local sid = session_or_warn()
  local listed = sid and M.call('fleet/trace/list', { sessionId = sid, limit = 50 })
  if not listed then
    return nil
  end
  if #listed.traces == 0 then
    notify('no traces in session ' .. short(sid))
    return nil
  end
  local history = M.call('fleet/session/history', { sessionId = sid, limit = 200 }) or { turns = {} }
  local turns = {}
  for _, t in ipairs(history.turns or {}) do
    turns[t.turnId] = t
  end
  return M.select(listed.traces, {
    prompt = prompt,
    kind = 'fleet.trace',
    format_item = function(t)
      local turn = turns[t.turnId]
      if not turn then
        return ('Turn %s  (%s)'):format(short(t.turnId, 40), short(t.source, 8))
      end
      local shown = tree.shown_status(turn.status, turn.outcome)
      return ('#%d  %s  · %s · %s'):format(tonumber(turn.seq) or 0, short(turn.task, 70),
        short(shown, 24), tree.when(turn.createdAt, 'relative'))
    end,
  })
end

--- The trace of the current buffer when it is a trace document (fleet:/sessions/<id>/traces/
--- <traceId>.md): `{ traceId, sessionId }`, else nil.
function M.buffer_trace(buf)
  local name = vim.api.nvim_buf_get_name(buf or 0)
  local sid, trace_id = name:match('^fleet:/sessions/([^/]+)/traces/([^/]+)%.md$')
  return trace_id and { traceId = trace_id, sessionId = sid } or nil
end

function M.trace()
  M.run(function()
    local trace = pick_trace('Fleet trace')
    if trace then
      fleet.open(trace.uri)
    end
  end)
end

local KEEP = '(keep)'

--- Parse the values prompt: comma-separated; numbers stay numbers.
function M.parse_values(text)
  local values = {}
  for part in text:gmatch('[^,]+') do
    local item = vim.trim(part)
    if item ~= '' then
      table.insert(values, tonumber(item) or item)
    end
  end
  return values
end

--- The label prompts in order; `trace` may be given (a trace from fleet/trace/list); in a trace
--- buffer, that trace is labelled.
function M.label(trace)
  trace = trace or M.buffer_trace(0)
  M.run(function()
    trace = trace or pick_trace('Label which trace?')
    if not trace then
      return
    end
    local params = { traceId = trace.traceId }
    local status = M.select({ KEEP, 'approved', 'benchmark', 'synthetic', 'rejected' },
      { prompt = 'Status', kind = 'fleet.label.status' })
    if status == nil then
      return
    end
    if status ~= KEEP then
      params.status = status
    end
    local route = M.select({ KEEP, 'direct', 'flex', 'rlm' }, { prompt = 'Route', kind = 'fleet.label.route' })
    if route == nil then
      return
    end
    if route ~= KEEP then
      params.route = route
    end
    local critical = M.select({ KEEP, 'critical', 'not critical' },
      { prompt = 'Critical', kind = 'fleet.label.critical' })
    if critical == nil then
      return
    end
    if critical ~= KEEP then
      params.critical = critical == 'critical'
    end
    local answer = M.input({ prompt = 'Expected answer (empty: keep): ' })
    if answer == nil then
      return
    end
    if vim.trim(answer) ~= '' then
      params.answer = answer
    end
    local values = M.input({ prompt = 'Values, comma-separated (empty: keep): ' })
    if values == nil then
      return
    end
    if vim.trim(values) ~= '' then
      params.values = M.parse_values(values)
    end
    local file = M.input({ prompt = 'Expectations JSON file (empty: none): ', completion = 'file' })
    if file == nil then
      return
    end
    if vim.trim(file) ~= '' then
      local path = vim.fn.fnamemodify(vim.fn.expand(vim.trim(file)), ':p')
      local ok, decoded = pcall(function()
        if vim.fn.getfsize(path) > 1024 * 1024 then
          error('larger than 1 MiB')
        end
        return vim.json.decode(table.concat(vim.fn.readfile(path), '\n'))
      end)
      if not ok or type(decoded) ~= 'table' then
        return notify('cannot read expectations from ' .. path .. ': ' .. tostring(decoded),
          vim.log.levels.ERROR)
      end
      params.expectations = decoded
    end
    local result = M.call('fleet/trace/label', params)
    if result then
      M.last_label = result
      local eligible = result.eligible and 'eligible for optimization'
        or ('not eligible: ' .. short(result.ineligibleReason))
      notify(('trace %s labelled %s (%s)'):format(short(result.traceId, 40),
        short(result.labels and result.labels.status or ''), eligible))
    end
  end)
end

-- :FleetHistory -------------------------------------------------------------------------------

--- The :FleetHistory buffer's lines for a Session's stored Turns (`TurnSummary[]`), and which
--- Turn each line belongs to. A completed Turn whose outcome is not `submitted` shows "completed
--- with errors" and a `!` line of the reasons: the outcome of its result when this Neovim heard it
--- end, else the stored summary's `outcome` (absent in summaries stored before outcomes existed).
function M.history_lines(sid, turns)
  local lines = { ('Fleet history of %s  (<CR> opens a Turn\'s trace)'):format(short(sid)) }
  local rows = {}
  for _, t in ipairs(turns) do
    local seen = tree.turn(sid, t.turnId)
    local outcome = seen and seen.outcome
    if type(outcome) ~= 'table' then
      outcome = t.outcome
    end
    local shown, reasons = tree.shown_status(t.status, outcome)
    table.insert(lines, ('#%d  %-9s %-6s %s'):format(tonumber(t.seq) or 0,
      short(shown, #tree.WITH_ERRORS), short(t.route or '-', 6), short(t.task, 70)))
    rows[#lines] = t
    if reasons then
      table.insert(lines, '      ! ' .. short(reasons, 100))
      rows[#lines] = t
    end
    if t.answer and t.answer ~= '' then
      table.insert(lines, '      → ' .. short(t.answer, 100))
      rows[#lines] = t
    end
  end
  if #turns == 0 then
    table.insert(lines, '(no Turns yet)')
  end
  return lines, rows
end

function M.history()
  M.run(function()
    local sid = session_or_warn()
    local listed = sid and M.call('fleet/session/history', { sessionId = sid, limit = 100 })
    if not listed then
      return
    end
    local name = 'fleet://history/' .. sid
    local buf = vim.fn.bufnr(name)
    if buf == -1 then
      buf = vim.api.nvim_create_buf(true, true)
      vim.api.nvim_buf_set_name(buf, name)
      vim.bo[buf].buftype = 'nofile'
      vim.bo[buf].swapfile = false
      vim.bo[buf].filetype = 'fleethistory'
    end
    local lines, rows = M.history_lines(sid, listed.turns)
    vim.bo[buf].modifiable = true
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    vim.bo[buf].modifiable = false
    vim.keymap.set('n', '<CR>', function()
      local turn = rows[vim.api.nvim_win_get_cursor(0)[1]]
      if turn and turn.traceId then
        fleet.open(('fleet:/sessions/%s/traces/%s.md'):format(sid, turn.traceId))
      end
    end, { buffer = buf, desc = 'Open the Turn trace' })
    vim.api.nvim_win_set_buf(0, buf)
  end)
end

-- :FleetMemory --------------------------------------------------------------------------------

function M.memory()
  M.run(function()
    local sid = session_or_warn()
    local listed = sid and M.call('fleet/memory/list', { sessionId = sid })
    if not listed then
      return
    end
    if #listed.memories == 0 then
      return notify('no memories in session ' .. short(sid))
    end
    local memory = M.select(listed.memories, {
      prompt = 'Fleet memory (only reviewed ones reach the model)',
      kind = 'fleet.memory',
      format_item = function(m)
        return ('[%s] %s: %s'):format(m.reviewed and 'reviewed' or 'new', short(m.kind, 16), short(m.content, 90))
      end,
    })
    if not memory then
      return
    end
    local actions = memory.reviewed and { 'Unreview (hide from the model)', 'Reject (delete)' }
      or { 'Review (the model may use it)', 'Reject (delete)' }
    local action = M.select(actions, { prompt = 'Memory ' .. short(memory.memoryId, 40) })
    if not action then
      return
    end
    if action:match('^Reject') then
      local _, err = M.call('fleet/memory/reject', { sessionId = sid, memoryId = memory.memoryId })
      if not err then
        notify('memory rejected')
      end
    else
      local reviewed = action:match('^Review') ~= nil
      local _, err = M.call('fleet/memory/review',
        { sessionId = sid, memoryId = memory.memoryId, reviewed = reviewed })
      if not err then
        notify(reviewed and 'memory reviewed' or 'memory hidden from the model')
      end
    end
  end)
end

-- :FleetModels --------------------------------------------------------------------------------

function M.models(refresh)
  M.run(function()
    local sid = session_or_warn()
    local listed = sid and M.call('fleet/models/list', refresh and { refresh = true } or vim.empty_dict())
    if not listed then
      return
    end
    local ids = { '(configured default)' }
    for _, m in ipairs(listed.models or {}) do
      table.insert(ids, m.id)
    end
    local picked = {}
    for _, role in ipairs({ 'root', 'sub' }) do
      local choice = M.select(ids, {
        prompt = ('Model for the %s agent'):format(role),
        kind = 'fleet.model',
        format_item = function(id)
          return short(id, 100)
        end,
      })
      if choice == nil then
        return
      end
      picked[role] = choice ~= ids[1] and choice or vim.NIL -- null clears the selection
    end
    local result = M.call('fleet/session/setModels', { sessionId = sid, root = picked.root, sub = picked.sub })
    if result then
      M.last_models = result
      local function shown(v)
        return (v == nil or v == vim.NIL) and 'default' or short(v, 60)
      end
      notify(('session %s: root %s, sub %s'):format(short(sid), shown(result.root), shown(result.sub)))
    end
  end)
end

-- :FleetRun -----------------------------------------------------------------------------------

--- With a task, run it; without one, open a prompt buffer (each line entered runs a Turn) above
--- the session buffer, which shows the live agent tree.
function M.run_prompt(task)
  local sid = session_or_warn()
  if not sid then
    return
  end
  if task and vim.trim(task) ~= '' then
    tree.show(sid, { split = true, follow = true })
    return fleet.run_turn(task)
  end
  local name = 'fleet://prompt/' .. sid
  local buf = vim.fn.bufnr(name)
  if buf == -1 then
    buf = vim.api.nvim_create_buf(true, true)
    vim.api.nvim_buf_set_name(buf, name)
    vim.bo[buf].buftype = 'prompt'
    vim.bo[buf].swapfile = false
    vim.fn.prompt_setprompt(buf, 'fleet> ')
    vim.fn.prompt_setcallback(buf, function(text)
      if vim.trim(text) == '' then
        return
      end
      local win = vim.fn.bufwinid(tree.buffer(sid, true))
      if win ~= -1 then -- the session buffer's window follows the Turn about to run
        vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(tree.buffer(sid, true)), 0 })
      end
      fleet.run_turn(text)
    end)
  end
  tree.show(sid, { split = true })
  vim.cmd('aboveleft split')
  vim.api.nvim_win_set_buf(0, buf)
  vim.api.nvim_win_set_height(0, 3)
  vim.cmd('startinsert')
  return buf
end

return M
