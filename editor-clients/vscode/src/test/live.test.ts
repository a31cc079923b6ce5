import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { artifactsOfTurn, answerMarkdown, answerUri, escapeLinkText, parseAnswerUri } from '../answer';
import { ANY_ROUTE, BACK, LabelPrompts, PickItem, Step, collectLabel, parseExpectations } from '../labelling';
import { LiveTurns, childAgents, formatDuration, notificationMessage } from '../live';
import type { Artifact, TurnEvent, TurnResult } from '../protocol';
import { agentView, turnView } from '../treeModel';

let seq = 0;
/** An event as the server may send it (payloads partial on purpose: live state must not assume every field). */
function ev(kind: TurnEvent['kind'], payload: Record<string, unknown>, agentId = 'root', parentAgentId?: string): TurnEvent {
  return { turnId: 't1', sessionId: 's1', seq: ++seq, agentId, ...(parentAgentId ? { parentAgentId } : {}), kind, payload } as TurnEvent;
}

function result(status: TurnResult['status'], extra: Partial<TurnResult> = {}): TurnResult {
  return {
    turnId: 't1',
    sessionId: 's1',
    status,
    answer: 'North=150.5',
    route: 'rlm',
    artifacts: [{ uri: 'fleet:/sessions/s1/artifacts/out.csv', path: 'artifacts/out.csv', sizeBytes: 10, sha256: 'x' }],
    usage: { modelCalls: 3, sandboxErrors: 0, submitRejections: 0 },
    durationSeconds: 4.25,
    ...extra,
  };
}

describe('live Turn state', () => {
  it('builds the agent tree from child events and names each child subtask and state in the notification', () => {
    const live = new LiveTurns();
    live.applyEvent(ev('turn_started', { task: 'sum it', mode: 'rlm' }));
    live.applyEvent(ev('triage_decision', { route: 'rlm', mode: 'rlm', summary: 'x' }));
    live.applyEvent(ev('budget_update', { used: 2, max: 40, category: 'generation' }));
    live.applyEvent(ev('child_spawned', { depth: 1, subtask: 'REGION=North check' }, 'agent-a', 'root'));
    live.applyEvent(ev('child_spawned', { depth: 2, subtask: 'grandchild work' }, 'agent-b', 'agent-a'));
    live.applyEvent(ev('code_cell', { cell: 1, phase: 'task', code: 'x' }, 'agent-a', 'root'));
    const turn = live.get('t1')!;
    assert.deepEqual(childAgents(turn, 'root').map((a) => a.agentId), ['agent-a']);
    assert.deepEqual(childAgents(turn, 'agent-a').map((a) => a.agentId), ['agent-b']);
    let message = notificationMessage(turn);
    assert.match(message, /route rlm · 2\/40 model calls/);
    assert.match(message, /↳ REGION=North check \(running, cell 1\)/);
    live.applyProgress('t1', 's1', { kind: 'report', message: 'route rlm · running cell 1 · 3/40 model calls', agentId: 'root' });
    live.applyEvent(ev('child_finished', { status: 'failed', error: 'boom' }, 'agent-a', 'root'));
    message = notificationMessage(live.get('t1')!);
    // the model calls are this window's event count (the tree's), not the report text's
    assert.ok(message.startsWith('route rlm · running cell 1 · 2/40 model calls — '), message);
    assert.equal(message.match(/model calls/g)?.length, 1); // said once
    assert.match(message, /REGION=North check \(failed\)/);
  });

  it('ends every agent with the Turn and keeps the result, route, artifacts and duration', () => {
    const live = new LiveTurns();
    live.applyEvent(ev('child_spawned', { depth: 1, subtask: 'c' }, 'agent-a', 'root'));
    live.applyEvent(ev('turn_cancelled', result('cancelled') as unknown as Record<string, unknown>));
    const turn = live.get('t1')!;
    assert.equal(turn.status, 'cancelled');
    assert.equal(turn.agents.get('agent-a')!.state, 'cancelled');
    assert.equal(turn.agents.get('root')!.state, 'cancelled');
    assert.equal(turn.durationSeconds, 4.25);
    assert.deepEqual([...turn.artifacts], ['artifacts/out.csv']);
    assert.equal(formatDuration(4.25), '4.3 s');
    assert.equal(formatDuration(125), '2 min 5 s');
  });

  it('is bounded: only the newest Turns are kept', () => {
    const live = new LiveTurns(2);
    for (const id of ['a', 'b', 'c']) {
      live.applyResult({ ...result('completed'), turnId: id });
    }
    assert.deepEqual(live.all().map((t) => t.turnId), ['b', 'c']);
  });

  it('describes Turns and agents for the tree: status, route, duration', () => {
    const live = new LiveTurns();
    live.applyResult(result('completed'));
    const view = turnView({ turnId: 't1', seq: 3, status: 'completed', task: 'sum it', createdAt: 'now' }, live.get('t1'));
    assert.equal(view.label, '#3 sum it');
    assert.equal(view.description, 'completed · rlm · 4.3 s');
    assert.equal(view.icon, 'pass');
    // a Turn this window never saw running: its stored summary's duration
    const stored = turnView({ turnId: 't0', seq: 1, status: 'failed', task: 'old', createdAt: 'now', route: 'flex', durationSeconds: 75 }, undefined);
    assert.equal(stored.description, 'failed · flex · 1 min 15 s');
    assert.equal(turnView({ turnId: 't0', seq: 1, status: 'running', task: 'old', createdAt: 'now' }, undefined).description, 'running');
    assert.deepEqual(agentView({ agentId: 'agent-a', subtask: 'check', state: 'running', step: 'cell 2' }), {
      label: 'check',
      description: 'agent-a · running · cell 2',
      icon: 'sync~spin',
    });
  });
});

