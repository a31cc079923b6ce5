import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { errorDocument, errorKind, formatError, isCancellation } from '../errors';

describe('errors', () => {
  it('shows the server message with what failed and a next step for known kinds', () => {
    const error = { code: -32050, message: "No Session 'nope'.", data: { kind: 'SessionNotFound', sessionId: 'nope' } };
    assert.equal(errorKind(error), 'SessionNotFound');
    assert.equal(
      formatError(error, 'Fleet: Load Session'),
      "Fleet: Load Session: No Session 'nope'. Run 'Fleet: New Session' or 'Fleet: Load Session…'.",
    );
  });

  it('derives the kind from the code when data has none', () => {
    assert.equal(errorKind({ code: -32051, message: 'busy' }), 'TurnBusy');
    assert.match(formatError({ code: -32051, message: 'busy' }), /Cancel Turn/);
    assert.equal(errorKind({ code: -32602, message: 'bad' }), 'InvalidParams');
    assert.equal(errorKind({ code: -32099, message: 'x', data: { kind: 'Weird' } }), 'Weird');
    assert.equal(errorKind(new Error('x')), undefined);
  });

  it('treats -32800 and VS Code cancellation errors as cancellation', () => {
    assert.equal(isCancellation({ code: -32800, message: 'Request cancelled' }), true);
    const canceled = new Error('Canceled');
    canceled.name = 'Canceled';
    assert.equal(isCancellation(canceled), true);
    assert.equal(isCancellation(new Error('boom')), false);
    assert.equal(formatError({ code: -32800, message: 'x' }, 'Turn'), 'Turn: cancelled');
  });

  it('formats plain errors and values', () => {
    assert.equal(formatError(new Error('spawn fleet-lsp ENOENT'), 'start'), 'start: spawn fleet-lsp ENOENT');
    assert.equal(formatError('text'), 'text');
    assert.equal(formatError({ code: -32099, message: '  ' }), 'error -32099');
  });

  it('renders an unreadable document as markdown with the kind', () => {
    const text = errorDocument('fleet:/sessions/s/artifacts/x', { code: -32060, message: 'No such file', data: { kind: 'WorkspaceFileNotFound' } });
    assert.match(text, /^# Cannot open fleet:\/sessions\/s\/artifacts\/x/);
    assert.match(text, /No such file/);
    assert.match(text, /\(WorkspaceFileNotFound\)/);
  });
});
