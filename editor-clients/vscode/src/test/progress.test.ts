import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatTurnEvent, formatTurnResult, formatUsage, newWorkDoneToken, progressMessage, shownStatus, splitValues, truncate, turnTitle, visible } from '../progress';
import type { TurnEvent, TurnResult } from '../protocol';

/** An event as the server may send it: tests feed partial payloads on purpose (the formatter must
 * not assume every field). */
function event(fields: Omit<TurnEvent, 'payload' | 'kind'> & { kind: TurnEvent['kind']; payload: Record<string, unknown> }): TurnEvent {
  return fields as TurnEvent;
}

const result: TurnResult = {
  turnId: 't1',
  sessionId: 's1',
  status: 'completed',
  answer: 'north 10\nsouth 20',
  route: 'rlm',
  artifacts: [{ uri: 'fleet:/sessions/s1/artifacts/a.csv', path: 'artifacts/a.csv', sizeBytes: 3, sha256: 'x' }],
  traceId: 'tr1',
  usage: { modelCalls: 2, sandboxErrors: 0, submitRejections: 0, inputTokens: 10, outputTokens: 5 },
};

describe('progress', () => {
  it('shows controls and bidi overrides in names instead of acting on them', () => {
    assert.equal(visible('invoice\u202etxt.exe'), 'invoice<U+202E>txt.exe');
    assert.equal(visible('x\u001b[31m\u009b2J\u2066'), 'x\\x1b[31m\\x9b2J<U+2066>');
    assert.equal(visible('a\tb\nc'), 'a\tb\nc');
    assert.equal(truncate('files/a\u202eb.csv', 40), 'files/a<U+202E>b.csv');
  });
  it('truncates and titles', () => {
    assert.equal(truncate('a  b\nc', 10), 'a b c');
    assert.equal(truncate('abcdefghij', 5), 'abcd…');
    assert.equal(turnTitle('x'.repeat(100)).length, 'Fleet: '.length + 60);
    assert.equal(newWorkDoneToken(() => 'u'), 'fleet-vscode-u');
    assert.deepEqual(splitValues(' 150.5, ,north ,'), ['150.5', 'north']);
  });

  it('turns progress values into notification messages', () => {
    assert.equal(progressMessage({ kind: 'begin', title: 'Turn 1: go' }), 'Turn 1: go');
    assert.equal(progressMessage({ kind: 'begin', title: 'Turn 1', message: 'triage' }), 'Turn 1: triage');
    assert.equal(progressMessage({ kind: 'report', message: 'route rlm · 1 cell' }), 'route rlm · 1 cell');
    assert.equal(progressMessage({ kind: 'report' }), undefined);
    assert.equal(progressMessage({ kind: 'end', message: 'cancelled' }), 'Turn cancelled');
  });

  it('summarises Turn results and usage', () => {
    assert.equal(formatTurnResult(result), 'Turn t1 completed (rlm): north 10 south 20 [1 artifact]');
    assert.equal(
      formatTurnResult({ ...result, status: 'failed', error: { kind: 'SandboxError', message: 'boom' }, artifacts: [] }),
      'Turn t1 failed (rlm): boom',
    );
    assert.equal(formatTurnResult({ ...result, status: 'cancelled', answer: '', artifacts: [] }), 'Turn t1 cancelled (rlm)');
    assert.equal(formatUsage(result), '2 model calls, 0 sandbox errors, 10 in / 5 out tokens');
  });

  it('says "completed with errors" with the reasons for a completed Turn whose outcome is not submitted', () => {
    const partial: TurnResult = {
      ...result,
      answer: '42',
      artifacts: [],
      outcome: { kind: 'partial', reasons: [{ kind: 'sandbox_errors', count: 2, detail: '2 sandbox cells failed' }, { kind: 'child_failed', count: 1, detail: '1 child agent failed' }] },
    };
    assert.equal(formatTurnResult(partial), 'Turn t1 completed with errors: 2 sandbox cells failed; 1 child agent failed (rlm) — answer: 42');
    // failed on a completed Turn: the answer is the program's own error message; its text is the model's
    const failed: TurnResult = {
      ...partial,
      answer: "Column 'diameter' does not exist",
      outcome: { kind: 'failed', reasons: [{ kind: 'error_answer', count: 1, detail: "the answer is an error message: Column 'diameter'\u202e\u001b[2J does not exist" }] },
    };
    assert.equal(
      formatTurnResult(failed),
      "Turn t1 completed with errors: the answer is an error message: Column 'diameter'<U+202E>\\x1b[2J does not exist (rlm) — answer: Column 'diameter' does not exist",
    );
    assert.deepEqual(shownStatus('completed', { kind: 'extracted', reasons: [] }), { text: 'completed with errors', withErrors: true, reasons: 'extracted', details: [] });
    // clean, missing (a result stored before outcomes) and a failed Turn: as before
    assert.equal(formatTurnResult({ ...result, outcome: { kind: 'submitted', reasons: [] } }), 'Turn t1 completed (rlm): north 10 south 20 [1 artifact]');
    assert.equal(formatTurnResult({ ...result, outcome: undefined }), 'Turn t1 completed (rlm): north 10 south 20 [1 artifact]');
    assert.equal(
      formatTurnResult({ ...result, status: 'failed', error: { kind: 'EngineError', message: 'boom' }, outcome: { kind: 'failed', reasons: [{ kind: 'turn_failed', count: 1, detail: 'boom' }] } }),
      'Turn t1 failed (rlm): boom',
    );
  });

  it('formats Turn events for the output channel, child agents with their parent', () => {
    assert.equal(
      formatTurnEvent(event({ turnId: 't1', sessionId: 's1', seq: 3, agentId: 'root', kind: 'triage_decision', payload: { route: 'rlm' } })),
      '[t1 #  3] root triage_decision: route rlm',
    );
    assert.equal(
      formatTurnEvent(event({ turnId: 't1', sessionId: 's1', seq: 12, agentId: 'a1', parentAgentId: 'root', kind: 'code_cell', payload: { code: 'print(1)\nprint(2)' } })),
      '[t1 # 12] a1 (of root) code_cell: print(1) print(2)',
    );
    assert.equal(formatTurnEvent(event({ turnId: 't1', sessionId: 's1', seq: 1, agentId: 'root', kind: 'lm_start', payload: {} })), '[t1 #  1] root lm_start');
     assert.equal(
      formatTurnEvent(event({ turnId: 't1', sessionId: 's1', seq: 4, agentId: 'agent-2', parentAgentId: 'root', kind: 'child_spawned', payload: { depth: 1, subtask: 'REGION=North check' } })),
      '[t1 #  4] agent-2 (of root) child_spawned: REGION=North check',
    );
    assert.equal(
      formatTurnEvent(event({ turnId: 't1', sessionId: 's1', seq: 9, agentId: 'agent-2', parentAgentId: 'root', kind: 'child_finished', payload: { status: 'failed', error: 'boom' } })),
      '[t1 #  9] agent-2 (of root) child_finished: failed: boom',
    );
    assert.equal(
      formatTurnEvent(event({ turnId: 't1', sessionId: 's1', seq: 7, agentId: 'root', kind: 'cell_output', payload: { cell: 1, phase: 'task', ok: false, outcome: 'error', duration_ms: 3, error: 'ZeroDivisionError: x', error_type: 'ZeroDivisionError' } })),
      '[t1 #  7] root cell_output: ZeroDivisionError: x',
    );
    assert.equal(
      formatTurnEvent(event({ turnId: 't1', sessionId: 's1', seq: 20, agentId: 'root', kind: 'turn_failed', payload: { status: 'failed', error: { kind: 'EngineError', message: 'The Turn failed' } } })),
      '[t1 # 20] root turn_failed: The Turn failed',
    );
  });
});