describe('a Turn that completed with errors', () => {
  it('shows "completed with errors" and its reasons in the tree row (warning icon) and the answer document', () => {
    const live = new LiveTurns();
    const outcome = { kind: 'partial' as const, reasons: [{ kind: 'sandbox_errors' as const, count: 2, detail: '2 sandbox cells failed' }] };
    live.applyEvent(ev('turn_completed', { ...result('completed'), outcome } as unknown as Record<string, unknown>));
    const view = turnView({ turnId: 't1', seq: 2, status: 'completed', task: 'sum it', createdAt: 'now' }, live.get('t1'));
    assert.equal(view.description, 'completed with errors: 2 sandbox cells failed · rlm · 4.3 s');
    assert.equal(view.icon, 'warning');
    assert.equal(view.shown, 'completed with errors');
    assert.match(view.tooltip, /\ncompleted with errors: 2 sandbox cells failed$/);
    // a stored summary has no outcome (a Turn an earlier editor session ran): shown as before
    assert.equal(turnView({ turnId: 't1', seq: 2, status: 'completed', task: 'sum it', createdAt: 'now' }, undefined).icon, 'pass');
    const text = answerMarkdown({
      sessionId: 's1',
      turn: { turnId: 't1', seq: 2, status: 'completed', task: 'sum it', answer: '42', route: 'rlm' },
      artifacts: [],
      outcome: { kind: 'failed', reasons: [{ kind: 'error_answer', count: 1, detail: 'the answer is an error message: [x](http://evil) ```' }] },
    });
    assert.match(text, /^# Turn #2 · completed with errors · rlm\n/);
    assert.match(text, /## Completed with errors\n\n````text\nthe answer is an error message: \[x\]\(http:\/\/evil\) ```\n````/);
  });

  it('shows a history Turn this window never saw end from its stored summary outcome (partial)', () => {
    const summary = {
      turnId: 't0', seq: 1, status: 'completed' as const, task: 'sum it', createdAt: 'now', route: 'rlm', durationSeconds: 2.1,
      outcome: { kind: 'partial' as const, reasons: [
        { kind: 'sandbox_errors' as const, count: 1, detail: '1 sandbox cell failed' },
        { kind: 'child_failed' as const, count: 1, detail: '1 child agent failed' },
      ] },
    };
    const view = turnView(summary, undefined);
    assert.equal(view.description, 'completed with errors: 1 sandbox cell failed; 1 child agent failed · rlm · 2.1 s');
    assert.equal(view.shown, 'completed with errors');
    assert.equal(view.icon, 'warning');
    assert.match(view.tooltip, /\ncompleted with errors: 1 sandbox cell failed; 1 child agent failed$/);
    // a clean stored outcome: as before
    assert.equal(turnView({ ...summary, outcome: { kind: 'submitted', reasons: [] } }, undefined).description, 'completed · rlm · 2.1 s');
  });
});

describe('answer documents', () => {
  it('round-trips fleet-answer: URIs', () => {
    const uri = answerUri('s 1', 't/2');
    assert.equal(uri, 'fleet-answer:/sessions/s%201/turns/t%2F2.md');
    assert.deepEqual(parseAnswerUri(uri), { sessionId: 's 1', turnId: 't/2' });
    assert.equal(parseAnswerUri('fleet:/sessions/s/turns/t.md'), undefined);
  });

  it('links the Turn artifacts and trace; task and answer stay text (fenced), link labels escaped', () => {
    const artifacts: Artifact[] = [{ uri: 'fleet:/sessions/s1/artifacts/a%5Bb%5D.csv', path: 'artifacts/a[b].csv', sizeBytes: 5, sha256: 'x' }];
    const text = answerMarkdown({
      sessionId: 's1',
      turn: { turnId: 't1', seq: 1, status: 'completed', task: 'say [hi](http://evil)', answer: '```\n# not a heading', route: 'rlm', traceId: 'tr-1' },
      artifacts,
    });
    assert.match(text, /- \[a\\\[b\\\]\.csv\]\(fleet:\/sessions\/s1\/artifacts\/a%5Bb%5D\.csv\) \(5 bytes\)/);
    assert.match(text, /\(fleet:\/sessions\/s1\/traces\/tr-1\.md\)/);
    assert.match(text, /````text\n```\n# not a heading\n````/);
    assert.match(text, /```text\nsay \[hi\]\(http:\/\/evil\)\n```/);
    assert.equal(escapeLinkText('a_b*c'), 'a\\_b\\*c');
  });

  it("finds a Turn's artifacts from its result and from provenance", () => {
    const listed: Artifact[] = [
      { uri: 'u1', path: 'artifacts/root.csv', sizeBytes: 2, sha256: 'new' },
      { uri: 'u2', path: 'artifacts/North.txt', sizeBytes: 3, sha256: 'y', provenance: [{ turnId: 't1' }] },
      { uri: 'u3', path: 'artifacts/other.txt', sizeBytes: 4, sha256: 'z', provenance: [{ turnId: 't0' }] },
    ];
    const fromResult: Artifact[] = [{ uri: 'u1', path: 'artifacts/root.csv', sizeBytes: 1, sha256: 'old' }];
    const found = artifactsOfTurn(listed, 't1', fromResult);
    assert.deepEqual(found.map((a) => [a.path, a.sizeBytes]), [['artifacts/root.csv', 2], ['artifacts/North.txt', 3]]);
  });

  it("finds an earlier editor session's Turn's artifacts from its stored artifactPaths", () => {
    const listed: Artifact[] = [
      { uri: 'u1', path: 'artifacts/root.csv', sizeBytes: 2, sha256: 'a' },
      { uri: 'u3', path: 'artifacts/other.txt', sizeBytes: 4, sha256: 'z' },
    ];
    // no result seen in this window; one named path was deleted since (nothing to open)
    const found = artifactsOfTurn(listed, 't1', [], ['artifacts/root.csv', 'artifacts/gone.csv']);
    assert.deepEqual(found.map((a) => [a.path, a.uri, a.sizeBytes]), [['artifacts/root.csv', 'u1', 2]]);
    assert.deepEqual(artifactsOfTurn(listed, 't1'), []);
  });
});

function scripted(answers: unknown[]): LabelPrompts & { asked: string[]; steps: string[]; values: (string | undefined)[] } {
  const asked: string[] = [];
  const steps: string[] = [];
  const values: (string | undefined)[] = [];
  const next = () => answers.shift();
  return {
    asked,
    steps,
    values,
    async pick<T>(title: string, items: PickItem<T>[], step: Step) {
      asked.push(`${title} [${items.map((i) => i.label).join('|')}]`);
      steps.push(`${step.step}/${step.totalSteps}`);
      return next() as T | undefined;
    },
    async input(title: string, options: { value?: string }, step: Step) {
      asked.push(title);
      steps.push(`${step.step}/${step.totalSteps}`);
      values.push(options.value);
      return next() as string | undefined;
    },
    async expectations(title: string, step: Step) {
      asked.push(title);
      steps.push(`${step.step}/${step.totalSteps}`);
      return next() as Record<string, unknown> | null | undefined;
    },
  };
}

describe('labelling', () => {
  it('asks status, answer, values, route, critical and expectations as numbered steps, and builds the params', async () => {
    const prompts = scripted(['approved', 'North=150.5', '150.5, 250', 'rlm', true, { schema_version: 1 }]);
    const params = await collectLabel('tr-1', prompts, { answer: 'North=150.5', route: 'rlm', name: 'Turn #2' });
    assert.deepEqual(params, {
      traceId: 'tr-1',
      status: 'approved',
      answer: 'North=150.5',
      values: ['150.5', '250'],
      route: 'rlm',
      critical: true,
      expectations: { schema_version: 1 },
    });
    assert.equal(prompts.asked.length, 6);
    assert.match(prompts.asked[0], /^Fleet: label Turn #2: status \[approved\|benchmark\|synthetic\|rejected\]/);
    assert.deepEqual(prompts.steps, ['1/5', '2/5', '3/5', '4/6', '5/6', '6/6']);
  });

  it('skips the critical question without values, leaves out empty fields, and stops when the user gives up', async () => {
    const prompts = scripted(['rejected', '', '', ANY_ROUTE, null]);
    assert.deepEqual(await collectLabel('tr-1', prompts), { traceId: 'tr-1', status: 'rejected' });
    assert.ok(!prompts.asked.some((q) => q.includes('hard requirements')));
    assert.deepEqual(prompts.steps, ['1/5', '2/5', '3/5', '4/5', '5/5']);
    assert.equal(await collectLabel('tr-1', scripted(['approved', undefined])), undefined);
  });

  it("pre-fills the expected answer with the model's answer, but not for a rejected label", async () => {
    const approved = scripted(['approved', undefined]);
    await collectLabel('tr-1', approved, { answer: 'North=150.5' });
    assert.deepEqual(approved.values, ['North=150.5']);
    const rejected = scripted(['rejected', undefined]);
    await collectLabel('tr-1', rejected, { answer: 'North=150.5' });
    assert.deepEqual(rejected.values, ['']);
  });

  it('Back goes one step back and keeps what was typed', async () => {
    // status, answer, values, then Back from the route to the values (shown again), then on
    const prompts = scripted(['approved', 'gold', '1, 2', BACK, '1', 'rlm', false, null]);
    const params = await collectLabel('tr-1', prompts, { answer: 'model' });
    assert.deepEqual(params, { traceId: 'tr-1', status: 'approved', answer: 'gold', values: ['1'], route: 'rlm' });
    assert.deepEqual(prompts.steps, ['1/5', '2/5', '3/5', '4/6', '3/6', '4/6', '5/6', '6/6']);
    assert.deepEqual(prompts.values, ['model', '', '1, 2']);
  });

  it('parses expectations files and names what is wrong', () => {
    assert.deepEqual(parseExpectations('e.json', '{"schema_version": 1}'), { schema_version: 1 });
    assert.throws(() => parseExpectations('e.json', '[1]'), /e\.json must hold a JSON object/);
    assert.throws(() => parseExpectations('e.json', '{'), /e\.json is not JSON/);
  });
});
