import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { PALETTE_SERVER_COMMANDS, SERVER_COMMAND_TITLES, UI_COMMANDS, allServerCommands, routeServerCommand } from '../commands';
import { CONTRACT_COMMANDS, SERVER_COMMANDS, initializationOptions, isServerCommand } from '../protocol';

const root = join(__dirname, '..', '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

describe('commands and package.json', () => {
  it('mirrors the contract: every PROTOCOL.md command is a server command', () => {
    for (const command of CONTRACT_COMMANDS) {
      assert.ok(isServerCommand(command), command);
    }
    assert.equal(isServerCommand('fleet.ui.runTurn'), false);
    assert.deepEqual(Object.keys(SERVER_COMMAND_TITLES).sort(), Object.keys(SERVER_COMMANDS).sort());
  });

  it('contributes every server command and every client command, category Fleet, no duplicate ids', () => {
    const contributed = pkg.contributes.commands as { command: string; title: string; category: string }[];
    const ids = contributed.map((c) => c.command);
    assert.equal(new Set(ids).size, ids.length);
    for (const id of [...allServerCommands(), ...Object.values(UI_COMMANDS).map((c) => c.id)]) {
      const entry = contributed.find((c) => c.command === id);
      assert.ok(entry, `${id} is not contributed`);
      assert.equal(entry.category, 'Fleet');
    }
    for (const title of ['Run Turn…', 'Cancel Turn', 'Open Artifact', 'Show Trace', 'Label Trace…', 'Attach to Fleet Session']) {
      assert.ok(contributed.some((c) => c.title === title && c.command.startsWith('fleet.ui.')), title);
    }
  });

  it('client commands never reuse a server command id (languageclient registers those)', () => {
    for (const c of Object.values(UI_COMMANDS)) {
      assert.ok(c.id.startsWith('fleet.ui.'), c.id);
      assert.equal(isServerCommand(c.id), false);
    }
  });

  it('hides server commands with a client twin from the palette', () => {
    const hidden = new Set((pkg.contributes.menus.commandPalette as { command: string; when: string }[]).filter((m) => m.when === 'false').map((m) => m.command));
    for (const id of allServerCommands()) {
      assert.equal(hidden.has(id), !PALETTE_SERVER_COMMANDS.includes(id), id);
    }
  });

  it('declares the settings, engine and languageclient the extension needs', () => {
    const props = pkg.contributes.configuration.properties;
    assert.deepEqual(props['fleet.serverCommand'].default, ['fleet-lsp', 'serve']);
    assert.equal(props['fleet.settings'].type, 'object');
    assert.equal(props['fleet.turnEvents'].type, 'boolean');
    assert.match(pkg.engines.vscode, /^\^1\.(9[1-9]|[1-9]\d\d)/);
    const major = Number(String(pkg.dependencies['vscode-languageclient']).replace(/^[^\d]*/, '').split('.')[0]);
    assert.ok(major >= 10, 'textDocumentContent needs vscode-languageclient >= 10');
    assert.equal(pkg.main, './out/extension.js');
  });

  it('routes argument-less server commands to their client twin, others to the server', () => {
    assert.deepEqual(routeServerCommand('fleet.runTurn', [], 's1'), { kind: 'ui', command: 'fleet.ui.runTurn' });
    assert.deepEqual(routeServerCommand('fleet.labelTrace', [undefined], 's1'), { kind: 'ui', command: 'fleet.ui.labelTrace' });
    assert.deepEqual(routeServerCommand('fleet.printDebugInformation', [], 's1'), { kind: 'server', arguments: [{ sessionId: 's1' }] });
    assert.deepEqual(routeServerCommand('fleet.listSessions', [], undefined), { kind: 'server', arguments: [{}] });
    assert.deepEqual(routeServerCommand('fleet.runTurn', [{ sessionId: 's1', task: 't' }], undefined), {
      kind: 'server',
      arguments: [{ sessionId: 's1', task: 't' }],
    });
  });

  it('sends the initializationOptions the contract describes', () => {
    assert.deepEqual(initializationOptions({ turnEvents: true, settings: { a: 1 } }), {
      fleet: { protocolVersion: 1, client: 'vscode', turnEvents: true, settings: { a: 1 } },
    });
  });
});

describe('the Fleet view in package.json', () => {
  it('contributes an activity-bar container with the Sessions view, activated by the view, commands and .fleet/', () => {
    assert.equal(pkg.contributes.viewsContainers.activitybar[0].id, 'fleet');
    assert.equal(pkg.contributes.views.fleet[0].id, 'fleet.sessions');
    for (const event of ['workspaceContains:.fleet/**', 'onView:fleet.sessions', 'onCommand:fleet.ui.runTurn']) {
      assert.ok(pkg.activationEvents.includes(event), event);
    }
    assert.equal(pkg.contributes.configuration.properties['fleet.trace.server'].default, 'off');
  });

  it('menus name only contributed commands; the tree offers open, save, show/label trace, cancel and delete', () => {
    const ids = new Set((pkg.contributes.commands as { command: string }[]).map((c) => c.command));
    const items = pkg.contributes.menus['view/item/context'] as { command: string; when: string }[];
    for (const menu of Object.values(pkg.contributes.menus) as { command: string }[][]) {
      for (const entry of menu) {
        assert.ok(ids.has(entry.command), entry.command);
      }
    }
    const on = (command: string) => items.filter((i) => i.command === command).map((i) => i.when).join(' ');
    assert.match(on(UI_COMMANDS.openArtifact.id), /fleet\.artifact/);
    assert.match(on(UI_COMMANDS.saveArtifact.id), /fleet\.artifact/);
    assert.match(on(UI_COMMANDS.showTrace.id), /trace/);
    assert.match(on(UI_COMMANDS.labelTrace.id), /trace/);
    assert.match(on(UI_COMMANDS.cancelTurn.id), /fleet\.turn\.running/);
    assert.match(on(UI_COMMANDS.deleteSession.id), /fleet\\\\?\.session/);
  });
});
