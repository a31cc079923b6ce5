import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { UI_COMMANDS } from '../commands';
import { FILTERS, sessionFilterParams } from '../filters';
import { LiveTurns, notificationMessage } from '../live';
import { formatTurnResult } from '../progress';
import { MODES } from '../protocol';
import { commandLink, linkFleetDocuments, pageHtml } from '../rendered';
import { LABEL_ICONS, labelStatuses, traceDescription, turnView } from '../treeModel';
import { answerPrefill, answerTitle, labelSummary, modeItems, plural, stderrLevel, turnName } from '../words';

const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8'));

describe('words', () => {
  it('says 1 Turn, 2 Turns and names Turns "#n" everywhere', () => {
    assert.equal(plural(1, 'Turn'), '1 Turn');
    assert.equal(plural(0, 'Turn'), '0 Turns');
    assert.equal(plural(2, 'child agent'), '2 child agents');
    assert.equal(turnName(3, 'abc'), 'Turn #3');
    assert.equal(turnName(undefined, 'abc'), 'Turn abc');
    assert.equal(answerTitle(1, 'abc'), 'Turn #1 — answer');
    const result = { turnId: 't1', sessionId: 's1', status: 'completed', answer: '42', route: 'rlm', artifacts: [] } as never;
    assert.equal(formatTurnResult(result, 4), 'Turn #4 completed (rlm): 42');
  });

  it('describes every mode and marks the default and the current one', () => {
    const items = modeItems(MODES);
    assert.deepEqual(items.map((i) => i.label), ['hybrid', 'rlm', 'flex']);
    assert.ok(items.every((i) => i.detail && i.detail.length > 10));
    assert.equal(items[0].description, '(default)');
    const current = modeItems(MODES, 'rlm');
    assert.equal(current[0].label, 'rlm');
    assert.equal(current[0].description, '(current)');
    assert.equal(current.find((i) => i.label === 'hybrid')?.description, '(default)');
  });

  it("logs the server's stderr at each line's level, continuation lines at the previous one", () => {
    assert.equal(stderrLevel('2026-12-04 10:00:00,123 INFO fleet_lsp.server: started', undefined), 'info');
    assert.equal(stderrLevel('2026-12-04 10:00:00,123 WARNING fleet_core.engine: fell back', 'info'), 'warn');
    assert.equal(stderrLevel('2026-12-04 10:00:00,123 ERROR fleet_lsp.server: boom', 'info'), 'error');
    assert.equal(stderrLevel('  File "x.py", line 1', 'error'), 'error');
    assert.equal(stderrLevel('Traceback (most recent call last):', 'info'), 'error');
    assert.equal(stderrLevel('some library line', undefined), 'info');
    assert.equal(stderrLevel('2026-12-04 10:00:00,123 DEBUG x: y', 'error'), 'debug');
    assert.equal(stderrLevel('2026/12/04 15:39:51 WARNING mlflow.store: slow', 'info'), 'warn'); // MLflow's own format
  });

  it('pre-fills the expected answer except for a rejected label, and ends in a one-line summary', () => {
    assert.equal(answerPrefill('approved', 'North=150.5'), 'North=150.5');
    assert.equal(answerPrefill('rejected', 'North=150.5'), '');
    const line = labelSummary('Turn #1', { traceId: 'tr', status: 'approved', answer: 'gold', values: ['150.5'], route: 'rlm' }, { eligible: false, ineligibleReason: 'not replay-captured' });
    assert.equal(line, 'Fleet: labelled Turn #1 approved — expected answer "gold", 1 value, route rlm; not optimization data: not replay-captured');
    assert.ok(!line.includes('\n') && !line.includes('{'));
  });
});

describe('the tree and the notification count the same model calls', () => {
  it('shows the live count from the events in both, never the older report text', () => {
    const live = new LiveTurns();
    live.applyProgress('t1', 's1', { kind: 'report', message: 'route rlm · running cell 1 · 3/150 model calls', turnId: 't1' });
    live.applyEvent({ turnId: 't1', sessionId: 's1', seq: 2, agentId: 'root', kind: 'budget_update', payload: { used: 17, max: 150 }, version: 1 } as never);
    const turn = live.get('t1')!;
    const message = notificationMessage(turn);
    assert.equal(message, 'route rlm · running cell 1 · 17/150 model calls');
    assert.match(turnView(undefined, turn).description, /17\/150 model calls/);
    live.applyEvent({ turnId: 't1', sessionId: 's1', seq: 3, agentId: 'root', kind: 'tool_call_start', payload: { call_id: 'c', tool: 'spawn_agents', source: 'dspy' }, version: 1 } as never);
    assert.equal(live.get('t1')!.agents.get('root')!.step, 'starting child agents'); // not spawn_agents
  });
});

