// A Session's context: attach files, folders and selections; the dataset.
import * as vscode from 'vscode';
import { UiCommandName } from '../commands';
import { Fleet, Handler, formatBytes } from '../fleet';
import { AttachResult } from '../protocol';
import { visible } from '../progress';

export function contextCommands(fleet: Fleet): Partial<Record<UiCommandName, Handler>> {
  return {
    attachFile: (uri?: vscode.Uri | { uri?: string }, uris?: vscode.Uri[]) => attachFile(fleet, uri, uris),
    attachSelection: () => attachSelection(fleet),
    setDataset: (arg?: { path?: string; description?: string }) => setDataset(fleet, arg),
    clearDataset: () => clearDataset(fleet),
  };
}

/** Attach from the explorer (a Uri and the selection), a `{uri}` argument, or an open dialog. */
async function attachFile(fleet: Fleet, uri?: vscode.Uri | { uri?: string }, uris?: vscode.Uri[]): Promise<AttachResult[]> {
  const sessionId = await fleet.ensureSession();
  if (!sessionId) {
    return [];
  }
  let targets: vscode.Uri[] =
    uris && uris.length > 0
      ? uris
      : uri instanceof vscode.Uri
        ? [uri]
        : typeof uri?.uri === 'string'
          ? [vscode.Uri.parse(uri.uri, true)]
          : [];
  if (targets.length === 0) {
    const active = vscode.window.activeTextEditor?.document.uri;
    const picked = await vscode.window.showOpenDialog({
      title: 'Fleet: attach files or a folder',
      canSelectFiles: true,
      canSelectFolders: true,
      canSelectMany: true,
      defaultUri: active?.scheme === 'file' ? active : vscode.workspace.workspaceFolders?.[0]?.uri,
      openLabel: 'Attach',
    });
    targets = picked ?? [];
  }
  const results: AttachResult[] = [];
  for (const target of targets) {
    if (target.scheme !== 'file') {
      void vscode.window.showWarningMessage(`Fleet: only local files can be attached, not ${target.toString()}`);
      continue;
    }
    const result = await fleet.api().attach(sessionId, target.toString());
    results.push(result);
    const count = result.files ? ` (${result.files.length} files${result.skipped?.length ? `, ${result.skipped.length} skipped` : ''})` : '';
    fleet.output.info(`attached ${result.path}${count} to ${sessionId}`);
    void vscode.window.showInformationMessage(`Fleet: attached ${result.path}${count} to ${sessionId}`);
  }
  return results;
}

async function attachSelection(fleet: Fleet): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.selection.isEmpty) {
    void vscode.window.showInformationMessage('Fleet: select some text first');
    return;
  }
  const sessionId = await fleet.ensureSession();
  if (!sessionId) {
    return;
  }
  const base = editor.document.uri.path.split('/').pop() || 'selection.txt';
  const name = await vscode.window.showInputBox({ title: 'Fleet: attach the selection as', value: `files/${base}` });
  if (!name) {
    return;
  }
  const result = await fleet.api().attachText(sessionId, editor.document.getText(editor.selection), name);
  void vscode.window.showInformationMessage(`Fleet: attached ${result.path} to ${sessionId}`);
}

async function setDataset(fleet: Fleet, arg?: { path?: string; description?: string }): Promise<void> {
  const sessionId = await fleet.ensureSession();
  if (!sessionId) {
    return;
  }
  const api = fleet.api();
  let path = arg?.path;
  let description = arg?.description;
  if (!path) {
    const { files } = await api.workspace(sessionId);
    if (files.length === 0) {
      void vscode.window.showInformationMessage("Fleet: attach a file first ('Fleet: Attach File or Folder…')");
      return;
    }
    const picked = await vscode.window.showQuickPick(
      files.map((f) => ({ label: visible(f.path), path: f.path, description: formatBytes(f.sizeBytes) })),
      { title: `Fleet: dataset of ${sessionId}` },
    );
    if (!picked) {
      return;
    }
    path = picked.path;
    description = await vscode.window.showInputBox({ title: 'Fleet: describe the dataset (optional)' });
    if (description === undefined) {
      return;
    }
  }
  const result = await api.setDataset(sessionId, path, description || undefined);
  void vscode.window.showInformationMessage(`Fleet: dataset ${result.path} (${formatBytes(result.sizeBytes)})`);
}

async function clearDataset(fleet: Fleet): Promise<void> {
  const sessionId = await fleet.ensureSession();
  if (sessionId) {
    await fleet.api().clearDataset(sessionId);
    void vscode.window.showInformationMessage(`Fleet: ${sessionId} has no dataset now`);
  }
}
