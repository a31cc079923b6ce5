// The real-VS-Code end-to-end test (.ci/vscode-e2e runs it with Node 24): code-server (VS Code
// 1.139.1) on 127.0.0.1 with a fresh profile, the Fleet .vsix and the test-only companion
// extension installed, a workspace without .fleet/, driven by Debian's headless chromium through
// puppeteer-core. The companion runs the scenario inside VS Code and writes its checks; this
// driver clicks the Fleet view, checks what the browser shows (the progress notification, the
// tree, the models quick pick, which it answers), keeps screenshots, serves a stub
// OpenAI-compatible GET /v1/models, checks the label, the Session's models and the cancelled Turn
// through the CLI, stops code-server and checks that no fleet-lsp process is left. Ends with
// "N passed, N failed".
//
// usage: node run.mjs <fleet.vsix> <companion.vsix>
// env: FLEET_E2E_CODE_SERVER, FLEET_E2E_DRIVER_MODULES (puppeteer-core), FLEET_E2E_RUN_DIR
import { spawn, spawnSync } from 'node:child_process';
import http from 'node:http';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
// compiled by the .vsix build (npm run compile) before this driver runs
import { SALES, SUBTASK, scenarioScript } from '../out/test/scenario.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..', '..');
const [vsix, companionVsix] = process.argv.slice(2);
const CODE_SERVER = process.env.FLEET_E2E_CODE_SERVER;
const require = createRequire(path.join(process.env.FLEET_E2E_DRIVER_MODULES, 'noop.js'));
const puppeteer = require('puppeteer-core');
const RUN = process.env.FLEET_E2E_RUN_DIR ?? path.join(REPO, '.cache', 'vscode-e2e', 'run');
const RUN_ID = `fleet-e2e-${process.pid}-${Date.now()}`;
// The stub OpenAI-compatible endpoint's models (GET /v1/models) and the test key it expects.
const ROOT_MODEL = 'e2e-root-large';
const SUB_MODEL = 'e2e-sub-small';
const LM_KEY = 'sk-e2e-models-0123456789abcdef';
const FLEET_LSP = path.join(REPO, '.venv', 'bin', 'fleet-lsp');
const started = Date.now();

const checks = [];
function record(check, ok, detail) {
  checks.push({ check, ok: Boolean(ok), detail });
  console.log(`${ok ? 'PASS' : 'FAIL'} ${check}${!ok && detail ? `\n     ${String(detail).split('\n').join('\n     ')}` : ''}`);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(fn, timeoutMs, everyMs = 250) {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const value = await fn().catch(() => undefined);
    if (value) return value;
    await sleep(everyMs);
  }
  return undefined;
}
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;

// ---- the scripted model (FLEET_TEST_SCRIPT): src/test/scenario.ts, the contract test's too; its
// child sleeps 8 s, long enough for the driver to see and photograph the progress notification ----
const SCRIPT = scenarioScript(8);

/** A tiny OpenAI-compatible endpoint on 127.0.0.1: GET /v1/models lists two models; it records
 * whether each request carried the configured key. */
async function modelsEndpoint() {
  const requests = [];
  const server = http.createServer((req, res) => {
    requests.push({ path: req.url, authorized: req.headers.authorization === `Bearer ${LM_KEY}` });
    if (req.method === 'GET' && req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: SUB_MODEL, object: 'model', owned_by: 'e2e' }, { id: ROOT_MODEL, object: 'model', owned_by: 'e2e' }] }));
    } else {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":"not found"}');
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  server.unref(); // never what keeps the driver alive
  return { server, requests, base: `http://127.0.0.1:${server.address().port}/v1` };
}

function fleetLspProcesses() {
  const found = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const environ = fs.readFileSync(`/proc/${entry}/environ`, 'utf8');
      if (!environ.includes(`FLEET_E2E_RUN=${RUN_ID}`)) continue;
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ');
      const state = fs.readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.[0];
      if (/fleet-lsp|fleet_lsp/.test(cmdline) && state !== 'Z') found.push(`${entry}: ${cmdline.trim()}`);
    } catch {
      // gone meanwhile, or not ours
    }
  }
  return found;
}