describe('labelled traces are marked in the tree', () => {
  it('keeps the review status of labelled traces only', () => {
    const refs = [
      { traceId: 'tr-a', labelStatus: 'approved' },
      { traceId: 'tr-b' },
      { traceId: 'tr-c', labelStatus: 'rejected' },
    ];
    assert.deepEqual([...labelStatuses(refs)], [['tr-a', 'approved'], ['tr-c', 'rejected']]);
  });
  it('puts the label before the id, and leaves an unlabelled trace as it was', () => {
    assert.equal(traceDescription('tr-a', 'approved'), 'labelled approved · tr-a');
    assert.equal(traceDescription(undefined, 'rejected'), 'labelled rejected');
    assert.equal(traceDescription('tr-b', undefined), 'tr-b');
  });
  it('has an icon for every review status the protocol defines', () => {
    for (const status of ['approved', 'benchmark', 'synthetic', 'rejected']) {
      assert.ok(LABEL_ICONS[status], status);
    }
  });
});

describe('rendered documents', () => {
  it('turns fleet: links into command links and escapes the title', () => {
    const html = linkFleetDocuments('<a href="fleet:/sessions/s/artifacts/a.csv">a.csv</a>');
    assert.match(html, /href="command:fleet\.ui\.openArtifact\?/);
    assert.ok(decodeURIComponent(html).includes('"uri":"fleet:/sessions/s/artifacts/a.csv"'));
    const page = pageHtml({ title: 'Turn #1 — <b>', body: '<h1>x</h1>', sourceLink: commandLink('fleet.ui.showAnswer', { source: true }), nonce: 'n1' });
    assert.match(page, /<title>Turn #1 — &lt;b&gt;<\/title>/);
    assert.match(page, /default-src 'none'/);
    assert.ok(!/<script/i.test(page));
  });
});

describe('session filters', () => {
  it('maps All / This machine / Mine / last 7 days to fleet/session/list params', () => {
    const me = { host: 'h1', user: 'u1' };
    const now = new Date('2026-12-08T00:00:00Z');
    assert.deepEqual(FILTERS.map((f) => sessionFilterParams(f, me, now)), [
      {},
      { ownerHost: 'h1' },
      { ownerHost: 'h1', ownerUser: 'u1' },
      { updatedSince: '2026-12-01T00:00:00.000Z' },
    ]);
  });
});

describe('palette and menu hygiene', () => {
  const palette = pkg.contributes.menus.commandPalette as { command: string; when: string }[];
  const whenOf = (id: string) => palette.find((m) => m.command === id)?.when;

  it('hides commands by context: Cancel Turn only while a Turn runs, Session commands only with a Session', () => {
    assert.equal(whenOf(UI_COMMANDS.cancelTurn.id), 'fleet.turnRunning');
    for (const name of ['closeSession', 'setDataset', 'clearDataset', 'showAnswer', 'showTrace', 'labelTrace', 'openArtifact'] as const) {
      assert.match(whenOf(UI_COMMANDS[name].id) ?? '', /fleet\.hasSession/, name);
    }
    const keys = new Set<string>();
    for (const menu of Object.values(pkg.contributes.menus) as { when?: string }[][]) {
      for (const m of menu) for (const k of (m.when ?? '').match(/\bfleet\.[a-z]+[A-Z]\w*/g) ?? []) keys.add(k);
    }
    for (const w of pkg.contributes.viewsWelcome as { when?: string }[]) for (const k of (w.when ?? '').match(/\bfleet\.[a-z]+[A-Z]\w*/g) ?? []) keys.add(k);
    const set = readFileSync(join(__dirname, '..', '..', 'src', 'extension.ts'), 'utf8') + readFileSync(join(__dirname, '..', '..', 'src', 'features', 'tree.ts'), 'utf8');
    assert.deepEqual([...keys].sort(), ['fleet.hasSession', 'fleet.serverRunning', 'fleet.turnRunning', 'fleet.viewState']);
    for (const key of keys) {
      assert.ok(set.includes(`'${key}'`), `${key} is used in package.json but never set`);
    }
  });

  it('names the Explorer item for Fleet, drops "…" from items that act at once, and has no literal backticks in the welcome', () => {
    const explorer = pkg.contributes.menus['explorer/context'] as { command: string }[];
    const title = (id: string) => (pkg.contributes.commands as { command: string; title: string }[]).find((c) => c.command === id)?.title;
    assert.equal(title(explorer[0].command), 'Attach to Fleet Session');
    assert.equal(title(UI_COMMANDS.showAnswer.id), 'Show Answer');
    assert.equal(title(UI_COMMANDS.openArtifact.id), 'Open Artifact');
    for (const w of pkg.contributes.viewsWelcome as { contents: string; when: string }[]) {
      assert.ok(!w.contents.includes('`'), w.contents);
      assert.ok(w.when, 'every welcome has a when clause (never shown while loading)');
    }
  });
});
