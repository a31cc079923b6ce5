// Test-only companion of the Fleet extension (.ci/vscode-e2e). When FLEET_E2E_OUT names a
// folder, it runs the scenario through `vscode.commands.executeCommand`, reads editor state and
// the Fleet extension's exported API, and appends one JSON line per check to
// $FLEET_E2E_OUT/checks.jsonl. Phases the driver must see in the browser (the progress
// notification, the tree) are announced in phase-<name> files; the driver answers ack-<name>.
'use strict';
const vscode = require('vscode');
const fs = require('fs');
const path = require('path');

const FLEET_ID = 'fleet-lsp.fleet-lsp-vscode';
const SUBTASK = 'REGION=North check';
const TASK = 'Calculate revenue by region and save artifacts/revenue_by_region.csv.';
const SLOW = 'SLOWTASK: count slowly';
const FIRST_CELL_FAILS = 'FIRSTFAILS: compute x';
const GOLD = 'e2e gold answer: North=150.5';
const EXPECTED_CSV = 'region,revenue\nNorth,150.5\nSouth,250.0\n';
// the models the driver's stub endpoint (GET /v1/models) lists
const ROOT_MODEL = 'e2e-root-large';
const SUB_MODEL = 'e2e-sub-small';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what, fn, timeoutMs = 60000, everyMs = 200) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (last) return last;
    } catch (error) {
      last = error;
    }
    await sleep(everyMs);
  }
  throw new Error(`timed out waiting for ${what}${last instanceof Error ? ': ' + last.message : ''}`);
}

function activate(context) {
  const out = process.env.FLEET_E2E_OUT;
  if (!out) return;
  const log = (record) => fs.appendFileSync(path.join(out, 'checks.jsonl'), JSON.stringify({ at: new Date().toISOString(), ...record }) + '\n');
  const check = (name, ok, detail) => log({ check: name, ok: Boolean(ok), detail: detail === undefined ? undefined : String(detail).slice(0, 2000) });
  const phase = async (name, timeoutMs = 90000) => {
    fs.writeFileSync(path.join(out, `phase-${name}`), '');
    await waitFor(`the driver's ack of ${name}`, () => fs.existsSync(path.join(out, `ack-${name}`)), timeoutMs);
  };
  run(check, phase, log).then(
    () => log({ done: true }),
    (error) => {
      check('scenario ran to its end', false, error && error.stack ? error.stack : error);
      log({ done: true });
    },
  );
  void context;
}

