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

  // 2. A Session and an attached file.
  const sessionId = `e2e-${Date.now().toString(36)}`;
  const info = await vscode.commands.executeCommand('fleet.ui.newSession', { sessionId, mode: 'rlm' });
  check('a Session is created', info && info.sessionId === sessionId && api.currentSession() === sessionId, JSON.stringify(info));
  log({ sessionId });
  const folder = vscode.workspace.workspaceFolders[0].uri;
  const attached = await vscode.commands.executeCommand('fleet.ui.attachFile', { uri: vscode.Uri.joinPath(folder, 'sales.csv').toString() });
  check('a file is attached', Array.isArray(attached) && attached.length === 1 && attached[0].path === 'files/sales.csv', JSON.stringify(attached));

  // 3. A Turn whose root spawns a child: the notification names the child's subtask.
  const turn1 = vscode.commands.executeCommand('fleet.ui.runTurn', { task: TASK });
  const shown = await waitFor('a progress message naming the child subtask', () => api.progressShown().find((p) => p.message.includes(SUBTASK)), 90000).catch(() => undefined);
  check('the Turn progress notification names the child agent subtask', shown, shown && shown.message);
  if (shown) await phase('progress', 60000).catch((e) => check('the driver saw the progress phase', false, e.message));
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
  const answerUri = await vscode.commands.executeCommand('fleet.ui.showAnswer', { sessionId, turnId: result.turnId });
  const answerDoc = vscode.window.activeTextEditor && vscode.window.activeTextEditor.document;
  check('the answer opens as a markdown document linking the artifact and the trace', answerUri && answerDoc && answerDoc.languageId === 'markdown' && answerDoc.getText().includes(artifact.uri) && answerDoc.getText().includes('/traces/'), answerDoc ? answerDoc.getText().slice(0, 600) : answerUri);

  // 6. Label the trace (checked by the driver through the CLI).
  const label = await vscode.commands.executeCommand('fleet.ui.labelTrace', {
    traceId: result.traceId,
    status: 'approved',
    answer: 'e2e gold answer: North=150.5',
    values: ['150.5'],
    route: 'rlm',
  });
  check('labelling the trace answers with the stored labels', label && label.labels && label.labels.answer === 'e2e gold answer: North=150.5', JSON.stringify(label));

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
    await sleep(1000);
    await vscode.commands.executeCommand('fleet.ui.cancelTurn', { turnId: running.turnId });
  }
  const second = await Promise.race([turn2, sleep(60000).then(() => 'timeout')]);
  const treeAfter = await waitFor('the tree to show the cancelled Turn', async () => {
    const lines = await api.treeSnapshot();
    return lines.some((l) => l.includes('SLOWTASK') && l.includes('cancelled')) ? lines : undefined;
  }, 20000).catch(() => undefined);
  check('cancelling a second Turn ends it cancelled', running && second === undefined && treeAfter, `result ${JSON.stringify(second)}; tree:\n${(treeAfter || (await api.treeSnapshot())).join('\n')}`);
}

function deactivate() {}

module.exports = { activate, deactivate };
