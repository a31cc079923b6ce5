// Contract test: the real `fleet-lsp serve` over stdio, driven with vscode-languageserver-protocol
// (the library vscode-languageclient is built on) and the extension's own FleetApi, with the
// extension's exact initializationOptions and the capabilities VS Code + languageclient 11 declare.
// A scripted model (FLEET_TEST_SCRIPT) makes the Turns deterministic; their code runs for real.
import assert from 'node:assert/strict';
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import {
  CancellationTokenSource,
  ClientCapabilities,
  InitializeResult,
  ProtocolConnection,
  StreamMessageReader,
  StreamMessageWriter,
  WorkDoneProgress,
  createProtocolConnection,
} from 'vscode-languageserver-protocol/node';
import { FleetApi } from '../api';
import { SERVER_COMMAND_TITLES } from '../commands';
import { errorKind, formatError, isCancellation } from '../errors';
import { LiveTurns } from '../live';
import { formatTurnResult, progressMessage, splitValues } from '../progress';
import { CONTRACT_COMMANDS, FleetServerCapability, PROTOCOL_VERSION, TurnEvent, TurnProgressValue, initializationOptions } from '../protocol';
import { artifactUri, parseFleetUri } from '../uris';
import { turnView } from '../treeModel';
import { EXPECTED_CSV, FIRST_CELL_FAILS, SALES, SLOW, TASK, scenarioScript } from './scenario';

const REPO = resolve(__dirname, '..', '..', '..', '..');
const PACKAGE = JSON.parse(readFileSync(resolve(__dirname, '..', '..', 'package.json'), 'utf8'));
/** What VS Code 1.91+ with vscode-languageclient 11 declares, for the parts fleet-lsp looks at. */
const CAPABILITIES: ClientCapabilities = {
  workspace: {
    applyEdit: true,
    workspaceEdit: { documentChanges: true },
    didChangeConfiguration: { dynamicRegistration: true },
    executeCommand: { dynamicRegistration: true },
    configuration: true,
    workspaceFolders: true,
    textDocumentContent: { dynamicRegistration: true },
  } as ClientCapabilities['workspace'],
  window: {
    workDoneProgress: true,
    showMessage: { messageActionItem: { additionalPropertiesSupport: true } },
    showDocument: { support: true },
  },
  general: {
    positionEncodings: ['utf-16'],
    regularExpressions: { engine: 'ECMAScript', version: 'ES2020' },
    markdown: { parser: 'marked', version: '1.1.0' },
  },
  textDocument: { synchronization: { dynamicRegistration: true, didSave: true } },
};

function serverCommand(): string[] | undefined {
  if (process.env.FLEET_LSP_SERVER) {
    return JSON.parse(process.env.FLEET_LSP_SERVER) as string[];
  }
  const python = join(REPO, '.venv', 'bin', 'python');
  if (existsSync(python)) {
    return [python, '-m', 'fleet_lsp', 'serve'];
  }
  if (spawnSync('uv', ['--version']).status === 0) {
    return ['uv', 'run', '--project', REPO, 'fleet-lsp', 'serve'];
  }
  return undefined;
}

const command = serverCommand();
const skip =
  command === undefined && process.env.FLEET_REQUIRE_SERVER !== '1'
    ? 'no fleet-lsp server: run `uv sync` in the repository (or set FLEET_LSP_SERVER)'
    : false;

function waitFor<T>(predicate: () => T | undefined, timeoutMs = 60000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolvePromise, reject) => {
    const tick = () => {
      const value = predicate();
      if (value) {
        resolvePromise(value);
      } else if (Date.now() > deadline) {
        reject(new Error('timed out waiting'));
      } else {
        setTimeout(tick, 20);
      }
    };
    tick();
  });
}

async function rejection(promise: Promise<unknown>): Promise<{ code: number; message: string; data?: unknown }> {
  try {
    await promise;
  } catch (error) {
    return error as { code: number; message: string; data?: unknown };
  }
  assert.fail('the request succeeded');
}