async function run(check, phase, log) {
  const ext = vscode.extensions.getExtension(FLEET_ID);
  if (!ext) throw new Error(`${FLEET_ID} is not installed`);
  // 1. The driver clicks the Fleet view in the activity bar: that alone must activate the extension.
  await phase('ready');
  let viaView = true;
  try {
    await waitFor('Fleet to activate from its view', () => ext.isActive, 60000);
  } catch {
    viaView = false;
  }
  check('the extension activates when its view opens (onView, a folder without .fleet/)', viaView);
  const api = viaView ? ext.exports : await ext.activate();
  const pid = await waitFor('the server process', () => api.serverPid(), 30000).catch(() => undefined);
  log({ serverPid: pid });
  check('the extension starts the server (fleet-lsp serve as a child of the extension host)', typeof pid === 'number', pid);

  // Room for the screenshots: no chat side bar, no welcome page.
  await vscode.commands.executeCommand('workbench.action.closeAuxiliaryBar').then(undefined, () => undefined);
  await vscode.commands.executeCommand('workbench.action.closeAllEditors').then(undefined, () => undefined);

  // 2. A Session and an attached file.
  const sessionId = `e2e-${Date.now().toString(36)}`;
  const info = await vscode.commands.executeCommand('fleet.ui.newSession', { sessionId, mode: 'rlm' });
  check('a Session is created', info && info.sessionId === sessionId && api.currentSession() === sessionId, JSON.stringify(info));
  log({ sessionId });
  const keys = await waitFor('fleet.hasSession', () => (api.contextKeys()['fleet.hasSession'] ? api.contextKeys() : undefined), 10000).catch(() => api.contextKeys());
  check('context keys: a Session is current, no Turn runs (fleet.hasSession, !fleet.turnRunning)', keys['fleet.hasSession'] === true && keys['fleet.turnRunning'] === false && keys['fleet.serverRunning'] === true, JSON.stringify(keys));
  const folder = vscode.workspace.workspaceFolders[0].uri;
  const attached = await vscode.commands.executeCommand('fleet.ui.attachFile', { uri: vscode.Uri.joinPath(folder, 'sales.csv').toString() });
  check('a file is attached', Array.isArray(attached) && attached.length === 1 && attached[0].path === 'files/sales.csv', JSON.stringify(attached));

  // 3. A Turn whose root spawns a child: the notification names the child's subtask.
  const turn1 = vscode.commands.executeCommand('fleet.ui.runTurn', { task: TASK });
  const shown = await waitFor('a progress message naming the child subtask', () => api.progressShown().find((p) => p.message.includes(SUBTASK)), 90000).catch(() => undefined);
  check('the Turn progress notification names the child agent subtask', shown, shown && shown.message);
  if (shown) {
    // The child sleeps 8 s: the tree, revealed by the extension (nothing here expands it), shows
    // the running Turn, its root agent and the child, with the notification's model calls.
    const running = await waitFor('the running Turn and its child in the tree', async () => {
      const lines = await api.treeSnapshot();
      const row = lines.find((l) => l.includes('#1 Calculate revenue') && l.includes('running'));
      return row && lines.some((l) => l.includes(SUBTASK) && l.includes('running')) ? { lines, row } : undefined;
    }, 20000).catch(() => undefined);
    const last = api.progressShown().filter((p) => p.message.includes(SUBTASK)).pop();
    const treeCalls = running && /(\d+\/\d+) model calls/.exec(running.row);
    const toastCalls = last && /(\d+\/\d+) model calls/.exec(last.message);
    check('while it runs, the tree shows Turn #1 running, its root agent and the child agent', running, running ? running.lines.join('\n') : (await api.treeSnapshot()).join('\n'));
    check("the tree's model calls match the notification's", treeCalls && toastCalls && treeCalls[1] === toastCalls[1], `tree ${running && running.row}; notification ${last && last.message}`);
    check('context keys while a Turn runs: fleet.turnRunning', api.contextKeys()['fleet.turnRunning'] === true, JSON.stringify(api.contextKeys()));
    await phase('progress', 60000).catch((e) => check('the driver saw the progress phase', false, e.message));
  }
  const result = await turn1;
  log({ turnId: result && result.turnId, traceId: result && result.traceId });
  check('the Turn completes with its artifact', result && result.status === 'completed' && result.artifacts.some((a) => a.path === 'artifacts/revenue_by_region.csv'), JSON.stringify(result && { status: result.status, error: result.error, artifacts: result.artifacts }));
  if (!result) return;

  // 4. The tree shows the Turn, its agents and its artifact.
  await api.revealTurn(sessionId, result.turnId);
  const tree = await waitFor('the tree to list the artifact', async () => {
    const lines = await api.treeSnapshot();
    return lines.some((l) => l.includes('revenue_by_region.csv')) && lines.some((l) => l.includes('Calculate revenue by region')) && lines.some((l) => l.includes(SUBTASK)) ? lines : undefined;
  }, 30000).catch(() => undefined);
  check('the tree shows the Turn, its child agent and its artifact', tree, tree ? tree.join('\n') : (await api.treeSnapshot()).join('\n'));
  await api.revealTurn(sessionId, result.turnId);
  await phase('tree', 60000).catch((e) => check('the driver saw the tree phase', false, e.message));

  // 5. The artifact opens as a read-only fleet: document with the right content.
  const artifact = result.artifacts.find((a) => a.path === 'artifacts/revenue_by_region.csv');
  await vscode.commands.executeCommand('fleet.ui.openArtifact', { uri: artifact.uri });
  const editor = await waitFor('the artifact editor', () => {
    const e = vscode.window.activeTextEditor;
    return e && e.document.uri.scheme === 'fleet' && e.document.uri.toString().includes('revenue_by_region.csv') ? e : undefined;
  }, 20000).catch(() => undefined);
  check('the artifact opens as a fleet: document with the right content', editor && editor.document.getText() === EXPECTED_CSV, editor ? JSON.stringify(editor.document.getText()) : 'no editor');
  if (editor) {
    // The driver clicks into the editor and types: a read-only document must not change.
    await phase('artifact', 60000).catch((e) => check('the driver saw the artifact phase', false, e.message));
    const text = editor.document.getText();
    const writable = vscode.workspace.fs.isWritableFileSystem('fleet');
    check('the fleet: document is read-only (typing into it changes nothing)', text === EXPECTED_CSV && !editor.document.isDirty && writable !== true, `text ${JSON.stringify(text)}; dirty ${editor.document.isDirty}; isWritableFileSystem ${writable}`);
  }
  await vscode.commands.executeCommand('fleet.ui.showAnswer', { sessionId, turnId: result.turnId });
  const tab = await waitFor('the rendered answer tab', () => {
    const t = vscode.window.tabGroups.activeTabGroup.activeTab;
    return t && t.label === 'Turn #1 — answer' ? t : undefined;
  }, 20000).catch(() => vscode.window.tabGroups.activeTabGroup.activeTab);
  const panel = api.panelsShown().filter((p) => p.title === 'Turn #1 — answer').pop();
  const html = panel ? panel.html : '';
  check(
    'the answer opens rendered (a webview) in a tab titled "Turn #1 — answer", linking the artifact and the trace',
    tab && tab.label === 'Turn #1 — answer' && tab.input instanceof vscode.TabInputWebview && /<h1[^>]*>Turn #1 · completed/.test(html) && html.includes('command:fleet.ui.openArtifact') && html.includes('revenue_by_region.csv') && html.includes('Open source') && !html.includes('```'),
    `tab ${tab && tab.label} (${tab && tab.input && tab.input.constructor.name}); html ${html.slice(0, 1500)}`,
  );
  await phase('answer', 60000).catch((e) => check('the driver saw the answer phase', false, e.message));

  // 5b. A Turn whose first cell fails: "completed with errors" in the toast and the tree.
  const partial = await vscode.commands.executeCommand('fleet.ui.runTurn', { task: FIRST_CELL_FAILS });
  const warned = await waitFor('the completed-with-errors toast', () => api.messagesShown().find((m) => m.includes('completed with errors')), 20000).catch(() => undefined);
  const errorsTree = await waitFor('the tree row of Turn #2', async () => {
    const lines = await api.treeSnapshot();
    return lines.some((l) => l.includes('#2 FIRSTFAILS') && l.includes('completed with errors')) ? lines : undefined;
  }, 20000).catch(() => undefined);
  check(
    'a Turn whose first cell failed is shown "completed with errors" (outcome partial) in the toast and the tree',
    partial && partial.status === 'completed' && partial.outcome && partial.outcome.kind === 'partial' && warned && /^Fleet: Turn #2 completed with errors/.test(warned) && errorsTree,
    `outcome ${JSON.stringify(partial && partial.outcome)}; toast ${warned}; tree:\n${(errorsTree || (await api.treeSnapshot())).join('\n')}`,
  );
  if (partial) {
    await api.revealTurn(sessionId, partial.turnId);
    await vscode.commands.executeCommand('fleet.ui.showAnswer', { sessionId, turnId: partial.turnId });
    const page2 = api.panelsShown().filter((p) => p.title === 'Turn #2 — answer').pop();
    check(
      'the answer of Turn #2 says "completed with errors" in its title and lists the reason',
      page2 && /<h1[^>]*>Turn #2 · completed with errors/.test(page2.html) && /Completed with errors<\/h2>/.test(page2.html) && page2.html.includes('sandbox cell failed'),
      page2 ? page2.html.slice(0, 1500) : 'no Turn #2 panel',
    );
  }
  await phase('errors', 60000).catch((e) => check('the driver saw the errors phase', false, e.message));

  // 6. Label Turn #1's trace through the multi-step input the driver answers in the browser
  // (status, answer, values, Back to the values, route, critical, expectations).
  const labelling = vscode.commands.executeCommand('fleet.ui.labelTrace', { traceId: result.traceId, turnId: result.turnId });
  await phase('label', 120000).catch((e) => check('the driver answered the label steps', false, e.message));
  const label = await Promise.race([labelling, sleep(90000).then(() => 'timeout')]);
  const summary = api.messagesShown().filter((m) => m.startsWith('Fleet: labelled')).pop();
  check(
    'the label flow stores what the driver typed and ends in a one-line summary',
    label && label.labels && label.labels.answer === GOLD && summary && /^Fleet: labelled Turn #1 approved — expected answer "e2e gold answer: North=150\.5", 1 value, route rlm/.test(summary) && !summary.includes('\n') && !summary.includes('{'),
    `result ${JSON.stringify(label)}; summary ${summary}`,
  );
  await phase('label-done', 60000).catch((e) => check('the driver saw the label summary', false, e.message));
  // the tree marks the labelled trace (fleet/trace/list's labelStatus), refreshed by the label
  await api.revealTurn(sessionId, result.turnId);
  const marked = await waitFor('the tree to mark Turn #1\'s trace as labelled', async () => {
    const lines = await api.treeSnapshot();
    return lines.some((line) => /^\s*trace \[labelled approved · /.test(line)) ? lines : undefined;
  }, 30000);
  check("the tree marks Turn #1's labelled trace ('labelled approved')", marked, (marked || (await api.treeSnapshot())).join('\n'));

  // 6b. Models: the root model through the command's object argument, the sub model from the
  // quick pick of the models the endpoint lists (the driver sees the list and picks one).
  const models = vscode.commands.executeCommand('fleet.ui.pickModels', { sessionId, root: ROOT_MODEL });
  await phase('models', 60000).catch((e) => check('the driver saw the models phase', false, e.message));
  const chosen = await Promise.race([models, sleep(30000).then(() => 'timeout')]);
  check('picking models stores the root from the argument and the sub from the quick pick', chosen && chosen.sessionId === sessionId && chosen.root === ROOT_MODEL && chosen.sub === SUB_MODEL, JSON.stringify(chosen));

  // 7. A second Turn, cancelled while it runs.
  const before = new Set(api.progressShown().map((p) => p.turnId));
  const turn2 = vscode.commands.executeCommand('fleet.ui.runTurn', { task: SLOW });
  const running = await waitFor('the slow Turn to report progress', () => api.progressShown().find((p) => p.turnId && !before.has(p.turnId)), 60000).catch(() => undefined);
  log({ cancelledTurnId: running && running.turnId });
  if (running) {
    await phase('palette-running', 60000).catch((e) => check('the driver saw the palette while a Turn runs', false, e.message));
    await vscode.commands.executeCommand('fleet.ui.cancelTurn', { turnId: running.turnId });
  }
  const second = await Promise.race([turn2, sleep(60000).then(() => 'timeout')]);
  const treeAfter = await waitFor('the tree to show the cancelled Turn', async () => {
    const lines = await api.treeSnapshot();
    return lines.some((l) => l.includes('SLOWTASK') && l.includes('cancelled')) ? lines : undefined;
  }, 20000).catch(() => undefined);
  check('cancelling a second Turn ends it cancelled', running && second === undefined && treeAfter, `result ${JSON.stringify(second)}; tree:\n${(treeAfter || (await api.treeSnapshot())).join('\n')}`);
  const idle = await waitFor('fleet.turnRunning to clear', () => (api.contextKeys()['fleet.turnRunning'] === false ? api.contextKeys() : undefined), 10000).catch(() => api.contextKeys());
  check('context keys after the Turn: !fleet.turnRunning', idle['fleet.turnRunning'] === false, JSON.stringify(idle));
  await phase('palette-idle', 60000).catch((e) => check('the driver saw the palette with no Turn running', false, e.message));

  // 8. Restart the server with Sessions stored: the view goes through its loading state and
  // never says "No Fleet Sessions yet." (the driver watches the sidebar meanwhile).
  await phase('restart', 30000).catch((e) => check('the driver watched the restart', false, e.message));
  const statesBefore = api.viewStates().length;
  await vscode.commands.executeCommand('fleet.ui.restartServer');
  const states = await waitFor('the view to list the Sessions again', () => {
    const after = api.viewStates().slice(statesBefore);
    return after.some((x) => /^ready:[1-9]/.test(x)) ? after : undefined;
  }, 60000).catch(() => api.viewStates().slice(statesBefore));
  check(
    'after a restart the view shows its loading state, then the Sessions (never the empty welcome)',
    states.includes('loading') && states.some((x) => /^ready:[1-9]/.test(x)) && !states.includes('ready:0') && states.indexOf('loading') < states.findIndex((x) => /^ready:/.test(x)),
    JSON.stringify(states),
  );
  await phase('restarted', 30000).catch((e) => check('the driver saw the end of the restart', false, e.message));
}


function deactivate() {}

module.exports = { activate, deactivate };