/** The text of the quick input (title, steps, value, list) in the browser. */
async function quickInput(page) {
  return page.evaluate(() => {
    const w = document.querySelector('.quick-input-widget');
    if (!w || w.style.display === 'none') return undefined;
    return {
      title: w.querySelector('.quick-input-title')?.innerText ?? '',
      value: w.querySelector('.quick-input-box input')?.value ?? '',
      list: w.querySelector('.quick-input-list')?.innerText ?? '',
    };
  });
}

/** Whether the Command Palette lists a command: open it, type the query, read the list, close it. */
async function paletteLists(page, query, label, shot) {
  await page.keyboard.press('Escape');
  await page.keyboard.press('F1');
  const open = await waitFor(async () => (await quickInput(page))?.value?.startsWith('>'), 10000, 100);
  if (!open) return undefined;
  await page.keyboard.type(query);
  await sleep(800);
  const state = await quickInput(page);
  if (shot) await page.screenshot({ path: shot });
  await page.keyboard.press('Escape');
  return Boolean(state && state.list.split('\n').some((line) => line.includes(label)));
}

/** Answer the label flow like a user: status, answer, values, Back (to the values, kept), route,
 * critical, expectations; each step's title shows "(n/total)". */
async function driveLabel(page, shots) {
  const step = (marker) => waitFor(async () => {
    const q = await quickInput(page);
    return q && q.title.includes('label Turn #1') && q.title.includes(marker) ? q : undefined;
  }, 20000, 150);
  const s1 = await step('(1/5)');
  await page.screenshot({ path: path.join(shots, 'label-step1.png') });
  record('the label flow opens as step 1/5 titled for Turn #1, listing the statuses', s1 && /approved/.test(s1.list) && /rejected/.test(s1.list), JSON.stringify(s1));
  if (!s1) return;
  await page.keyboard.type('approved');
  await sleep(200);
  await page.keyboard.press('Enter');
  const s2 = await step('(2/5)');
  record("step 2/5 (expected answer) is pre-filled with the model's answer for an approved label", s2 && s2.value.includes('North=150.5'), JSON.stringify(s2));
  if (!s2) return;
  await page.keyboard.down('Control');
  await page.keyboard.press('KeyA');
  await page.keyboard.up('Control');
  await page.keyboard.type('e2e gold answer: North=150.5');
  await page.keyboard.press('Enter');
  if (!(await step('(3/5)'))) return record('step 3/5 (values) follows', false, JSON.stringify(await quickInput(page)));
  await page.keyboard.type('150.5');
  await page.keyboard.press('Enter');
  const s4 = await step('(4/6)');
  await page.screenshot({ path: path.join(shots, 'label-step4.png') });
  if (!s4) return record('step 4/6 (route) follows', false, JSON.stringify(await quickInput(page)));
  // Back: the title bar's back button
  const clicked = await page.evaluate(() => {
    const back = document.querySelector('.quick-input-widget .codicon-quick-input-back, .quick-input-widget .codicon-arrow-left');
    const target = back?.closest('a, .action-label, .action-item') ?? back;
    if (!target) return false;
    target.dispatchEvent(new MouseEvent('mousedown', { bubbles: true }));
    target.click();
    return true;
  });
  const back = await step('(3/6)');
  record('Back returns to step 3 (values) with what was typed kept', clicked && back && back.value === '150.5', `clicked ${clicked}; ${JSON.stringify(back)}`);
  await page.keyboard.press('Enter');
  if (!(await step('(4/6)'))) return;
  await page.keyboard.type('rlm');
  await sleep(200);
  await page.keyboard.press('Enter');
  if (!(await step('(5/6)'))) return record('step 5/6 (critical) follows', false, JSON.stringify(await quickInput(page)));
  await page.keyboard.press('Enter');
  if (!(await step('(6/6)'))) return record('step 6/6 (expectations) follows', false, JSON.stringify(await quickInput(page)));
  await page.keyboard.press('Enter');
}

