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
    notify(method .. ': ' .. tostring(err.message), vim.log.levels.ERROR)
    return nil, err
  end
  return result
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
    notify('no session: :FleetSessions or :FleetNewSession first', vim.log.levels.WARN)
  end
  return sid
end

-- :FleetSessions ------------------------------------------------------------------------------

function M.sessions()
  M.run(function()
    local sessions = M.call_pages('fleet/session/list', vim.empty_dict(), 'sessions')
    if not sessions then
      return
    end
    if #sessions == 0 then
      return notify('no Sessions yet: :FleetNewSession')
    end
    local session = M.select(sessions, {
      prompt = 'Fleet Session',
      kind = 'fleet.session',
      format_item = function(s)
        return ('%s  %s  %d turns  %s'):format(short(s.sessionId, 64), short(s.mode, 8),
          tonumber(s.turnCount) or 0, short(s.updatedAt, 19))
      end,
    })
    if not session then
      return
    end
    local action = M.select({ 'Load', 'Delete' }, { prompt = 'Session ' .. short(session.sessionId) })
    if action == 'Load' then
      local info = M.call('fleet/session/load', { sessionId = session.sessionId })
      if info then
        fleet.use_session(info.sessionId)
        tree.show(info.sessionId)
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

--- Pick one of the Session's traces (newest first); nil when none or dismissed.
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
  return M.select(listed.traces, {
    prompt = prompt,
    kind = 'fleet.trace',
    format_item = function(t)
      return ('Turn %s  (%s)  %s'):format(short(t.turnId, 40), short(t.source, 8), short(t.traceId, 40))
    end,
  })
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

--- The label prompts in order; `trace` may be given (a trace from fleet/trace/list).
function M.label(trace)
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
    tree.show(sid)
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
      tree.render(sid)
      fleet.run_turn(text)
    end)
  end
  tree.show(sid)
  vim.cmd('topleft split')
  vim.api.nvim_win_set_buf(0, buf)
  vim.api.nvim_win_set_height(0, 3)
  vim.cmd('startinsert')
  return buf
end

return M
