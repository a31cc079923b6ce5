// Models: pick the Session's root and sub model from the models the endpoint lists
// (`fleet/models/list` -> `fleet/session/setModels`). Only model ids travel; endpoints and keys
// stay in the server's configuration.
import * as vscode from 'vscode';
import { UiCommandName } from '../commands';
import { Fleet, Handler } from '../fleet';
import { ModelInfo, SessionModels } from '../protocol';

const DEFAULT = '$(settings) Configured default';
const REFRESH = '$(refresh) Refresh the list from the endpoint';

export function modelCommands(fleet: Fleet): Partial<Record<UiCommandName, Handler>> {
  return {
    pickModels: (arg?: { sessionId?: string; root?: string | null; sub?: string | null }) => pickModels(fleet, arg),
  };
}

async function pickOne(fleet: Fleet, role: 'root' | 'sub', models: ModelInfo[]): Promise<string | null | undefined> {
  for (;;) {
    const picked = await vscode.window.showQuickPick(
      [
        { label: DEFAULT, description: 'clear the Session selection', id: null as string | null },
        ...models.map((m) => ({ label: m.id, description: m.ownedBy ?? undefined, id: m.id as string | null })),
        { label: REFRESH, description: '', id: null as string | null },
      ],
      { title: `Fleet: ${role} model`, placeHolder: role === 'root' ? 'The model that plans and writes code' : 'The model child agents and sub-queries use' },
    );
    if (!picked) {
      return undefined;
    }
    if (picked.label !== REFRESH) {
      return picked.id;
    }
    models.splice(0, models.length, ...(await fleet.api().listModels(true)).models);
  }
}

async function pickModels(fleet: Fleet, arg?: { sessionId?: string; root?: string | null; sub?: string | null }): Promise<SessionModels | undefined> {
  const sessionId = arg?.sessionId ?? (await fleet.ensureSession());
  if (!sessionId) {
    return undefined;
  }
  let root = arg?.root;
  let sub = arg?.sub;
  if (root === undefined || sub === undefined) {
    const listed = await fleet.api().listModels();
    const models = [...listed.models];
    if (root === undefined) {
      root = await pickOne(fleet, 'root', models);
      if (root === undefined) return undefined;
    }
    if (sub === undefined) {
      sub = await pickOne(fleet, 'sub', models);
      if (sub === undefined) return undefined;
    }
  }
  const result = await fleet.api().setModels(sessionId, root, sub);
  const show = (id: string | null) => id ?? 'default';
  fleet.output.info(`models of ${sessionId}: root ${show(result.root)}, sub ${show(result.sub)}`);
  void vscode.window.showInformationMessage(`Fleet: ${sessionId} uses root ${show(result.root)}, sub ${show(result.sub)}`);
  return result;
}
