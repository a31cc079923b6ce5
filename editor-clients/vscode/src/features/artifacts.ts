// Artifacts: open one as a read-only `fleet:` document, save it as a local file.
import * as vscode from 'vscode';
import { UiCommandName } from '../commands';
import { Fleet, Handler, formatBytes } from '../fleet';
import { Artifact, URI_SCHEME } from '../protocol';
import { artifactUri, isFleetUri, parseFleetUri } from '../uris';
import { visible } from '../progress';

export function artifactCommands(fleet: Fleet): Partial<Record<UiCommandName, Handler>> {
  return {
    openArtifact: (arg?: { uri?: string; path?: string }) => openArtifact(fleet, arg),
    saveArtifact: (arg?: { uri?: string; target?: string }) => saveArtifact(fleet, arg),
  };
}

export async function pickArtifact(artifacts: Artifact[]): Promise<Artifact | undefined> {
  if (artifacts.length === 0) {
    void vscode.window.showInformationMessage('Fleet: the Session has no artifacts yet');
    return undefined;
  }
  const picked = await vscode.window.showQuickPick(
    artifacts.map((a) => ({
      label: visible(a.path.replace(/^artifacts\//, '')),
      description: formatBytes(a.sizeBytes),
      detail: [a.turnId && `turn ${a.turnId}`, a.agentId && `agent ${a.agentId}`].filter(Boolean).join(' · ') || undefined,
      artifact: a,
    })),
    { title: 'Fleet: artifacts', matchOnDetail: true },
  );
  return picked?.artifact;
}

/** Open a `fleet:` (or `fleet-answer:`) URI as a read-only document. */
export async function openDocument(uri: string, languageId?: string): Promise<vscode.TextEditor> {
  let document = await vscode.workspace.openTextDocument(vscode.Uri.parse(uri, true));
  if (languageId && document.languageId !== languageId) {
    document = await vscode.languages.setTextDocumentLanguage(document, languageId);
  }
  return vscode.window.showTextDocument(document, { preview: true });
}

async function openArtifact(fleet: Fleet, arg?: { uri?: string; path?: string }): Promise<string | undefined> {
  if (arg?.uri && isFleetUri(arg.uri)) {
    await openDocument(arg.uri);
    return arg.uri;
  }
  const sessionId = await fleet.ensureSession();
  if (!sessionId) {
    return undefined;
  }
  const uri = arg?.path
    ? artifactUri(sessionId, arg.path)
    : (await pickArtifact(await fleet.api().listArtifacts(sessionId)))?.uri;
  if (uri) {
    await openDocument(uri);
  }
  return uri;
}

async function saveArtifact(fleet: Fleet, arg?: { uri?: string; target?: string }): Promise<void> {
  let uri = arg?.uri;
  if (!uri) {
    const active = vscode.window.activeTextEditor?.document.uri;
    if (active?.scheme === URI_SCHEME && parseFleetUri(active.toString())?.kind === 'artifact') {
      uri = active.toString();
    } else {
      const sessionId = await fleet.ensureSession();
      uri = sessionId ? (await pickArtifact(await fleet.api().listArtifacts(sessionId)))?.uri : undefined;
    }
  }
  if (!uri) {
    return;
  }
  let target = arg?.target ? vscode.Uri.parse(arg.target, true) : undefined;
  if (!target) {
    const parsed = parseFleetUri(uri);
    const name = parsed?.kind === 'artifact' ? parsed.path.split('/').pop() : 'artifact';
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
    target = await vscode.window.showSaveDialog({
      title: 'Fleet: save the artifact as',
      defaultUri: folder ? vscode.Uri.joinPath(folder, name ?? 'artifact') : undefined,
    });
  }
  if (!target) {
    return;
  }
  const saved = await fleet.api().saveArtifact(uri, target.toString());
  void vscode.window.showInformationMessage(`Fleet: saved ${formatBytes(saved.sizeBytes)} to ${target.fsPath}`);
}
