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

  it('follows the pages of fleet/session/list and fleet/workspace/list to their end', async () => {
    const sessions = Array.from({ length: 7 }, (_, i) => ({ sessionId: `s${i}` }));
    const files = Array.from({ length: 5 }, (_, i) => ({ path: `files/f${i}`, sizeBytes: 1, sha256: 'x' }));
    const page = <T>(items: T[], params: any, size: number): { items: T[]; nextCursor?: string } => {
      const start = params.cursor ? Number(params.cursor.slice(1)) : 0;
      const end = start + size;
      return end < items.length ? { items: items.slice(start, end), nextCursor: `c${end}` } : { items: items.slice(start) };
    };
    const rpc = new FakeRpc((method, params) => {
      if (method === 'fleet/session/list') {
        const { items, nextCursor } = page(sessions, params, 3);
        return nextCursor ? { sessions: items, nextCursor } : { sessions: items };
      }
      const { items, nextCursor } = page(files, params, 2);
      const split = { files: items.slice(1), artifacts: items.slice(0, 1) };
      return nextCursor ? { ...split, nextCursor } : split;
    });
    const api = new FleetApi(rpc);
    assert.deepEqual((await api.listSessions()).map((s) => s.sessionId), sessions.map((s) => s.sessionId));
    assert.deepEqual(rpc.calls, [
      ['fleet/session/list', {}],
      ['fleet/session/list', { cursor: 'c3' }],
      ['fleet/session/list', { cursor: 'c6' }],
    ]);
    rpc.calls = [];
    const listing = await api.workspace('s1', { pageSize: 2 });
    assert.equal(listing.files.length + listing.artifacts.length, 5);
    assert.deepEqual(rpc.calls.map((c) => c[1]), [
      { sessionId: 's1', limit: 2 },
      { sessionId: 's1', limit: 2, cursor: 'c2' },
      { sessionId: 's1', limit: 2, cursor: 'c4' },
    ]);
  });

  it('stops with an error when a server repeats a page cursor', async () => {
    const rpc = new FakeRpc(() => ({ sessions: [{ sessionId: 'a' }], nextCursor: 'same' }));
    await assert.rejects(new FleetApi(rpc).listSessions(), /repeated the page cursor/);
    assert.equal(rpc.calls.length, 2);
  });

  it('takes an old server answer without nextCursor as the only page', async () => {
    const rpc = new FakeRpc(() => ({ files: [], artifacts: [{ path: 'artifacts/a', sizeBytes: 1, sha256: 'x' }] }));
    assert.equal((await new FleetApi(rpc).workspace('s')).artifacts.length, 1);
    assert.equal(rpc.calls.length, 1);
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
