import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_SERVER_COMMAND, didChangeConfigurationParams, needsRestart, readConfig, splitCommandLine } from '../config';

function reader(values: Record<string, unknown>) {
  return (key: string) => values[key];
}

describe('config', () => {
  it('has defaults', () => {
    const { config, problems } = readConfig(reader({}));
    assert.deepEqual(config, { serverCommand: [...DEFAULT_SERVER_COMMAND], settings: {}, turnEvents: false });
    assert.deepEqual(problems, []);
  });

  it('reads a command list, a command line, settings and turnEvents', () => {
    const { config } = readConfig(
      reader({ serverCommand: ['uv', 'run', 'fleet-lsp', 'serve'], settings: { 'runtime.max_agent_depth': 2 }, turnEvents: true }),
    );
    assert.deepEqual(config.serverCommand, ['uv', 'run', 'fleet-lsp', 'serve']);
    assert.deepEqual(config.settings, { 'runtime.max_agent_depth': 2 });
    assert.equal(config.turnEvents, true);
    assert.deepEqual(readConfig(reader({ serverCommand: '"/opt/my env/python" -m fleet_lsp serve' })).config.serverCommand, [
      '/opt/my env/python',
      '-m',
      'fleet_lsp',
      'serve',
    ]);
    assert.deepEqual(splitCommandLine("a 'b c' d"), ['a', 'b c', 'd']);
  });

  it('falls back to defaults and reports invalid values', () => {
    const { config, problems } = readConfig(reader({ serverCommand: [1, 2], settings: [1], turnEvents: 'yes' }));
    assert.deepEqual(config.serverCommand, [...DEFAULT_SERVER_COMMAND]);
    assert.deepEqual(config.settings, {});
    assert.equal(config.turnEvents, false);
    assert.deepEqual(problems.map((p) => p.key), ['fleet.serverCommand', 'fleet.settings', 'fleet.turnEvents']);
  });

  it('restarts only for serverCommand; settings go by didChangeConfiguration, turnEvents only toggles logging', () => {
    const base = readConfig(reader({})).config;
    assert.equal(needsRestart(base, { ...base, settings: { a: 1 } }), false);
    assert.equal(needsRestart(base, { ...base, turnEvents: true }), false);
    assert.equal(needsRestart(base, { ...base, serverCommand: ['x'] }), true);
    assert.deepEqual(didChangeConfigurationParams({ ...base, settings: { a: 1 } }), { settings: { fleet: { a: 1 } } });
  });
});
