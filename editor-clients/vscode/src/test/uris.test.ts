import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { artifactUri, describeFleetUri, isFleetUri, normalizeFleetUri, parseFleetUri, quoteSegment, traceUri } from '../uris';

describe('uris', () => {
  it('builds artifact URIs with or without the artifacts/ root, single slash, no authority', () => {
    assert.equal(artifactUri('s1', 'artifacts/revenue_by_region.csv'), 'fleet:/sessions/s1/artifacts/revenue_by_region.csv');
    assert.equal(artifactUri('s1', 'plots/a b.png'), 'fleet:/sessions/s1/artifacts/plots/a%20b.png');
  });

  it("percent-encodes like Python's urllib.parse.quote", () => {
    assert.equal(quoteSegment("a(b)!'*~-_."), 'a%28b%29%21%27%2A~-_.');
    assert.equal(quoteSegment('ü/x'), '%C3%BC%2Fx');
  });

  it('builds trace URIs', () => {
    assert.equal(traceUri('s1', 'tr-1'), 'fleet:/sessions/s1/traces/tr-1.md');
    assert.equal(traceUri('s 1', 'a/b'), 'fleet:/sessions/s%201/traces/a%2Fb.md');
  });

  it('normalizes fleet:/// and fleet:// forms like the server', () => {
    assert.equal(normalizeFleetUri('fleet:///sessions/x/traces/t.md'), 'fleet:/sessions/x/traces/t.md');
    assert.equal(normalizeFleetUri('fleet://sessions/x/traces/t.md'), 'fleet:/sessions/x/traces/t.md');
    assert.equal(normalizeFleetUri('fleet:/sessions/x/traces/t.md'), 'fleet:/sessions/x/traces/t.md');
  });

  it('parses what it builds (round trip)', () => {
    assert.deepEqual(parseFleetUri(artifactUri('s1', 'dir/a b.csv')), { kind: 'artifact', sessionId: 's1', path: 'artifacts/dir/a b.csv' });
    assert.deepEqual(parseFleetUri(traceUri('s1', 'tr/1')), { kind: 'trace', sessionId: 's1', traceId: 'tr/1' });
    assert.deepEqual(parseFleetUri('fleet:///sessions/s1/traces/t.md'), { kind: 'trace', sessionId: 's1', traceId: 't' });
  });

  it('refuses URIs that name nothing', () => {
    for (const bad of [
      'file:///tmp/x',
      'fleet:/sessions/s1',
      'fleet:/sessions/s1/artifacts',
      'fleet:/sessions/s1/artifacts/../x',
      'fleet:/sessions/s1/traces/t.txt',
      'fleet:/sessions/s1/traces/.md',
      'fleet:/sessions/s1/other/x',
      'fleet:/sessions/s1/artifacts/a.csv?x=1',
      'fleet:/sessions/s1/artifacts/%E0%A4%A',
    ]) {
      assert.equal(parseFleetUri(bad), undefined, bad);
    }
  });

  it('describes documents for pick lists', () => {
    assert.equal(isFleetUri('fleet:/sessions/a/traces/b.md'), true);
    assert.equal(isFleetUri('file:///a'), false);
    assert.equal(describeFleetUri(artifactUri('s1', 'x.csv')), 'x.csv (session s1)');
    assert.equal(describeFleetUri(traceUri('s1', 't')), 'trace t (session s1)');
  });
});
