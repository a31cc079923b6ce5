import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CancellationTokenSource, WorkDoneProgress } from 'vscode-languageserver-protocol';
import type { ProgressType } from 'vscode-languageserver-protocol';
import { FleetApi, Rpc } from '../api';
import type { TurnProgressValue } from '../protocol';

class FakeRpc implements Rpc {
  calls: unknown[][] = [];
  handlers = new Map<string | number, (value: unknown) => void>();
  disposed: (string | number)[] = [];
  constructor(private readonly answer: (method: string, params: any) => unknown) {}
  sendRequest<R>(...args: unknown[]): Promise<R> {
    this.calls.push(args);
    return Promise.resolve(this.answer(args[0] as string, args[1]) as R);
  }
  onProgress<P>(type: ProgressType<P>, token: string | number, handler: (value: P) => void) {
    assert.equal(type, WorkDoneProgress.type);
    this.handlers.set(token, handler as (value: unknown) => void);
    return { dispose: () => this.disposed.push(token) };
  }
}

describe('FleetApi', () => {
  it('never passes an undefined cancellation token (vscode-jsonrpc would send array params)', async () => {
    const rpc = new FakeRpc(() => ({ sessions: [] }));
    await new FleetApi(rpc).listSessions();
    assert.deepEqual(rpc.calls, [['fleet/session/list', {}]]);
  });

  it('runs a Turn on a client-created token, forwards its progress, then unsubscribes', async () => {
    const seen: TurnProgressValue[] = [];
    let rpc: FakeRpc;
    rpc = new FakeRpc((method, params) => {
      assert.equal(method, 'fleet/turn/run');
      const handler = rpc.handlers.get(params.workDoneToken);
      handler?.({ kind: 'begin', title: 'Turn 1', turnId: 't1' });
      handler?.({ kind: 'end', message: 'completed', turnId: 't1' });
      return { turnId: 't1', status: 'completed' };
    });
    const cts = new CancellationTokenSource();
    const result = await new FleetApi(rpc).runTurn({ sessionId: 's1', task: 'go' }, { token: cts.token, onProgress: (v) => seen.push(v) });
    assert.equal(result.turnId, 't1');
    const [method, params, token] = rpc.calls[0] as [string, { workDoneToken: string }, unknown];
    assert.equal(method, 'fleet/turn/run');
    assert.match(params.workDoneToken, /^fleet-vscode-[0-9a-f-]{36}$/);
    assert.equal(token, cts.token);
    assert.deepEqual(seen.map((v) => v.kind), ['begin', 'end']);
    assert.deepEqual(rpc.disposed, [params.workDoneToken]);
  });

  it('sends commands with exactly one object argument', async () => {
    const rpc = new FakeRpc(() => null);
    await new FleetApi(rpc).executeCommand('fleet.listSessions', {});
    await new FleetApi(rpc).executeCommand('fleet.newSession', { sessionId: 'x' });
    assert.deepEqual(rpc.calls, [
      ['workspace/executeCommand', { command: 'fleet.listSessions', arguments: [{}] }],
      ['workspace/executeCommand', { command: 'fleet.newSession', arguments: [{ sessionId: 'x' }] }],
    ]);
  });
});
