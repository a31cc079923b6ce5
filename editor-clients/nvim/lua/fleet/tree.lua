-- The session buffer: the live agent tree (root, children, cells, outputs) of a Session's Turns,
-- built from fleet/turn/didEmit events (typed payloads: docs/protocol.md "didEmit payloads").
local M = {}

local LIMITS = {
  turns = 20, -- Turns kept per Session (oldest dropped)
  cells = 50, -- cells kept per agent
  code_lines = 12, -- lines shown per cell's code
  output_lines = 12, -- lines shown per cell's output
  line_chars = 240, -- characters per rendered line
  agents = 64, -- agents kept per Turn
}
M.LIMITS = LIMITS

-- sessionId -> { order = {turnId...}, turns = {turnId -> turn}, max_seq = n when the stored
-- history is known (a new Session: 0), so a Turn that starts gets its number #n }
local sessions = {}
local pending = {} -- sessionId -> true while a render is scheduled
local views = {} -- buffer -> { rows = {line -> {uri?, turn?}}, levels = {...}, folds = {...},
--                  turn_lines = {...}, closed = {fold key -> true} } of its last render

--- Text from the server (model or user written) as safe buffer lines: no control characters
--- (a NUL or a newline cannot be in a buffer line), bounded in length and in count.
--- Outside text with C1 controls (U+0080–U+009F) and bidi overrides/isolates (U+061C, U+200E,
--- U+200F, U+202A–U+202E, U+2066–U+2069) shown as `\x9b` and `<U+202E>`: a name never reorders
--- or drives the screen. (C0 controls become `?` in M.lines.)
function M.visible(text)
  text = tostring(text)
  text = text:gsub('\194([\128-\159])', function(b)
    return ('\\x%02x'):format(b:byte())
  end)
  text = text:gsub('\226\128([\142\143\170-\174])', function(b)
    return ('<U+%04X>'):format(0x2000 + b:byte() - 0x80)
  end)
  text = text:gsub('\226\129([\166-\169])', function(b)
    return ('<U+%04X>'):format(0x2040 + b:byte() - 0x80)
  end)
  return (text:gsub('\216\156', '<U+061C>'))
end

function M.lines(text, max_lines, prefix)
  prefix = prefix or ''
  local out = {}
  if text == nil or text == vim.NIL then
    return out
  end
  text = tostring(text):gsub('\r\n?', '\n'):gsub('\t', '    ')
  for line in (text .. '\n'):gmatch('(.-)\n') do
    if #out >= max_lines then
      table.insert(out, prefix .. '…')
      break
    end
    line = M.visible(line:gsub('[%z\1-\31\127]', '?'))
    if vim.fn.strchars(line) > LIMITS.line_chars then
      line = vim.fn.strcharpart(line, 0, LIMITS.line_chars) .. '…'
    end
    table.insert(out, prefix .. line)
  end
  return out
end

--- M.lines with `label` on the first line and its width of spaces on the others.
local function labelled(text, max_lines, label)
  local out = M.lines(text, max_lines, label)
  local pad = string.rep(' ', #label)
  for i = 2, #out do
    out[i] = pad .. out[i]:sub(#label + 1)
  end
  return out
end

local function one_line(text)
  return M.lines(text, 1)[1] or ''
end

--- What a completed Turn whose outcome is not clean is shown as.
M.WITH_ERRORS = 'completed with errors'

--- How a Turn's end is shown, from its status and its outcome (`TurnResult.outcome`, also in the
--- terminal events' payloads and a stored `TurnSummary.outcome`): the status, or M.WITH_ERRORS for
--- a completed Turn whose outcome is not `submitted` (extracted, partial, or failed: the answer is
--- the program's own error message).
--- Second result: that outcome's reasons, their details joined by '; ' (the outcome's kind when
--- none has one), raw server text (show it through M.lines); nil when clean. A missing outcome (a
--- result or summary stored before outcomes existed) is shown as the status.
function M.shown_status(status, outcome)
  if status ~= 'completed' or type(outcome) ~= 'table' or type(outcome.kind) ~= 'string'
      or outcome.kind == 'submitted' then
    return status, nil
  end
  local details = {}
  for _, reason in ipairs(type(outcome.reasons) == 'table' and outcome.reasons or {}) do
    if type(reason) == 'table' and type(reason.detail) == 'string' and vim.trim(reason.detail) ~= '' then
      table.insert(details, vim.trim(reason.detail))
    end
  end
  return M.WITH_ERRORS, #details > 0 and table.concat(details, '; ') or outcome.kind
end

local function session_state(session_id)
  local s = sessions[session_id]
  if not s then
    s = { order = {}, turns = {} }
    sessions[session_id] = s
  end
  return s
end

local function turn_state(event)
  local s = session_state(event.sessionId)
  local turn = s.turns[event.turnId]
  if not turn then
    turn = { id = event.turnId, status = 'running', agents = {}, agent_order = {} }
    if s.max_seq then
      s.max_seq = s.max_seq + 1
      turn.seq = s.max_seq
    end
    s.turns[event.turnId] = turn
    table.insert(s.order, event.turnId)
    if #s.order > LIMITS.turns then
      s.turns[table.remove(s.order, 1)] = nil
    end
  end
  return turn
end

local function agent_state(turn, agent_id, parent_id)
  local agent = turn.agents[agent_id]
  if not agent then
    if #turn.agent_order >= LIMITS.agents then
      return nil
    end
    agent = { id = agent_id, parent = parent_id, status = 'running', cells = {}, children = {} }
    turn.agents[agent_id] = agent
    table.insert(turn.agent_order, agent_id)
    local parent = parent_id and turn.agents[parent_id]
    if parent then
      table.insert(parent.children, agent_id)
    end
  end
  return agent
end

local function cell_of(agent, number)
  for i = #agent.cells, 1, -1 do
    if agent.cells[i].number == number then
      return agent.cells[i]
    end
  end
end

--- Apply one TurnEvent to the tree. Unknown kinds and keys are ignored (the protocol extends).
function M.apply(event)
  if type(event) ~= 'table' or type(event.turnId) ~= 'string' or type(event.sessionId) ~= 'string' then
    return
  end
  local turn = turn_state(event)
  local p = type(event.payload) == 'table' and event.payload or {}
  local kind = event.kind
  local agent_id = type(event.agentId) == 'string' and event.agentId or 'root'
  local parent_id = type(event.parentAgentId) == 'string' and event.parentAgentId or nil
  if kind == 'turn_started' then
    turn.created_at = turn.created_at or (type(event.at) == 'string' and event.at or nil)
    turn.task = p.task
    turn.mode = p.mode
    agent_state(turn, 'root')
  elseif kind == 'triage_decision' then
    turn.route = p.route
    turn.summary = p.summary
  elseif kind == 'child_spawned' then
    local agent = agent_state(turn, agent_id, parent_id or 'root')
    if agent then
      agent.subtask = p.subtask
      agent.depth = p.depth
    end
  elseif kind == 'child_finished' then
    local agent = agent_state(turn, agent_id, parent_id or 'root')
    if agent then
      agent.status = p.status
      agent.error = p.error
    end
  elseif kind == 'code_cell' then
    local agent = agent_state(turn, agent_id, parent_id)
    if agent and #agent.cells < LIMITS.cells then
      table.insert(agent.cells, { number = p.cell, phase = p.phase, code = p.code })
    end
  elseif kind == 'cell_output' then
    local agent = agent_state(turn, agent_id, parent_id)
    local cell = agent and cell_of(agent, p.cell)
    if cell then
      cell.ok, cell.outcome = p.ok, p.outcome
      cell.output = p.ok and p.output or (p.error or p.error_type)
    end
  elseif kind == 'budget_update' then
    turn.used, turn.max = p.used, p.max
  elseif kind == 'turn_completed' or kind == 'turn_failed' or kind == 'turn_cancelled' then
    turn.status = p.status or kind:gsub('^turn_', '')
    turn.answer = p.answer
    turn.route = p.route or turn.route
    turn.error = type(p.error) == 'table' and p.error.message or nil
    turn.artifacts = type(p.artifacts) == 'table' and p.artifacts or {}
    turn.outcome = type(p.outcome) == 'table' and p.outcome or nil
    turn.trace_id = type(p.traceId) == 'string' and p.traceId or turn.trace_id
    local root = turn.agents.root
    if root then
      root.status = turn.status
    end
  end
end

--- When an ISO-8601 instant was, for people. `style` 'relative': "just now", "5 min ago",
--- "3 h ago", "2 days ago", else the local date and time; 'clock': the local "15:05" today,
--- else "2026-11-30 15:05". '' when the text is not an instant.
function M.when(iso, style, now)
  if type(iso) ~= 'string' then
    return ''
  end
  local y, mo, d, h, mi, sec, zone = iso:match('^(%d%d%d%d)-(%d%d)-(%d%d)[T ](%d%d):(%d%d):(%d%d)[%.%d]*(.*)$')
  if not y then
    return ''
  end
  now = now or os.time()
  local local_minus_utc = now - os.time(os.date('!*t', now)) ---@diagnostic disable-line
  local epoch = os.time({ year = tonumber(y), month = tonumber(mo), day = tonumber(d),
    hour = tonumber(h), min = tonumber(mi), sec = tonumber(sec), isdst = false }) + local_minus_utc
  local sign, zh, zm = zone:match('^([+-])(%d%d):?(%d%d)$')
  if sign then
    epoch = epoch - (sign == '+' and 1 or -1) * (tonumber(zh) * 3600 + tonumber(zm) * 60)
  end
  local ago = now - epoch
  if style == 'relative' and ago >= -60 then
    if ago < 60 then
      return 'just now'
    elseif ago < 3600 then
      return ('%d min ago'):format(math.floor(ago / 60))
    elseif ago < 86400 then
      return ('%d h ago'):format(math.floor(ago / 3600))
    elseif ago < 7 * 86400 then
      local days = math.floor(ago / 86400)
      return days == 1 and 'yesterday' or ('%d days ago'):format(days)
    end
  end
  if style == 'clock' and os.date('%Y-%m-%d', epoch) == os.date('%Y-%m-%d', now) then
    return os.date('%H:%M', epoch) --[[@as string]]
  end
  return os.date('%Y-%m-%d %H:%M', epoch) --[[@as string]]
end

--- A Turn's name: `#<n>` when its number is known, else its id.
function M.turn_name(turn)
  return turn.seq and ('#' .. tostring(turn.seq)) or one_line(turn.id)
end

function M.trace_uri(session_id, trace_id)
  return ('fleet:/sessions/%s/traces/%s.md'):format(session_id, trace_id)
end

local function artifact_uri(session_id, path)
  return ('fleet:/sessions/%s/artifacts/%s'):format(session_id, (tostring(path):gsub('^artifacts/', '')))
end

--- A render in progress: lines, folds and what each line opens.
local function new_ctx(session_id)
  return { sid = session_id, out = {}, folds = {}, rows = {}, turn_lines = {} }
end

local function add(ctx, lines, row)
  if type(lines) == 'string' then
    lines = { lines }
  end
  for _, line in ipairs(lines) do
    table.insert(ctx.out, line)
    ctx.rows[#ctx.out] = row
  end
end

local function fold(ctx, first, kind, key, extra)
  if #ctx.out > first or kind == 'failed' then
    table.insert(ctx.folds, vim.tbl_extend('force', { first = first, last = #ctx.out, kind = kind,
      key = key }, extra or {}))
  end
end

local function render_agent(ctx, turn, agent, indent, row)
  local first = #ctx.out + 1
  local head = indent .. (agent.id == 'root' and '▾ root' or ('▾ ' .. one_line(agent.id)))
  head = head .. '  [' .. one_line(agent.status) .. ']'
  if agent.subtask then
    head = head .. '  ' .. one_line(agent.subtask)
  end
  add(ctx, head, row)
  if agent.error then
    add(ctx, M.lines(agent.error, 3, indent .. '  ! '), row)
  end
  local run = nil -- the run of failed cells being rendered
  local function end_run()
    if run then
      fold(ctx, run.first, 'failed', ('%s/%s/%s'):format(turn.id, agent.id, run.from),
        { count = run.count, from = run.from, to = run.to })
      run = nil
    end
  end
  for _, cell in ipairs(agent.cells) do
    if cell.phase ~= 'bootstrap' then
      local failed = cell.outcome ~= nil and not cell.ok
      if failed and not run then
        run = { first = #ctx.out + 1, from = cell.number, count = 0 }
      elseif not failed then
        end_run()
      end
      local state = cell.outcome and (cell.ok and cell.outcome or ('✗ ' .. cell.outcome)) or 'running'
      add(ctx, ('%s  [cell %s] %s'):format(indent, tostring(cell.number), one_line(state)), row)
      add(ctx, M.lines(cell.code, LIMITS.code_lines, indent .. '    │ '), row)
      -- a failed cell's output is its error (a traceback): its own marker and highlight
      add(ctx, M.lines(cell.output, LIMITS.output_lines, indent .. (failed and '    ✗ ' or '    → ')), row)
      if failed then
        run.count, run.to = run.count + 1, cell.number
      end
    end
  end
  end_run()
  for _, child_id in ipairs(agent.children) do
    render_agent(ctx, turn, turn.agents[child_id], indent .. '  ', row)
  end
  fold(ctx, first, 'agent', turn.id .. '/' .. agent.id)
end

local function render_turn(ctx, turn)
  local sid = ctx.sid
  local trace = turn.trace_id and M.trace_uri(sid, turn.trace_id) or nil
  local row = { turn = turn.id, uri = trace }
  local first = #ctx.out + 1
  table.insert(ctx.turn_lines, first)
  local shown, reasons = M.shown_status(turn.status, turn.outcome)
  local head = ('Turn %s  [%s]'):format(M.turn_name(turn), one_line(shown))
  if turn.route then
    head = head .. '  route ' .. one_line(turn.route)
  end
  if turn.max then
    head = head .. ('  model calls %s/%s'):format(tostring(turn.used), tostring(turn.max))
  end
  local at = M.when(turn.created_at, 'clock')
  if at ~= '' then
    head = head .. '  · ' .. at
  end
  add(ctx, head, row)
  add(ctx, labelled(turn.task, 3, 'Task: '), row)
  if turn.summary then
    add(ctx, labelled(turn.summary, 2, 'Triage: '), row)
  end
  local root = turn.agents.root
  if root then
    render_agent(ctx, turn, root, '', row)
  end
  for _, id in ipairs(turn.agent_order) do -- orphans (parent unknown) still show
    local agent = turn.agents[id]
    if id ~= 'root' and not (agent.parent and turn.agents[agent.parent]) then
      render_agent(ctx, turn, agent, '', row)
    end
  end
  if turn.stored and trace then
    add(ctx, '  (a stored Turn: its agents and cells are in its trace, <CR> opens it)', row)
  end
  if reasons then
    add(ctx, labelled(reasons, 5, 'Outcome: '), row)
  end
  if turn.answer and turn.answer ~= '' then
    add(ctx, labelled(turn.answer, 20, 'Answer: '), row)
  end
  if turn.error then
    add(ctx, labelled(turn.error, 5, 'Error: '), row)
  end
  for _, a in ipairs(turn.artifacts or {}) do
    local uri = type(a) == 'table' and (a.uri or artifact_uri(sid, a.path)) or artifact_uri(sid, a)
    add(ctx, 'Artifact: ' .. one_line(uri), { turn = turn.id, uri = uri })
  end
  if turn.artifacts_omitted and turn.artifacts_omitted > 0 then
    add(ctx, ('Artifact: … %d more (:Fleet artifacts)'):format(turn.artifacts_omitted), row)
  end
  if trace then
    add(ctx, 'Trace: ' .. one_line(trace), row)
  end
  fold(ctx, first, 'turn', turn.id)
end

--- The session buffer's view of a Session: `out` (its lines), `folds` ({first, last, kind:
--- 'turn'|'agent'|'failed', key}), `rows` (line -> {turn, uri}: what <CR> opens) and
--- `turn_lines` (the Turn header lines).
function M.render_view(session_id)
  local ctx = new_ctx(session_id)
  local s = sessions[session_id]
  add(ctx, 'Fleet session ' .. one_line(session_id) .. '  (g? for help)')
  if not s or #s.order == 0 then
    add(ctx, (s and s.loading) and '(loading the stored Turns…)' or '(no Turn yet: :Fleet run)')
    return ctx
  end
  for n, turn_id in ipairs(s.order) do
    add(ctx, '')
    render_turn(ctx, s.turns[turn_id])
    if n < #s.order then
      add(ctx, string.rep('─', 40))
    end
  end
  return ctx
end

--- The session buffer's lines for a Session.
function M.render_lines(session_id)
  return M.render_view(session_id).out
end

--- Fold levels of a view's lines (the 'foldexpr' values): a line's level is the number of folds
--- holding it; a fold's first line starts it (">n").
local function fold_levels(view)
  local levels, starts = {}, {}
  for l = 1, #view.out do
    levels[l] = 0
  end
  for _, f in ipairs(view.folds) do
    for l = f.first, f.last do
      levels[l] = levels[l] + 1
    end
  end
  for _, f in ipairs(view.folds) do
    starts[f.first] = true
  end
  local expr = {}
  for l = 1, #view.out do
    expr[l] = (starts[l] and '>' or '') .. tostring(levels[l])
  end
  return expr
end

--- 'foldexpr' of the session buffer (v:lua.require'fleet.tree'.foldexpr()).
function M.foldexpr()
  local view = views[vim.api.nvim_get_current_buf()]
  return view and view.levels[vim.v.lnum] or '0'
end

--- 'foldtext' of the session buffer: a folded run of failed cells says how many; other folds
--- show their first line and how many lines they hold.
function M.foldtext()
  local view = views[vim.api.nvim_get_current_buf()]
  local first, last = vim.v.foldstart, vim.v.foldend
  for _, f in ipairs(view and view.folds or {}) do
    if f.first == first and f.kind == 'failed' then
      local indent = (view.out[first] or ''):match('^%s*') or ''
      local cells = f.from == f.to and ('cell ' .. tostring(f.from))
        or ('cells %s–%s'):format(tostring(f.from), tostring(f.to))
      return ('%s✗ %d failed %s: %s  (zo opens)'):format(indent, f.count,
        f.count == 1 and 'cell' or 'cells', cells)
    end
  end
  return ('%s  (%d lines)'):format(vim.fn.getline(first), last - first + 1)
end

M.HELP = {
  'fleet session buffer:',
  '  <CR>, gf   open what is under the cursor: an artifact, else the Turn\'s trace',
  '  ]] / [[    next / previous Turn',
  '  zo / zc    open / close a fold (Turns, agents; runs of failed cells start closed)',
  '  q          close the window',
  '  g?         this help (:help fleet-session-buffer)',
}

function M.help()
  vim.api.nvim_echo(vim.tbl_map(function(l) return { l .. '\n' } end, M.HELP), false, {})
end

--- What <CR> opens on line `lnum` of a session buffer: a fleet:/ URI or nil.
function M.target(buf, lnum)
  local view = views[buf]
  local row = view and view.rows[lnum]
  return row and row.uri or nil
end

function M.open_under_cursor()
  local buf = vim.api.nvim_get_current_buf()
  local uri = M.target(buf, vim.api.nvim_win_get_cursor(0)[1])
  if not uri then
    vim.notify('fleet: nothing to open on this line (a Turn without a trace yet)', vim.log.levels.WARN)
    return
  end
  vim.cmd('wincmd p') -- open it beside the session buffer when there is another window
  if vim.api.nvim_get_current_buf() == buf then
    vim.cmd('aboveleft split')
  end
  require('fleet').open(uri)
end

--- Move to the next (`dir` 1) or previous (-1) Turn header, `count` times.
function M.jump(dir, count)
  local view = views[vim.api.nvim_get_current_buf()]
  local line = vim.api.nvim_win_get_cursor(0)[1]
  for _ = 1, math.max(count or 1, 1) do
    local target = nil
    for _, l in ipairs(view and view.turn_lines or {}) do
      if dir > 0 and l > line and not target then
        target = l
      elseif dir < 0 and l < line then
        target = l
      end
    end
    if not target then
      break
    end
    line = target
  end
  vim.api.nvim_win_set_cursor(0, { line, 0 })
end

local function close_window()
  if #vim.api.nvim_tabpage_list_wins(0) > 1 then
    vim.cmd.close()
  else
    vim.cmd('silent! buffer #')
  end
end

local function set_mappings(buf)
  local function map(lhs, rhs, desc)
    vim.keymap.set('n', lhs, rhs, { buffer = buf, nowait = true, silent = true, desc = desc })
  end
  map('q', close_window, 'Close the session buffer')
  map('<CR>', M.open_under_cursor, 'Open the artifact or trace under the cursor')
  map('gf', M.open_under_cursor, 'Open the artifact or trace under the cursor')
  map(']]', function() M.jump(1, vim.v.count1) end, 'Next Turn')
  map('[[', function() M.jump(-1, vim.v.count1) end, 'Previous Turn')
  map('g?', M.help, 'Session buffer help')
end

--- The session buffer's window options (local to the buffer in that window): folds by
--- expression, open except runs of failed cells.
local function set_window(win)
  local function set(name, value)
    vim.api.nvim_set_option_value(name, value, { scope = 'local', win = win })
  end
  vim.api.nvim_win_call(win, function()
    set('foldmethod', 'expr')
    set('foldexpr', "v:lua.require'fleet.tree'.foldexpr()")
    set('foldtext', "v:lua.require'fleet.tree'.foldtext()")
    set('foldlevel', 99)
    set('foldenable', true)
    set('wrap', false)
  end)
end

local function windows_of(buf)
  return vim.tbl_filter(function(win)
    return vim.api.nvim_win_get_buf(win) == buf
  end, vim.api.nvim_list_wins())
end

--- Close, once per window, each run of failed cells that window has not closed before (fold
--- states belong to windows: a new window showing the buffer starts with them closed too).
local function close_failed_runs(buf)
  local view = views[buf]
  if not view then
    return
  end
  for _, win in ipairs(windows_of(buf)) do
    local closed = view.closed[win] or {}
    view.closed[win] = closed
    for _, f in ipairs(view.folds) do
      if f.kind == 'failed' and not closed[f.key] then
        closed[f.key] = true
        vim.api.nvim_win_call(win, function()
          if vim.fn.foldclosed(f.first) == -1 then
            pcall(vim.cmd, f.first .. 'foldclose')
          end
        end)
      end
    end
  end
end

--- The session buffer for a Session (created on first use; `nofile`, not modifiable).
function M.buffer(session_id, create)
  local name = 'fleet://session/' .. session_id
  local buf = vim.fn.bufnr(name)
  if buf == -1 then
    if not create then
      return nil
    end
    buf = vim.api.nvim_create_buf(true, true)
    vim.api.nvim_buf_set_name(buf, name)
    vim.bo[buf].buftype = 'nofile'
    vim.bo[buf].swapfile = false
    vim.bo[buf].filetype = 'fleetsession'
    vim.bo[buf].modifiable = false
    set_mappings(buf)
    vim.api.nvim_create_autocmd('BufWinEnter', {
      buffer = buf,
      callback = function()
        set_window(vim.api.nvim_get_current_win())
        vim.schedule(function() close_failed_runs(buf) end)
      end,
    })
    vim.api.nvim_create_autocmd('BufWipeout', {
      buffer = buf,
      callback = function() views[buf] = nil end,
    })
  end
  return buf
end

--- The running Turn of a Session (the newest one still running), or nil.
local function running_turn(session_id)
  local s = sessions[session_id]
  for i = #(s and s.order or {}), 1, -1 do
    local turn = s.turns[s.order[i]]
    if turn.status == 'running' then
      return turn
    end
  end
end

function M.render(session_id)
  local buf = M.buffer(session_id, false)
  if not buf or not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  local view = M.render_view(session_id)
  view.levels = fold_levels(view)
  view.closed = views[buf] and views[buf].closed or {}
  local old = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local new = view.out
  -- a window follows the running Turn while its cursor is in that Turn or on the last line
  local follow = {}
  local running = running_turn(session_id)
  local last_head = views[buf] and views[buf].turn_lines[#views[buf].turn_lines] or math.huge
  for _, win in ipairs(windows_of(buf)) do
    local line = vim.api.nvim_win_get_cursor(win)[1]
    follow[win] = running ~= nil and (line >= last_head or line >= #old)
  end
  views[buf] = view
  -- replace only what changed (a line range), so folds elsewhere keep their state
  local pre, suf = 0, 0
  while pre < #old and pre < #new and old[pre + 1] == new[pre + 1] do
    pre = pre + 1
  end
  while suf < #old - pre and suf < #new - pre and old[#old - suf] == new[#new - suf] do
    suf = suf + 1
  end
  if pre < #old or pre < #new then
    vim.bo[buf].modifiable = true
    vim.api.nvim_buf_set_lines(buf, pre, #old - suf, false, vim.list_slice(new, pre + 1, #new - suf))
    vim.bo[buf].modifiable = false
    vim.bo[buf].modified = false
  end
  close_failed_runs(buf)
  for win, yes in pairs(follow) do
    if yes and vim.api.nvim_win_is_valid(win) then
      vim.api.nvim_win_set_cursor(win, { #new, 0 })
    end
  end
end

--- Show a Session's buffer: in a window of this tab that already shows it, else in a new split
--- below (`opts.split`), else in the current window. The cursor goes to the running Turn (or,
--- with `opts.follow`, to the end, where the Turn about to run appears: the window follows it).
function M.show(session_id, opts)
  local buf = M.buffer(session_id, true)
  M.render(session_id)
  local win = windows_of(buf)[1]
  if win and vim.api.nvim_win_get_tabpage(win) == vim.api.nvim_get_current_tabpage() then
    vim.api.nvim_set_current_win(win)
  else
    if opts and opts.split and vim.api.nvim_get_current_buf() ~= buf then
      vim.cmd('botright split')
    end
    vim.api.nvim_win_set_buf(0, buf)
    set_window(vim.api.nvim_get_current_win())
    close_failed_runs(buf)
  end
  if running_turn(session_id) or (opts and opts.follow) then
    vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(buf), 0 })
  end
  return buf
end

--- Windows showing another Session's buffer show `session_id`'s instead (a Session loaded).
function M.switch_windows(session_id)
  local buf = M.buffer(session_id, true)
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    local shown = vim.api.nvim_win_get_buf(win)
    if shown ~= buf and vim.api.nvim_buf_get_name(shown):match('^fleet://session/') then
      vim.api.nvim_win_set_buf(win, buf)
    end
  end
end

--- Fill a Session's state from its stored Turns (TurnSummary[], oldest first): Turns this
--- Neovim did not see get a stored entry (status, outcome, task, answer, artifacts, trace);
--- those it saw get their number and trace. Later Turns are numbered from the newest.
function M.apply_history(session_id, summaries)
  local s = session_state(session_id)
  local max_seq = 0
  for _, t in ipairs(summaries or {}) do
    if type(t) == 'table' and type(t.turnId) == 'string' then
      local seq = tonumber(t.seq)
      max_seq = math.max(max_seq, seq or 0)
      local turn = s.turns[t.turnId]
      if not turn then
        turn = { id = t.turnId, agents = {}, agent_order = {}, stored = true, status = t.status,
          task = t.task, route = t.route, answer = t.answer,
          outcome = type(t.outcome) == 'table' and t.outcome or nil,
          error = type(t.error) == 'table' and t.error.message or nil,
          artifacts = type(t.artifactPaths) == 'table' and t.artifactPaths or {},
          artifacts_omitted = tonumber(t.artifactsOmitted) }
        s.turns[t.turnId] = turn
        table.insert(s.order, t.turnId)
      end
      turn.seq = seq or turn.seq
      turn.created_at = turn.created_at or t.createdAt
      turn.trace_id = turn.trace_id or (type(t.traceId) == 'string' and t.traceId or nil)
    end
  end
  table.sort(s.order, function(a, b)
    local sa, sb = s.turns[a].seq or math.huge, s.turns[b].seq or math.huge
    return sa < sb
  end)
  while #s.order > LIMITS.turns do
    s.turns[table.remove(s.order, 1)] = nil
  end
  for _, id in ipairs(s.order) do -- live Turns not in the history yet (it was read before they started)
    max_seq = math.max(max_seq, s.turns[id].seq or 0)
  end
  s.max_seq = max_seq
  s.loading = nil
end

--- Fill the session buffer from the stored history (fleet/session/history), then render it.
function M.load_history(session_id, callback)
  local s = session_state(session_id)
  s.loading = true
  M.render(session_id)
  require('fleet').request('fleet/session/history', { sessionId = session_id, limit = LIMITS.turns },
    function(err, result)
      if err then
        s.loading = nil
        require('fleet').notify_error('fleet/session/history', err)
      else
        M.apply_history(session_id, result.turns)
      end
      M.render(session_id)
      if callback then
        callback(err, result)
      end
    end)
end

--- A new Session has no stored Turns: its Turns are numbered from #1.
function M.mark_new(session_id)
  local s = session_state(session_id)
  s.max_seq = s.max_seq or 0
end

--- fleet/turn/didEmit: update the tree now, render at most once per event-loop turn.
function M.on_event(event)
  M.apply(event)
  local sid = type(event) == 'table' and event.sessionId
  if type(sid) ~= 'string' or pending[sid] then
    return
  end
  pending[sid] = true
  vim.schedule(function()
    pending[sid] = nil
    M.render(sid)
  end)
end

--- The state this Neovim keeps of a Turn it heard end (status, outcome, ...), or nil.
function M.turn(session_id, turn_id)
  local s = sessions[session_id]
  return s and s.turns[turn_id] or nil
end

function M.reset(session_id)
  sessions[session_id] = nil
end

return M
