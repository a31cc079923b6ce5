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

local sessions = {} -- sessionId -> { order = {turnId...}, turns = {turnId -> turn} }
local pending = {} -- sessionId -> true while a render is scheduled

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
    local root = turn.agents.root
    if root then
      root.status = turn.status
    end
  end
end

local function render_agent(out, turn, agent, indent)
  local head = indent .. (agent.id == 'root' and '▾ root' or ('▾ ' .. one_line(agent.id)))
  head = head .. '  [' .. one_line(agent.status) .. ']'
  if agent.subtask then
    head = head .. '  ' .. one_line(agent.subtask)
  end
  table.insert(out, head)
  if agent.error then
    vim.list_extend(out, M.lines(agent.error, 3, indent .. '  ! '))
  end
  for _, cell in ipairs(agent.cells) do
    if cell.phase ~= 'bootstrap' then
      local state = cell.outcome and (cell.ok and cell.outcome or ('✗ ' .. cell.outcome)) or 'running'
      table.insert(out, ('%s  [cell %s] %s'):format(indent, tostring(cell.number), one_line(state)))
      vim.list_extend(out, M.lines(cell.code, LIMITS.code_lines, indent .. '    │ '))
      vim.list_extend(out, M.lines(cell.output, LIMITS.output_lines, indent .. '    → '))
    end
  end
  for _, child_id in ipairs(agent.children) do
    render_agent(out, turn, turn.agents[child_id], indent .. '  ')
  end
end

--- The session buffer's lines for a Session.
function M.render_lines(session_id)
  local s = sessions[session_id]
  local out = { 'Fleet session ' .. one_line(session_id) }
  if not s or #s.order == 0 then
    table.insert(out, '(no Turn yet: :FleetRun)')
    return out
  end
  for n, turn_id in ipairs(s.order) do
    local turn = s.turns[turn_id]
    table.insert(out, '')
    local shown, reasons = M.shown_status(turn.status, turn.outcome)
    local head = ('Turn %s  [%s]'):format(one_line(turn_id), one_line(shown))
    if turn.route then
      head = head .. '  route ' .. one_line(turn.route)
    end
    if turn.max then
      head = head .. ('  model calls %s/%s'):format(tostring(turn.used), tostring(turn.max))
    end
    table.insert(out, head)
    vim.list_extend(out, labelled(turn.task, 3, 'Task: '))
    if turn.summary then
      vim.list_extend(out, labelled(turn.summary, 2, 'Triage: '))
    end
    local root = turn.agents.root
    if root then
      render_agent(out, turn, root, '')
    end
    for _, id in ipairs(turn.agent_order) do -- orphans (parent unknown) still show
      local agent = turn.agents[id]
      if id ~= 'root' and not (agent.parent and turn.agents[agent.parent]) then
        render_agent(out, turn, agent, '')
      end
    end
    if reasons then
      vim.list_extend(out, labelled(reasons, 5, 'Outcome: '))
    end
    if turn.answer and turn.answer ~= '' then
      vim.list_extend(out, labelled(turn.answer, 20, 'Answer: '))
    end
    if turn.error then
      vim.list_extend(out, labelled(turn.error, 5, 'Error: '))
    end
    for _, a in ipairs(turn.artifacts or {}) do
      table.insert(out, 'Artifact: ' .. one_line(a.uri or a.path))
    end
    if n < #s.order then
      table.insert(out, string.rep('─', 40))
    end
  end
  return out
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
  end
  return buf
end

function M.render(session_id)
  local buf = M.buffer(session_id, false)
  if not buf or not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, M.render_lines(session_id))
  vim.bo[buf].modifiable = false
end

--- Show a Session's buffer in the current window (or a split).
function M.show(session_id, opts)
  local buf = M.buffer(session_id, true)
  M.render(session_id)
  if opts and opts.split then
    vim.cmd('botright split')
  end
  vim.api.nvim_win_set_buf(0, buf)
  return buf
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