describe('contract with the real fleet-lsp server', { skip }, () => {
  let dir: string;
  let proc: ChildProcess;
  let connection: ProtocolConnection;
  let init: InitializeResult;
  let api: FleetApi;
  let stderr = '';
  const created: (string | number)[] = [];
  const progress: { token: string | number; value: TurnProgressValue }[] = [];
  const events: TurnEvent[] = [];
  const logs: string[] = [];

  /** Progress on server-created tokens, as languageclient's ProgressPart would receive it. */
  function watch(token: string | number): void {
    connection.onProgress(WorkDoneProgress.type, token, (value) => {
      progress.push({ token, value: value as TurnProgressValue });
    });
  }

  before(async () => {
    if (!command) {
      throw new Error('FLEET_REQUIRE_SERVER=1 but no fleet-lsp server was found (run `uv sync`)');
    }
    dir = mkdtempSync(join(tmpdir(), 'fleet-vscode-'));
    writeFileSync(join(dir, 'sales.csv'), SALES);
    writeFileSync(join(dir, 'script.json'), JSON.stringify(scenarioScript()));
    proc = spawn(command[0], command.slice(1), {
      cwd: dir,
      env: {
        ...process.env,
        FLEET_STATE_DIR: join(dir, 'state'),
        FLEET_TEST_SCRIPT: join(dir, 'script.json'),
        UV_PYTHON_DOWNLOADS: 'never',
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    proc.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    connection = createProtocolConnection(new StreamMessageReader(proc.stdout!), new StreamMessageWriter(proc.stdin!));
    // The server -> client requests languageclient answers.
    connection.onRequest('window/workDoneProgress/create', (params: { token: string | number }) => {
      created.push(params.token);
      watch(params.token);
      return null;
    });
    connection.onRequest('client/registerCapability', () => null);
    connection.onRequest('workspace/configuration', (params: { items: unknown[] }) => params.items.map(() => null));
    connection.onRequest('window/showDocument', () => ({ success: true }));
    connection.onRequest('window/showMessageRequest', () => null);
    connection.onRequest('workspace/textDocumentContent/refresh', () => null);
    connection.onNotification('window/logMessage', (p: { message: string }) => {
      logs.push(p.message);
    });
    connection.onNotification('window/showMessage', (p: { message: string }) => {
      logs.push(p.message);
    });
    connection.onNotification('fleet/turn/didEmit', (e: TurnEvent) => {
      events.push(e);
    });
    connection.onNotification('fleet/session/didChange', () => undefined);
    connection.onNotification('fleet/artifact/didChange', () => undefined);
    connection.listen();
    api = new FleetApi(connection);
    init = await connection.sendRequest('initialize', {
      processId: process.pid,
      clientInfo: { name: 'Visual Studio Code', version: '1.91.0' },
      locale: 'en',
      rootUri: pathToFileURL(dir).href,
      workspaceFolders: [{ uri: pathToFileURL(dir).href, name: 'ws' }],
      capabilities: CAPABILITIES,
      initializationOptions: initializationOptions({ turnEvents: true, settings: {} }),
    });
    await connection.sendNotification('initialized', {});
  });

  after(async () => {
    try {
      await connection?.sendRequest('shutdown');
      await connection?.sendNotification('exit');
    } catch {
      // the server may be gone already
    }
    connection?.dispose();
    if (proc && proc.exitCode === null) {
      await new Promise((r) => setTimeout(r, 300));
      proc.kill();
    }
    if (dir) {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('initialize: fleet protocol 1, the fleet: content scheme (no fallback provider needed), every command', () => {
    assert.equal(init.serverInfo?.name, 'fleet-lsp', stderr);
    const fleet = (init.capabilities.experimental as { fleet: FleetServerCapability }).fleet;
    assert.equal(fleet.protocolVersion, PROTOCOL_VERSION);
    const workspace = init.capabilities.workspace as { textDocumentContent?: { schemes: string[] } };
    // vscode-languageclient >= 10 registers a TextDocumentContentProvider per advertised scheme.
    assert.deepEqual(workspace.textDocumentContent?.schemes, ['fleet']);
    const commands = init.capabilities.executeCommandProvider?.commands ?? [];
    for (const c of CONTRACT_COMMANDS) {
      assert.ok(commands.includes(c), `server does not list ${c}`);
    }
    const contributed = new Set((PACKAGE.contributes.commands as { command: string }[]).map((c) => c.command));
    for (const c of commands) {
      assert.ok(contributed.has(c), `package.json does not contribute the server command ${c}`);
      assert.ok(c in SERVER_COMMAND_TITLES, `src/protocol.ts does not know the server command ${c}`);
    }
  });

  it('sessions: new, list, and fleet.* commands with one object argument', async () => {
    const info = await api.newSession({ sessionId: 'vsc1' });
    assert.equal(info.sessionId, 'vsc1');
    assert.equal(info.turnCount, 0);
    const viaCommand = await api.executeCommand('fleet.newSession', { sessionId: 'vsc2', mode: 'rlm' });
    assert.deepEqual([viaCommand.sessionId, viaCommand.mode], ['vsc2', 'rlm']);
    const listed = await api.executeCommand('fleet.listSessions', {});
    assert.deepEqual(listed.sessions.map((s) => s.sessionId).sort(), ['vsc1', 'vsc2']);
    assert.deepEqual((await api.listSessions()).map((s) => s.sessionId).sort(), ['vsc1', 'vsc2']);
    const mode = await api.executeCommand('fleet.setMode', { sessionId: 'vsc2', mode: 'flex' });
    assert.equal(mode.mode, 'flex');
    const debug = await api.executeCommand('fleet.printDebugInformation', { sessionId: 'vsc1' });
    assert.equal(typeof debug, 'object');
  });

  it('context: attach a file:// URI and select it as the dataset', async () => {
    const attached = await api.attach('vsc1', pathToFileURL(join(dir, 'sales.csv')).href);
    assert.equal(attached.path, 'files/sales.csv');
    assert.equal(attached.sizeBytes, Buffer.byteLength(SALES));
    const dataset = await api.setDataset('vsc1', 'files/sales.csv', 'sales by region');
    assert.equal(dataset.path, 'files/sales.csv');
    const { files } = await api.workspace('vsc1');
    assert.deepEqual(files.map((f) => f.path), ['files/sales.csv']);
  });

  let traceId: string | undefined;
  let turnId: string | undefined;

  it('runTurn: progress on the client token, child agents on server-created tokens, turn events', async () => {
    const mine: TurnProgressValue[] = [];
    const messages: string[] = [];
    const result = await api.runTurn(
      { sessionId: 'vsc1', task: TASK },
      {
        workDoneToken: 'fleet-vscode-contract-1',
        onProgress: (value) => {
          mine.push(value);
          const m = progressMessage(value);
          if (m) {
            messages.push(m);
          }
        },
      },
    );
    assert.equal(result.status, 'completed', JSON.stringify(result.error ?? result) + stderr);
    assert.equal(result.route, 'rlm');
    assert.equal(result.answer, 'North=150.5; South=250.0');
    turnId = result.turnId;
    traceId = result.traceId ?? undefined;
    assert.equal(mine[0].kind, 'begin');
    assert.equal(mine[0].kind === 'begin' && mine[0].cancellable, true);
    assert.equal(mine[0].turnId, result.turnId);
    assert.ok(mine.some((v) => v.kind === 'report'));
    assert.deepEqual(mine[mine.length - 1], { ...mine[mine.length - 1], kind: 'end', message: 'completed' });
    assert.ok(messages.length >= 2);
    // child agents: `<token>/agent/<agentId>`, created by the server, ended before the Turn's end
    const child = created.find((t) => String(t).startsWith('fleet-vscode-contract-1/agent/'));
    assert.ok(child, `no child token among ${JSON.stringify(created)}`);
    const childValues = progress.filter((p) => p.token === child).map((p) => p.value);
    assert.equal(childValues[0].kind, 'begin');
    assert.equal(childValues[0].kind === 'begin' && childValues[0].parentAgentId, 'root');
    assert.equal(childValues[childValues.length - 1].kind, 'end');
    // turnEvents: true in initializationOptions -> fleet/turn/didEmit
    await waitFor(() => events.some((e) => e.turnId === result.turnId && e.kind === 'turn_completed'), 10000);
    const kinds = new Set(events.filter((e) => e.turnId === result.turnId).map((e) => e.kind));
    for (const k of ['turn_started', 'code_cell', 'child_spawned', 'child_finished', 'turn_completed'] as const) {
      assert.ok(kinds.has(k), `no ${k} event`);
    }
  });

  it('documents: the artifact the Turn wrote reads through workspace/textDocumentContent', async () => {
    const artifacts = await api.listArtifacts('vsc1');
    const artifact = artifacts.find((a) => a.path === 'artifacts/revenue_by_region.csv');
    assert.ok(artifact, JSON.stringify(artifacts));
    const uri = artifactUri('vsc1', 'revenue_by_region.csv');
    assert.equal(artifact.uri, uri);
    assert.equal(await api.documentContent(uri), EXPECTED_CSV);
    // the fleet:/// form VS Code may produce is accepted too, and the fallback request agrees
    assert.equal(await api.documentContent(uri.replace('fleet:/', 'fleet:///')), EXPECTED_CSV);
    const read = await api.readArtifact(uri);
    assert.equal(read.text, EXPECTED_CSV);
    assert.equal(read.sizeBytes, Buffer.byteLength(EXPECTED_CSV));
  });

  it('traces: show (fleet.showTrace) and label (fleet.labelTrace) the Turn', async () => {
    assert.ok(turnId);
    const trace = await api.trace(traceId ? { traceId } : { turnId });
    const parsed = parseFleetUri(trace.uri);
    assert.equal(parsed?.kind, 'trace');
    assert.equal(parsed?.sessionId, 'vsc1');
    const text = await api.documentContent(trace.uri);
    assert.match(text, /revenue/i);
    const viaCommand = await api.executeCommand('fleet.showTrace', { turnId });
    assert.equal(viaCommand.uri, trace.uri);
    const labelled = await api.labelTrace({
      traceId: trace.traceId,
      status: 'approved',
      answer: 'North=150.5; South=250.0',
      values: splitValues('150.5, 250.0'),
      route: 'rlm',
    });
    assert.equal(labelled.traceId, trace.traceId);
    assert.match(JSON.stringify(labelled.labels), /approved/);
    assert.match(JSON.stringify(labelled.labels), /150\.5/);
    const history = await api.history('vsc1');
    assert.equal(history.length, 1);
    assert.equal(history[0].status, 'completed');
    // what the tree shows for a Turn an earlier editor session ran
    assert.ok((history[0].durationSeconds ?? 0) > 0, JSON.stringify(history[0]));
    assert.deepEqual(history[0].artifactPaths, ['artifacts/revenue_by_region.csv']);
  });

  it('a Turn whose first cell fails: outcome partial, shown "completed with errors" in the notification and the tree', async () => {
    await api.newSession({ sessionId: 'vsc3' });
    const result = await api.runTurn({ sessionId: 'vsc3', task: FIRST_CELL_FAILS });
    assert.equal(result.status, 'completed', JSON.stringify(result.error ?? result) + stderr);
    assert.equal(result.answer, '42');
    assert.equal(result.outcome?.kind, 'partial', JSON.stringify(result.outcome));
    assert.deepEqual(result.outcome?.reasons.map((r) => [r.kind, r.count]), [['sandbox_errors', 1]]);
    assert.equal(formatTurnResult(result), `Turn ${result.turnId} completed with errors: 1 sandbox cell failed (rlm) — answer: 42`);
    // the tree row of a Turn this window heard end (the turn_completed event's payload)
    const ended = await waitFor(() => events.find((e) => e.turnId === result.turnId && e.kind === 'turn_completed'), 10000);
    const live = new LiveTurns();
    live.applyEvent(ended);
    const view = turnView(undefined, live.get(result.turnId));
    assert.match(view.description, /^completed with errors: 1 sandbox cell failed · rlm · /);
    assert.equal(view.icon, 'warning');
  });

  it('errors: codes, data.kind and the messages the extension shows', async () => {
    const bad = await rejection(api.loadSession('bad id!'));
    assert.equal(bad.code, -32602);
    assert.match(formatError(bad, 'Fleet: Load Session'), /^Fleet: Load Session: .*session/i);
    const missing = await rejection(api.loadSession('nosuch'));
    assert.equal(missing.code, -32050);
    assert.equal(errorKind(missing), 'SessionNotFound');
    assert.match(formatError(missing), /Fleet: New Session/);
    const noArgs = await rejection(api.executeCommandWith('fleet.attachFile', [{}]));
    assert.equal(noArgs.code, -32602);
    assert.match(formatError(noArgs), /sessionId/);
    const document = await rejection(api.documentContent('fleet:/sessions/vsc1/artifacts/none.csv'));
    assert.ok(document.code <= -32000, JSON.stringify(document));
  });

  it('cancel: the notification Cancel button ($/cancelRequest) ends the Turn with -32800', async () => {
    const cts = new CancellationTokenSource();
    const values: TurnProgressValue[] = [];
    const running = api.runTurn(
      { sessionId: 'vsc1', task: SLOW },
      { token: cts.token, workDoneToken: 'fleet-vscode-contract-2', onProgress: (v) => values.push(v) },
    );
    await waitFor(() => events.some((e) => e.kind === 'code_cell' && values.some((v) => v.kind === 'begin' && v.turnId === e.turnId)), 60000);
    cts.cancel();
    const error = await rejection(running);
    assert.equal(error.code, -32800);
    assert.ok(isCancellation(error));
    // the Turn is committed as cancelled and its token ended with "cancelled"
    let last: { task: string; status: string } | undefined;
    for (let i = 0; i < 200; i++) {
      const turns = await api.history('vsc1');
      last = turns[turns.length - 1];
      if (last?.status === 'cancelled') {
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(last?.task, SLOW);
    assert.equal(last?.status, 'cancelled');
  });
});
