-- Headless Neovim scenario driven by tests/clients/test_nvim.py: the quickstart through the
-- fleet.nvim plugin against a real `fleet-lsp serve` over stdio. Writes a JSON report.
local env = vim.env
vim.opt.runtimepath:prepend(env.FLEET_NVIM_PLUGIN)
vim.g.fleet_no_auto_setup = true
vim.cmd('runtime plugin/fleet.lua')

local report = { steps = {}, progress = {}, errors = {} }
local function step(name, value)
  report.steps[name] = value
end
local function finish(code)
  local file = assert(io.open(env.FLEET_NVIM_OUT, 'w'))
  file:write(vim.json.encode(report))
  file:close()
  vim.cmd(code == 0 and 'qa!' or ('cquit ' .. code))
end

local ok, err = pcall(function()
  local fleet = require('fleet')
  -- progress_echo = true: this scenario's own LspProgress autocommand (below) would count as a
  -- consumer of progress, and 'auto' would leave the echo area alone
  fleet.setup({ cmd = vim.json.decode(env.FLEET_NVIM_CMD), progress_echo = true })
  -- what the plugin writes to the echo area (its progress line, the session buffer's g? help)
  local echoes = {}
  report.echoes = echoes
  local real_echo = vim.api.nvim_echo
  vim.api.nvim_echo = function(chunks, history, opts)
    table.insert(echoes, table.concat(vim.tbl_map(function(c) return c[1] end, chunks)))
    return real_echo(chunks, history, opts)
  end
  vim.api.nvim_create_autocmd('LspProgress', {
    callback = function(ev)
      local v = ev.data.params.value
      table.insert(report.progress, {
        token = ev.data.params.token,
        kind = v.kind,
        title = v.title,
        message = v.message,
        agentId = v.agentId,
        status = fleet.status(),
        lsp_status = vim.lsp.status(), -- Neovim's own progress text, what fidget-style plugins read
      })
    end,
  })

  local function await(start, timeout_ms)
    local done, err_, result = false, nil, nil
    start(function(e, r)
      done, err_, result = true, e, r
    end)
    assert(vim.wait(timeout_ms or 30000, function() return done end, 20), 'timed out')
    return err_, result
  end

  local e, info = await(function(cb) fleet.new_session('nvim1', cb) end)
  assert(not e, e and e.message)
  step('session', info)
  local e2, attached = await(function(cb) fleet.attach(env.FLEET_NVIM_CSV, cb) end)
  assert(not e2, e2 and e2.message)
  step('attached', attached)
  local e3, dataset = await(function(cb) fleet.set_dataset('files/sales.csv', 'sales', cb) end)
  assert(not e3, e3 and e3.message)
  step('dataset', dataset)

  local e4, result = await(function(cb) fleet.run_turn(env.FLEET_NVIM_TASK, cb) end, 180000)
  assert(not e4, e4 and e4.message)
  step('turn', result)
  step('status_after', fleet.status())

  local function loaded()
    assert(vim.wait(120000, function() return vim.b.fleet_loading == false end, 20), 'document not loaded')
  end
  step('echoes_turn', vim.deepcopy(echoes))
  vim.v.warningmsg = ''
  fleet.open(fleet.artifact_uri('revenue_by_region.csv'))
  loaded()
  step('artifact_lines', vim.api.nvim_buf_get_lines(0, 0, -1, false))
  step('artifact_modifiable', vim.bo.modifiable)
  step('artifact_name', vim.api.nvim_buf_get_name(0))
  step('artifact_flags', { readonly = vim.bo.readonly, modified = vim.bo.modified,
    warning = vim.v.warningmsg })

  -- an artifact with CRLF line ends: no ^M, no W10, and :w writes the same bytes back
  vim.v.warningmsg = ''
  fleet.open(fleet.artifact_uri('notes_crlf.csv'))
  loaded()
  local copy = vim.fn.getcwd() .. '/notes_copy.csv'
  local crlf = { lines = vim.api.nvim_buf_get_lines(0, 0, -1, false), fileformat = vim.bo.fileformat,
    readonly = vim.bo.readonly, modifiable = vim.bo.modifiable, modified = vim.bo.modified,
    warning = vim.v.warningmsg, messages = vim.fn.execute('messages') }
  vim.cmd('silent write ' .. vim.fn.fnameescape(copy))
  local written = assert(io.open(copy, 'rb'))
  crlf.written = written:read('a')
  written:close()
  step('crlf', crlf)

  if result.traceId then
    fleet.open(('fleet:/sessions/nvim1/traces/%s.md'):format(result.traceId))
    loaded()
    step('trace_lines', vim.api.nvim_buf_get_lines(0, 0, 40, false))
    step('trace_filetype', vim.bo.filetype)
  end

  -- the session buffer: the live agent tree after a Turn with a child agent
  local tree = require('fleet.tree')
  assert(vim.wait(10000, function()
    local lines = tree.render_lines('nvim1')
    return vim.iter(lines):any(function(l) return l:match('^Answer: ') ~= nil end)
  end, 20), 'the session buffer never showed the answer')
  vim.wait(200)
  local sbuf = tree.buffer('nvim1', false)
  step('session_buffer', sbuf and vim.api.nvim_buf_get_lines(sbuf, 0, -1, false) or {})
  step('session_buffer_modifiable', sbuf and vim.bo[sbuf].modifiable)
  if sbuf then
    local function syntax_at(pattern)
      local lines = vim.api.nvim_buf_get_lines(sbuf, 0, -1, false)
      for lnum, l in ipairs(lines) do
        local col = l:find(pattern)
        if col then
          return vim.api.nvim_buf_call(sbuf, function()
            return vim.fn.synIDattr(vim.fn.synIDtrans(vim.fn.synID(lnum, col, 1)), 'name')
              .. ' ' .. vim.fn.synIDattr(vim.fn.synID(lnum, col, 1), 'name')
          end)
        end
      end
    end
    vim.api.nvim_win_set_buf(0, sbuf)
    step('session_syntax', {
      turn = syntax_at('^Turn '),
      root = syntax_at('^▾ root'),
      succeeded = syntax_at('succeeded'),
      output = syntax_at('North   3217'),
      uri = syntax_at('fleet:/'),
    })
  end
  -- a real terminal picture: a TUI (`nvim --remote-ui`, attached to this headless Neovim) in a
  -- detached tmux pane, captured with its colours (`capture-pane -e`). `setup()` arranges the
  -- windows; `ready(plain)` says when the pane shows what the picture is for.
  local shots = 0
  local function shoot(name, setup, ready)
    if not env.FLEET_NVIM_SHOT then
      return
    end
    shots = shots + 1
    local base = env.FLEET_NVIM_SHOT .. shots
    local shot = { ok = false }
    local tmux = { 'tmux', '-u', '-S', base .. '.tmux', '-f', base .. '.conf' }
    local ran, why = pcall(function()
      vim.fn.writefile({ 'set -g default-terminal tmux-256color', 'set -g status off',
        'set -as terminal-features ",*:RGB"' }, base .. '.conf')
      local listen = vim.fn.serverstart(base .. '.nvim')
      setup()
      vim.o.termguicolors = true
      vim.o.ruler = true
      local cmd = vim.list_extend(vim.deepcopy(tmux), { 'new-session', '-d', '-x', '120', '-y', '46',
        vim.v.progpath .. ' --server ' .. vim.fn.shellescape(listen) .. ' --remote-ui' })
      local started = vim.system(cmd, { env = { LANG = 'C.UTF-8', COLORTERM = 'truecolor' } }):wait(10000)
      assert(started.code == 0, 'tmux: ' .. tostring(started.stderr))
      assert(vim.wait(10000, function() return #vim.api.nvim_list_uis() > 0 end, 20), 'no UI attached')
      vim.cmd('redraw!') -- every cell written afresh at the UI's size
      local text = ''
      assert(vim.wait(10000, function()
        vim.cmd('redraw')
        local cap = vim.system(vim.list_extend(vim.deepcopy(tmux), { 'capture-pane', '-p', '-e' }),
          { text = true }):wait(5000)
        text = cap.stdout or ''
        return ready((text:gsub('\27%[[%d;]*m', '')))
      end, 200), 'the pane never showed it: ' .. text)
      shot.ansi, shot.ok = text, true
    end)
    shot.error = not ran and tostring(why) or nil
    vim.system(vim.list_extend(vim.deepcopy(tmux), { 'kill-server' })):wait(5000)
    vim.wait(5000, function() return #vim.api.nvim_list_uis() == 0 end, 20)
    step(name, shot)
  end
  if sbuf then
    shoot('screenshot', function()
      vim.cmd('only')
      vim.api.nvim_win_set_buf(0, sbuf)
      vim.api.nvim_win_set_cursor(0, { 1, 0 })
    end, function(plain)
      return plain:find('REGION=North check', 1, true) ~= nil and plain:find('Artifact:', 1, true) ~= nil
        and plain:find('\nfleet://session/nvim1 ', 1, true) ~= nil -- the statusline is drawn too
    end)
  end
  -- hostile text is rendered safely: control characters and newlines cannot break a line
  tree.apply({ turnId = 'tx', sessionId = 'esc', agentId = 'root', kind = 'turn_started',
    payload = { task = "a\27[31mred\0nul\nsecond ]] end) vim.cmd('qa!') --", mode = 'rlm' } })
  step('escaped_lines', tree.render_lines('esc'))

  -- the interactive commands, with vim.ui.select / vim.ui.input answered by a script
  local answers, prompts = {}, {}
  local function answer(choice_of)
    return function(items, opts, on_choice)
      table.insert(prompts, { prompt = opts and opts.prompt, items = items and vim.tbl_map(function(i)
        return opts and opts.format_item and opts.format_item(i) or i
      end, items) or nil })
      local pick = table.remove(answers, 1)
      local choice = nil
      if pick then choice = choice_of(pick, items, opts) end
      vim.schedule(function() on_choice(choice) end)
    end
  end
  vim.ui.select = answer(function(pick, items, opts)
    for _, item in ipairs(items) do
      local text = opts and opts.format_item and opts.format_item(item) or item
      if text:find(pick, 1, true) then return item end
    end
    error('no item matches ' .. pick .. ' in ' .. vim.inspect(items))
  end)
  vim.ui.input = function(opts, on_input)
    table.insert(prompts, { prompt = opts.prompt })
    local text = table.remove(answers, 1)
    vim.schedule(function() on_input(text) end)
  end
  local ui = require('fleet.ui')
  local notes = {}
  local notify = vim.notify
  vim.notify = function(msg, level)
    table.insert(notes, { msg = msg, level = level })
  end
  local function drive(name, command, picks, done, timeout)
    answers, prompts = picks, {}
    local before = #notes
    vim.cmd(command)
    assert(vim.wait(timeout or 30000, function() return #answers == 0 and done() end, 20),
      name .. ' did not finish: ' .. vim.inspect({ answers = answers, notes = notes }))
    vim.wait(50)
    local said = {}
    for i = before + 1, #notes do table.insert(said, notes[i].msg) end
    step(name, { prompts = prompts, notes = said, buffer = vim.api.nvim_buf_get_name(0),
      lines = vim.api.nvim_buf_get_lines(0, 0, 60, false), filetype = vim.bo.filetype })
  end
  local function said(pattern)
    return function()
      for _, n in ipairs(notes) do if n.msg:match(pattern) then return true end end
      return false
    end
  end

  -- :FleetSessions: delete a spare Session, then load nvim1
  local e6 = await(function(cb) fleet.new_session('nvim-spare', cb) end)
  assert(not e6, e6 and e6.message)
  drive('sessions_delete', 'FleetSessions', { 'nvim-spare', 'Delete', 'Yes' }, said('nvim%-spare deleted'))
  local _, after_delete = await(function(cb) fleet.request('fleet/session/list', vim.empty_dict(), cb) end)
  step('sessions_after_delete', vim.tbl_map(function(s) return s.sessionId end, after_delete.sessions))
  -- a Neovim that did not see Turn #1 (its memory of the tree forgotten): Load fills the
  -- session buffer from the stored history
  tree.reset('nvim1')
  drive('sessions_load', 'FleetSessions', { 'nvim1', 'Load' }, said('nvim1 loaded'))
  step('session_after_load', fleet.session_id())
  assert(vim.wait(10000, function()
    return vim.iter(vim.api.nvim_buf_get_lines(0, 0, -1, false)):any(function(l)
      return l:match('^Trace: ') ~= nil
    end)
  end, 20), 'the loaded session buffer was not filled: ' .. vim.inspect(vim.api.nvim_buf_get_lines(0, 0, -1, false)))
  step('loaded_buffer', { name = vim.api.nvim_buf_get_name(0), lines = vim.api.nvim_buf_get_lines(0, 0, -1, false),
    windows = #vim.api.nvim_tabpage_list_wins(0) })

  vim.cmd('enew')
  drive('artifacts', 'FleetArtifacts', { 'North.txt' }, function()
    return vim.api.nvim_buf_get_name(0):match('North%.txt$') ~= nil and vim.b.fleet_loading == false
  end)
  vim.cmd('enew')
  drive('trace', 'FleetTrace', { '#1 ' }, function()
    return vim.bo.filetype == 'markdown' and vim.b.fleet_loading == false
  end)
  -- :FleetLabel in a trace buffer labels that trace (no trace picker)
  local trace_buffer = vim.api.nvim_buf_get_name(0)
  drive('label_here', 'FleetLabel', { 'benchmark', '(keep)', '(keep)', '', '', '' },
    function() return ui.last_label ~= nil end, 60000)
  step('label_here_result', { buffer = trace_buffer, traceId = ui.last_label.traceId,
    status = ui.last_label.labels.status })
  ui.last_label = nil
  drive('history', 'FleetHistory', {}, function()
    return vim.api.nvim_buf_get_name(0):match('^fleet://history/') ~= nil
  end)

  local expect = vim.fn.getcwd() .. '/expectations.json'
  vim.fn.writefile({ vim.json.encode({ schema_version = 1,
    children = { { input_paths = { 'files/sales.csv' } } } }) }, expect)
  drive('label', 'FleetLabel', { '#1 ', 'approved', 'rlm', 'critical', 'North', 'North, 42', expect },
    function() return ui.last_label ~= nil end, 120000)
  step('label_result', ui.last_label)

  drive('memory_review', 'FleetMemory', { 'new', 'Review' }, said('memory reviewed'))
  local _, mem1 = await(function(cb) fleet.request('fleet/memory/list', { sessionId = 'nvim1' }, cb) end)
  step('memories_after_review', mem1.memories)
  drive('memory_reject', 'FleetMemory', { 'reviewed', 'Reject' }, said('memory rejected'))
  local _, mem2 = await(function(cb) fleet.request('fleet/memory/list', { sessionId = 'nvim1' }, cb) end)
  step('memories_after_reject', mem2.memories)

  local models_err = await(function(cb) fleet.request('fleet/models/list', vim.empty_dict(), cb) end)
  step('models_error', models_err and { code = models_err.code, message = models_err.message })
  if not models_err then
    drive('models', 'FleetModels', { 'nv-small', '(configured default)' },
      function() return ui.last_models ~= nil end)
    step('models_result', ui.last_models)
  end

  -- :FleetRun without a task: a prompt buffer; the line typed there runs a Turn
  vim.cmd('FleetRun')
  step('prompt_buffer', { name = vim.api.nvim_buf_get_name(0), buftype = vim.bo.buftype })
  vim.cmd('stopinsert')
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('i' .. env.FLEET_NVIM_PROMPT .. '<CR><Esc>',
    true, false, true), 'xt', false)
  assert(vim.wait(120000, function()
    local lines = tree.render_lines('nvim1')
    return vim.iter(lines):any(function(l) return l:match('^Answer: 42') ~= nil end)
  end, 20), 'the prompt buffer Turn did not answer: ' .. vim.inspect(tree.render_lines('nvim1')))
  assert(vim.wait(10000, function() return fleet.status() == '' end, 20))
  step('prompt_turn_lines', tree.render_lines('nvim1'))
  assert(vim.wait(30000, said('completed: 42'), 20), 'the prompt buffer Turn was not reported')

  -- :FleetRun of a Turn whose first cell fails: reported "completed with errors" and why (what is
  -- shown is recorded, not asserted here: the test says what is wrong without failing the others)
  local first = #notes + 1
  vim.cmd('FleetRun ' .. env.FLEET_NVIM_PARTIAL)
  local function reported()
    local found = {}
    for i = first, #notes do
      if notes[i].msg:match('^fleet: Turn ') then table.insert(found, notes[i]) end
    end
    return found
  end
  assert(vim.wait(120000, function() return #reported() > 0 end, 20),
    'the FIRSTFAILS Turn never ended: ' .. vim.inspect(notes))
  vim.wait(10000, function() -- its turn_completed event (the buffer) may come just after the answer
    local after_task = false
    for _, l in ipairs(tree.render_lines('nvim1')) do
      after_task = after_task or l == 'Task: ' .. env.FLEET_NVIM_PARTIAL
      if after_task and l:match('^Answer: ') then return true end
    end
    return false
  end, 20)
  step('partial', { notes = vim.tbl_map(function(n) return n.msg end, reported()),
    levels = vim.tbl_map(function(n) return n.level end, reported()) })
  step('partial_lines', tree.render_lines('nvim1'))
  local pbuf = tree.buffer('nvim1', false)
  -- :FleetRun showed the session buffer in a split whose cursor followed the Turn as it grew
  local fwin = pbuf and vim.fn.bufwinid(pbuf) or -1
  local head3 = nil
  for lnum, l in ipairs(pbuf and vim.api.nvim_buf_get_lines(pbuf, 0, -1, false) or {}) do
    if l:match('^Turn #3 ') then head3 = lnum end
  end
  step('follow', { window = fwin ~= -1, head = head3,
    cursor = fwin ~= -1 and vim.api.nvim_win_get_cursor(fwin)[1] or nil })
  tree.render('nvim1')
  step('partial_syntax', pbuf and vim.api.nvim_buf_call(pbuf, function()
    for lnum, l in ipairs(vim.api.nvim_buf_get_lines(pbuf, 0, -1, false)) do
      local col = l:find('[completed with errors]', 1, true)
      if col then
        local id = vim.fn.synID(lnum, col + 1, 1)
        return vim.fn.synIDattr(vim.fn.synIDtrans(id), 'name') .. ' ' .. vim.fn.synIDattr(id, 'name')
      end
    end
  end))
  drive('partial_history', 'FleetHistory', {}, function()
    return vim.api.nvim_buf_get_name(0):match('^fleet://history/') ~= nil
  end)

  -- the session buffer's folds and mappings, on the Turns so far: #1 (stored, from the history),
  -- #2 (the prompt's) and #3 (FIRSTFAILS: its failed cell 1 is a run of failed cells)
  local function keys(k)
    vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(k, true, false, true), 'xt', false)
  end
  local function first_line(pattern, from)
    for lnum, l in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do
      if lnum >= (from or 1) and l:match(pattern) then return lnum end
    end
  end
  vim.cmd('only')
  vim.cmd('FleetSession')
  local swin = vim.api.nvim_get_current_win()
  step('session_split', { name = vim.api.nvim_buf_get_name(0), windows = #vim.api.nvim_tabpage_list_wins(0) })
  local partial_task = first_line('^Task: FIRSTFAILS')
  local failed = first_line('^  %[cell %d+%] ✗', partial_task)
  local ok_cell = first_line('^  %[cell %d+%] completed', partial_task)
  local traceback = first_line('^    ✗ ', partial_task)
  local function syn(lnum) -- the highlight of the line's last character
    local id = vim.fn.synID(lnum, #vim.fn.getline(lnum), 1)
    return vim.fn.synIDattr(vim.fn.synIDtrans(id), 'name') .. ' ' .. vim.fn.synIDattr(id, 'name')
  end
  step('folds', {
    failed_closed = failed and vim.fn.foldclosed(failed) == failed,
    foldtext = failed and vim.fn.foldtextresult(failed),
    ok_cell_open = ok_cell and vim.fn.foldclosed(ok_cell) == -1,
    root_level = vim.fn.foldlevel(first_line('^▾ root', partial_task)),
    turn_level = vim.fn.foldlevel(partial_task - 1),
    traceback_syntax = traceback and syn(traceback),
    output_syntax = syn(first_line('^    → ', partial_task)),
    foldmethod = vim.wo.foldmethod,
  })
  vim.cmd(('%dfoldopen'):format(failed))
  step('traceback_lines', vim.api.nvim_buf_get_lines(0, failed - 1, ok_cell - 1, false))
  -- the second picture: the buffer's end, Turn #3 with its failed cell's traceback opened
  local sbuf2 = vim.api.nvim_get_current_buf()
  shoot('screenshot_turns', function()
    vim.cmd('only')
    vim.api.nvim_win_set_buf(0, sbuf2)
    vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(0), 0 })
    vim.cmd('normal! zb')
  end, function(plain)
    return plain:find('FIRSTFAILS', 1, true) ~= nil and plain:find('Answer: 42', 1, true) ~= nil
  end)
  vim.cmd('FleetSession')
  swin = vim.api.nvim_get_current_win()
  -- ]] and [[ between Turns
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  local heads = {}
  for _ = 1, 3 do
    keys(']]')
    table.insert(heads, vim.api.nvim_get_current_line())
  end
  keys('[[')
  table.insert(heads, vim.api.nvim_get_current_line())
  -- g? echoes the help
  local before_help = #echoes
  keys('g?')
  local help = table.concat(vim.list_slice(echoes, before_help + 1), '')
  -- <CR> on Turn #1's stored Artifact line opens it; gf on a Turn opens its trace
  vim.api.nvim_win_set_cursor(0, { first_line('^Artifact: .*revenue_by_region%.csv$'), 0 })
  keys('<CR>')
  assert(vim.wait(30000, function() return vim.b.fleet_loading == false end, 20), 'artifact not opened')
  local opened_artifact = { name = vim.api.nvim_buf_get_name(0), first = vim.api.nvim_buf_get_lines(0, 0, 1, false)[1] }
  vim.api.nvim_set_current_win(swin)
  vim.api.nvim_win_set_cursor(0, { partial_task, 0 })
  keys('gf')
  assert(vim.wait(30000, function() return vim.b.fleet_loading == false end, 20), 'trace not opened')
  local opened_trace = { name = vim.api.nvim_buf_get_name(0), filetype = vim.bo.filetype }
  vim.api.nvim_set_current_win(swin)
  local windows = #vim.api.nvim_tabpage_list_wins(0)
  keys('q')
  step('mappings', { heads = heads, help = help, artifact = opened_artifact, trace = opened_trace,
    closed = not vim.api.nvim_win_is_valid(swin), windows_before_q = windows })

  -- :Fleet completion: subcommands, then Sessions, modes, artifacts and traces; the aliases too
  step('completion', {
    subcommands = vim.fn.getcompletion('Fleet ', 'cmdline'),
    partial = vim.fn.getcompletion('Fleet ar', 'cmdline'),
    load = vim.fn.getcompletion('Fleet load ', 'cmdline'),
    mode = vim.fn.getcompletion('Fleet mode ', 'cmdline'),
    open = vim.fn.getcompletion('Fleet open ', 'cmdline'),
    trace = vim.fn.getcompletion('Fleet trace ', 'cmdline'),
    alias = vim.fn.getcompletion('FleetMode f', 'cmdline'),
  })
  step('trace_ids', vim.tbl_map(function(t) return t.traceId end,
    select(2, await(function(cb) fleet.request('fleet/trace/list', { sessionId = 'nvim1' }, cb) end)).traces))

  -- every action confirmed in one line; an error says its method once
  drive('attach_cmd', 'Fleet attach ' .. vim.fn.fnameescape(env.FLEET_NVIM_CSV), {}, said('attached'))
  drive('dataset_cmd', 'Fleet dataset files/sales.csv the sales', {}, said('dataset of session'))
  drive('mode_cmd', 'Fleet mode rlm', {}, said('mode: rlm'))
  drive('mode_bad', 'Fleet mode bogus', {}, said('setMode'))

  -- :checkhealth fleet
  vim.cmd('checkhealth fleet')
  step('health', vim.api.nvim_buf_get_lines(0, 0, -1, false))
  vim.notify = notify

  local e5, bad = await(function(cb) fleet.request('fleet/session/load', { sessionId = '../x' }, cb) end)
  step('bad_request', { code = e5 and e5.code, message = e5 and e5.message, result = bad })

  -- cancel a slow Turn through its progress token
  local cancelled = nil
  local seen_before = #report.progress -- only this Turn's reports count below
  fleet.run_turn(env.FLEET_NVIM_SLOW, function(err_, res) cancelled = { err = err_, result = res } end)
  assert(vim.wait(60000, function()
    for i = seen_before + 1, #report.progress do
      local p = report.progress[i]
      if p.kind == 'report' and p.message and p.message:match('cell') then return true end
    end
    return false
  end, 20), 'no progress report for the slow Turn')
  step('cancel_sent', fleet.cancel())
  assert(vim.wait(60000, function() return cancelled ~= nil end, 20), 'cancel did not end the Turn')
  step('cancelled', cancelled)
  step('cancel_message', { fleet.turn_message(cancelled.result) })
  local restart_notes = {}
  vim.notify = function(msg) table.insert(restart_notes, msg) end
  vim.cmd('Fleet restart')
  vim.notify = notify
  step('restart_notes', restart_notes)
end)

if not ok then
  table.insert(report.errors, tostring(err))
  finish(3)
else
  finish(0)
end