async function main() {
  fs.rmSync(RUN, { recursive: true, force: true });
  const out = path.join(RUN, 'out');
  const shots = path.join(RUN, 'screenshots');
  const workspace = path.join(RUN, 'workspace');
  for (const dir of [out, shots, path.join(workspace, '.vscode')]) fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(workspace, 'sales.csv'), SALES);
  fs.writeFileSync(
    path.join(workspace, '.vscode', 'settings.json'),
    JSON.stringify({ 'fleet.serverCommand': [FLEET_LSP, 'serve'], 'fleet.trace.server': 'messages', 'fleet.turnEvents': true }, null, 2),
  );
  const scriptPath = path.join(RUN, 'script.json');
  fs.writeFileSync(scriptPath, JSON.stringify(SCRIPT));
  const endpoint = await modelsEndpoint();
  const userData = path.join(RUN, 'user-data');
  const extensions = path.join(RUN, 'extensions');
  const env = {
    ...process.env,
    FLEET_STATE_DIR: path.join(RUN, 'state'),
    FLEET_TEST_SCRIPT: scriptPath,
    FLEET_E2E_OUT: out,
    FLEET_E2E_RUN: RUN_ID,
    // Models come from the stub endpoint; the Turns stay scripted (FLEET_TEST_SCRIPT).
    FLEET_LM_API_BASE: endpoint.base,
    FLEET_LM_API_KEY: LM_KEY,
    // Loopback only: the gallery points at a dead port.
    // code-server's own config and logs stay in the run folder, not in $HOME.
    XDG_CONFIG_HOME: path.join(RUN, 'xdg-config'),
    XDG_DATA_HOME: path.join(RUN, 'xdg-data'),
    EXTENSIONS_GALLERY: JSON.stringify({ serviceUrl: 'http://127.0.0.1:9/gallery', itemUrl: 'http://127.0.0.1:9/item' }),
  };
  delete env.FLEET_DATABASE_URL; // the run's own SQLite under FLEET_STATE_DIR
  for (const ext of [vsix, companionVsix]) {
    const r = spawnSync(CODE_SERVER, ['--config', path.join(RUN, 'code-server.yaml'), '--user-data-dir', userData, '--extensions-dir', extensions, '--install-extension', ext], { env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`installing ${ext} failed:\n${r.stdout}\n${r.stderr}`);
  }
  const port = await freePort();
  const log = fs.openSync(path.join(RUN, 'code-server.log'), 'w');
  const codeServer = spawn(
    CODE_SERVER,
    ['--bind-addr', `127.0.0.1:${port}`, '--auth', 'none', '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust',
      '--config', path.join(RUN, 'code-server.yaml'), '--user-data-dir', userData, '--extensions-dir', extensions, workspace],
    { env, detached: true, stdio: ['ignore', log, log] },
  );
  let exited = false;
  codeServer.on('exit', () => (exited = true));
  let browser;
  try {
    const healthy = await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok, 60000, 500);
    if (!healthy) throw new Error('code-server did not answer /healthz within 60 s');
    console.log(`code-server on 127.0.0.1:${port} (${elapsed()})`);
    browser = await puppeteer.launch({
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--proxy-server=http://127.0.0.1:9', '--proxy-bypass-list=127.0.0.1;localhost', '--window-size=1400,900'],
      defaultViewport: { width: 1400, height: 900 },
    });
    const page = await browser.newPage();
    await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(workspace)}`, { waitUntil: 'domcontentloaded' });
    const workbench = await waitFor(async () => page.$('.monaco-workbench .part.activitybar'), 90000, 500);
    record('the VS Code workbench loads in headless chromium', workbench, 'no .monaco-workbench');
    const ready = await waitFor(async () => fs.existsSync(path.join(out, 'phase-ready')), 90000, 500);
    record('the companion extension runs', ready, 'no phase-ready file');
    // Open the Fleet view from the activity bar: this must activate the extension.
    const clicked = await waitFor(
      () =>
        page.evaluate(() => {
          const items = [...document.querySelectorAll('.part.activitybar .action-item a, .part.activitybar .action-item')];
          const item = items.find((el) => (el.getAttribute('aria-label') || '').startsWith('Fleet'));
          if (!item) return false;
          item.dispatchEvent(new MouseEvent('mousedown', { bubbles: true }));
          item.click();
          return true;
        }),
      30000,
      500,
    );
    record('the activity bar has a Fleet view', clicked, 'no activity bar item labelled Fleet');
    fs.writeFileSync(path.join(out, 'ack-ready'), '');

    const phases = { progress: false, tree: false, artifact: false, models: false };
    let restartWatch = { texts: [], timer: undefined };
    const seen = await waitFor(async () => {
      if (!phases.progress && fs.existsSync(path.join(out, 'phase-progress'))) {
        phases.progress = true;
        const text = await waitFor(
          () => page.evaluate((s) => {
            const t = document.querySelector('.notifications-toasts')?.innerText ?? '';
            return t.includes(s) ? t : '';
          }, SUBTASK),
          20000,
          200,
        );
        // The tree (revealed by the extension) shows the running Turn and its child, with the
        // same model calls as the notification.
        const both = await waitFor(
          () => page.evaluate((s) => {
            const side = document.querySelector('.part.sidebar')?.innerText ?? '';
            const toast = document.querySelector('.notifications-toasts')?.innerText ?? '';
            const a = /(\d+\/\d+) model calls/.exec(side);
            const b = /(\d+\/\d+) model calls/.exec(toast);
            return side.includes(s) && side.includes('#1 Calculate revenue') && a && b && a[1] === b[1] ? `${a[1]} in both` : '';
          }, SUBTASK),
          10000,
          200,
        );
        await page.screenshot({ path: path.join(shots, 'progress.png') });
        record("the browser shows the Turn's progress notification naming the child's subtask", text, 'no toast with the subtask');
        record('the browser shows the running Turn #1 and its child in the tree, with the notification\'s model calls', both, await page.evaluate(() => document.querySelector('.part.sidebar')?.innerText ?? '').catch(() => ''));
        fs.writeFileSync(path.join(out, 'ack-progress'), '');
      }
      if (!phases.tree && fs.existsSync(path.join(out, 'phase-tree'))) {
        phases.tree = true;
        const text = await waitFor(
          () => page.evaluate(() => {
            const t = document.querySelector('.part.sidebar')?.innerText ?? '';
            return t.includes('revenue_by_region.csv') && t.includes('Calculate revenue') ? t : '';
          }),
          20000,
          300,
        );
        await page.screenshot({ path: path.join(shots, 'tree.png') });
        record('the browser shows the Fleet tree with the Turn and its artifact', text, 'the sidebar does not list them');
        fs.writeFileSync(path.join(out, 'ack-tree'), '');
      }
      if (!phases.artifact && fs.existsSync(path.join(out, 'phase-artifact'))) {
        phases.artifact = true;
        // Type into the open artifact like a user would; the companion checks nothing changed.
        const lines = await page.$('.editor-group-container.active .monaco-editor .view-lines');
        if (lines) {
          await lines.click();
          await page.keyboard.type('TAMPERED');
          await sleep(500);
        }
        const refused = await page.evaluate(() => document.querySelector('.monaco-editor-overlaymessage')?.innerText ?? '');
        await page.screenshot({ path: path.join(shots, 'artifact.png') });
        record('typing into the artifact editor is refused in the browser', lines && /read-?only/i.test(refused), `editor found: ${Boolean(lines)}; message: ${refused}`);
        fs.writeFileSync(path.join(out, 'ack-artifact'), '');
      }
      if (!phases.models && fs.existsSync(path.join(out, 'phase-models'))) {
        phases.models = true;
        // The sub model's quick pick lists what the endpoint lists; pick one like a user would.
        const text = await waitFor(
          () => page.evaluate((a, b) => {
            const t = document.querySelector('.quick-input-widget')?.innerText ?? '';
            return t.includes(a) && t.includes(b) ? t : '';
          }, ROOT_MODEL, SUB_MODEL),
          20000,
          200,
        );
        await page.screenshot({ path: path.join(shots, 'models.png') });
        record("the browser shows a quick pick of the endpoint's models", text, 'no quick pick listing both models');
        if (text) {
          await page.keyboard.type(SUB_MODEL);
          await sleep(300);
          await page.keyboard.press('Enter');
        }
        fs.writeFileSync(path.join(out, 'ack-models'), '');
      }
      if (!phases.answer && fs.existsSync(path.join(out, 'phase-answer'))) {
        phases.answer = true;
        const tabLabel = await waitFor(
          () => page.evaluate(() => {
            const t = document.querySelector('.editor-group-container.active .tab.active')?.innerText ?? '';
            return t.includes('Turn #1 — answer') ? t : '';
          }),
          20000,
          200,
        );
        // The webview's own document (an iframe inside an iframe): rendered headings, no fences.
        const rendered = await waitFor(async () => {
          for (const frame of page.frames()) {
            const text = await frame.evaluate(() => (document.body?.innerText ?? '')).catch(() => '');
            const h2 = await frame.evaluate(() => document.querySelectorAll('h2').length).catch(() => 0);
            if (text.includes('Open source') && text.includes('Answer') && h2 >= 3 && !text.includes('```') && !text.includes('## ')) return text;
          }
          return '';
        }, 20000, 300);
        await page.screenshot({ path: path.join(shots, 'answer.png') });
        record('the browser shows the answer rendered (headings, no markdown source) in a tab titled "Turn #1 — answer"', tabLabel && rendered, `tab ${tabLabel}; rendered ${String(rendered).slice(0, 300)}`);
        fs.writeFileSync(path.join(out, 'ack-answer'), '');
      }
      if (!phases.errors && fs.existsSync(path.join(out, 'phase-errors'))) {
        phases.errors = true;
        const seen = await waitFor(
          () => page.evaluate(() => {
            const side = document.querySelector('.part.sidebar')?.innerText ?? '';
            const toasts = document.querySelector('.notifications-toasts')?.innerText ?? '';
            return side.includes('completed with errors') && toasts.includes('completed with errors') ? `${side}\n---\n${toasts}` : '';
          }),
          20000,
          300,
        );
        await page.screenshot({ path: path.join(shots, 'errors.png') });
        record('the browser shows Turn #2 "completed with errors" in the tree and in a toast', seen, 'not in both the sidebar and a toast');
        fs.writeFileSync(path.join(out, 'ack-errors'), '');
      }
      if (!phases.label && fs.existsSync(path.join(out, 'phase-label'))) {
        phases.label = true;
        await driveLabel(page, shots);
        fs.writeFileSync(path.join(out, 'ack-label'), '');
      }
      if (!phases.labelDone && fs.existsSync(path.join(out, 'phase-label-done'))) {
        phases.labelDone = true;
        const toast = await waitFor(
          () => page.evaluate(() => {
            const t = document.querySelector('.notifications-toasts')?.innerText ?? '';
            return t.includes('labelled Turn #1 approved') ? t : '';
          }),
          15000,
          200,
        );
        await page.screenshot({ path: path.join(shots, 'label-summary.png') });
        record('the browser shows the label summary in one toast line', toast, 'no toast "labelled Turn #1 approved"');
        fs.writeFileSync(path.join(out, 'ack-label-done'), '');
      }
      for (const [name, wanted] of [['palette-running', true], ['palette-idle', false]]) {
        if (!phases[name] && fs.existsSync(path.join(out, `phase-${name}`))) {
          phases[name] = true;
          const listed = await paletteLists(page, 'Fleet: Cancel Turn', 'Cancel Turn', path.join(shots, `${name}.png`));
          const runListed = wanted ? undefined : await paletteLists(page, 'Fleet: Run Turn', 'Run Turn');
          record(
            wanted ? 'the palette offers "Fleet: Cancel Turn" while a Turn runs' : 'the palette hides "Fleet: Cancel Turn" when no Turn runs (and offers "Fleet: Run Turn…")',
            wanted ? listed === true : listed === false && runListed === true,
            `Cancel Turn listed: ${listed}; Run Turn listed: ${runListed}`,
          );
          fs.writeFileSync(path.join(out, `ack-${name}`), '');
        }
      }
      if (!phases.restart && fs.existsSync(path.join(out, 'phase-restart'))) {
        phases.restart = true;
        restartWatch = { texts: [], timer: setInterval(() => {
          page.evaluate(() => document.querySelector('.part.sidebar')?.innerText ?? '').then((t) => restartWatch.texts.push(t), () => undefined);
        }, 100) };
        fs.writeFileSync(path.join(out, 'ack-restart'), '');
      }
      if (!phases.restarted && phases.restart && fs.existsSync(path.join(out, 'phase-restarted'))) {
        phases.restarted = true;
        clearInterval(restartWatch.timer);
        await sleep(300);
        const empty = restartWatch.texts.filter((t) => t.includes('No Fleet Sessions yet'));
        await page.screenshot({ path: path.join(shots, 'restarted.png') });
        record(
          'while the server restarts, the browser never shows "No Fleet Sessions yet." (Sessions are stored)',
          restartWatch.texts.length > 0 && empty.length === 0,
          `${restartWatch.texts.length} samples, ${empty.length} with the empty welcome`,
        );
        fs.writeFileSync(path.join(out, 'ack-restarted'), '');
      }
      const lines = fs.existsSync(path.join(out, 'checks.jsonl')) ? fs.readFileSync(path.join(out, 'checks.jsonl'), 'utf8') : '';
      return lines.includes('"done":true');
    }, 8 * 60000, 300);
    await page.screenshot({ path: path.join(shots, 'final.png') });
    if (!seen) record('the scenario finishes within 8 minutes', false, 'no done line from the companion');
    clearInterval(restartWatch.timer);
  } finally {
    await browser?.close().catch(() => undefined);
  }

  // The companion's checks.
  const reported = fs.existsSync(path.join(out, 'checks.jsonl'))
    ? fs.readFileSync(path.join(out, 'checks.jsonl'), 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l))
    : [];
  const facts = Object.assign({}, ...reported.filter((r) => !r.check));
  for (const r of reported.filter((r) => r.check)) record(r.check, r.ok, r.detail);

  // Stop code-server (its main process only) and check that the language server went with it.
  const before = fleetLspProcesses();
  record('fleet-lsp ran for this run while code-server ran', before.length > 0 || facts.serverPid, 'no fleet-lsp process carried this run id');
  process.kill(codeServer.pid, 'SIGTERM');
  await waitFor(async () => exited, 20000, 200);
  const left = await waitFor(async () => fleetLspProcesses().length === 0, 20000, 250);
  record('stopping code-server leaves no fleet-lsp process', exited && left, `code-server exited: ${exited}; left: ${fleetLspProcesses().join('; ')}`);
  try {
    process.kill(-codeServer.pid, 'SIGKILL'); // whatever else of this run's group is left
  } catch {
    // the group is gone
  }

  // The label and the cancelled Turn, read back through the CLI from the same state.
  const cli = (...args) => spawnSync(FLEET_LSP, args, { env: { ...process.env, FLEET_STATE_DIR: path.join(RUN, 'state'), FLEET_DATABASE_URL: '' }, encoding: 'utf8', timeout: 120000 });
  if (facts.traceId) {
    const r = cli('trace', 'show', facts.traceId, '--raw');
    record('the label is stored (fleet-lsp trace show lists it)', r.status === 0 && r.stdout.includes('e2e gold answer') && /approved/.test(r.stdout), `exit ${r.status}\n${r.stderr.slice(-800)}\n${r.stdout.slice(-800)}`);
  } else {
    record('the label is stored (fleet-lsp trace show lists it)', false, 'no trace id reported');
  }
  record('the models list came from the stub endpoint, with the key as a bearer token', endpoint.requests.some((r) => r.path === '/v1/models' && r.authorized), JSON.stringify(endpoint.requests));
  endpoint.server.close();
  if (facts.sessionId) {
    const r = cli('config', 'show', '--session', facts.sessionId, '--json');
    let settings = {};
    try {
      settings = JSON.parse(r.stdout).settings ?? {};
    } catch {
      // reported below
    }
    const root = settings['llm.root.model'];
    const sub = settings['llm.sub.model'];
    record(
      "the Session's models are stored (fleet-lsp config show --session)",
      r.status === 0 && root?.value === ROOT_MODEL && root?.source === 'session' && sub?.value === SUB_MODEL && sub?.source === 'session',
      `exit ${r.status}\n${r.stderr.slice(-800)}\nllm.root.model ${JSON.stringify(root)}; llm.sub.model ${JSON.stringify(sub)}`,
    );
  } else {
    record("the Session's models are stored (fleet-lsp config show --session)", false, 'no Session id reported');
  }
  if (facts.cancelledTurnId) {
    const r = cli('trace', 'show', facts.cancelledTurnId, '--raw');
    record('the second Turn is stored as cancelled (fleet-lsp trace show)', r.status === 0 && /cancelled/.test(r.stdout), `exit ${r.status}\n${r.stderr.slice(-800)}\n${r.stdout.slice(-400)}`);
  } else {
    record('the second Turn is stored as cancelled (fleet-lsp trace show)', false, 'no cancelled Turn id reported');
  }
}

main()
  .catch((error) => record('the end-to-end run', false, error?.stack ?? error))
  .finally(() => {
    const passed = checks.filter((c) => c.ok).length;
    const failed = checks.length - passed;
    console.log(`screenshots and logs: ${RUN} (${elapsed()})`);
    console.log(`${passed} passed, ${failed} failed`);
    process.exitCode = failed === 0 && passed > 0 ? 0 : 1;
  });
