import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { IGNORE_WORKSPACE_CONFIG_ENV, WORKSPACE_CONFIG_FILES, serverLaunch, trustGrantedPrompt } from '../trust';

const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8'));

describe('workspace trust', () => {
  it('starts the server as is in a trusted workspace', () => {
    const base = { PATH: '/bin', FLEET_LM_API_KEY: 'k' };
    const launch = serverLaunch(base, true, ['config/fleet.toml']);
    assert.deepEqual(launch, { env: base, ignoresWorkspaceConfig: false });
    assert.notEqual(launch.env, base); // a copy: process.env is never changed
  });

  it('ignores the workspace config in Restricted Mode and says so when there is some', () => {
    const base = { PATH: '/bin' };
    const launch = serverLaunch(base, false, ['config/fleet.toml', '.env']);
    assert.equal(launch.env[IGNORE_WORKSPACE_CONFIG_ENV], '1');
    assert.equal(launch.env.PATH, '/bin');
    assert.equal(launch.ignoresWorkspaceConfig, true);
    assert.match(launch.notice ?? '', /not trusted, so the server ignores its config\/fleet\.toml and \.env/);
    assert.equal(base.hasOwnProperty(IGNORE_WORKSPACE_CONFIG_ENV), false);
    const bare = serverLaunch(base, false, []);
    assert.equal(bare.env[IGNORE_WORKSPACE_CONFIG_ENV], '1');
    assert.equal(bare.notice, undefined); // nothing to ignore: nothing to say
  });

  it('keeps a switch the user set in their own environment', () => {
    const launch = serverLaunch({ [IGNORE_WORKSPACE_CONFIG_ENV]: '1' }, true, []);
    assert.equal(launch.env[IGNORE_WORKSPACE_CONFIG_ENV], '1');
  });

  it('offers a restart when trust is granted only if it changes something', () => {
    assert.match(trustGrantedPrompt(true, ['.env']) ?? '', /trusted now\. Restart the server to read its \.env\?/);
    assert.equal(trustGrantedPrompt(false, ['.env']), undefined);
    assert.equal(trustGrantedPrompt(true, []), undefined);
  });

  it('names the files the server reads', () => {
    assert.deepEqual([...WORKSPACE_CONFIG_FILES], ['config/fleet.toml', '.env']);
  });

  it('declares limited support for untrusted workspaces in package.json', () => {
    const untrusted = pkg.capabilities?.untrustedWorkspaces;
    assert.equal(untrusted?.supported, 'limited');
    assert.match(untrusted?.description ?? '', /FLEET_IGNORE_WORKSPACE_CONFIG/);
    assert.deepEqual(untrusted?.restrictedConfigurations, ['fleet.serverCommand', 'fleet.settings']);
    for (const key of untrusted.restrictedConfigurations) {
      assert.ok(pkg.contributes.configuration.properties[key], key);
    }
  });
});
