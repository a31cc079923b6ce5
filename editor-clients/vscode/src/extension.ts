// Fleet for VS Code: a thin client of `fleet-lsp serve`. vscode-languageclient (>= 10) starts the
// server over stdio, registers the server's `fleet.*` commands and, from the server's
// `workspace.textDocumentContent {schemes: ["fleet"]}` capability (LSP 3.18), the read-only
// `fleet:` document provider. This file adds the `fleet.ui.*` commands (input, progress with
// cancel, documents); the logic that can live without `vscode` is in the sibling modules.
import { randomUUID } from 'crypto';
import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
  State,
} from 'vscode-languageclient/node';
import { FleetApi } from './api';
import { UI_COMMANDS, UiCommandName, routeServerCommand } from './commands';
import { FleetConfig, didChangeConfigurationParams, needsRestart, readConfig } from './config';
import { errorDocument, formatError, isCancellation } from './errors';
import { ProgressBoard, formatTurnEvent, splitValues, formatTurnResult, formatUsage, newWorkDoneToken, progressMessage, truncate, turnTitle } from './progress';
import {
  Artifact,
  FleetServerCapability,
  LABEL_STATUSES,
  MODES,
  Mode,
  Notifications,
  PROTOCOL_VERSION,
  ROUTES,
  SessionDidChange,
  SessionInfo,
  TurnEvent,
  TurnResult,
  TurnSummary,
  URI_SCHEME,
  initializationOptions,
  isServerCommand,
} from './protocol';
import { artifactUri, isFleetUri, parseFleetUri } from './uris';

const SESSION_KEY = 'fleet.sessionId';

interface RunningTurn {
  token: string;
  sessionId: string;
  task: string;
  turnId?: string;
  cancel: vscode.CancellationTokenSource;
}

interface LastTurn {
  sessionId: string;
  turnId: string;
  traceId?: string | null;
  answer?: string;
  route?: string;
}

class FleetExtension implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private api: FleetApi | undefined;
  private config: FleetConfig;
  private readonly output = vscode.window.createOutputChannel('Fleet', { log: true });
  private turnsOutput: vscode.OutputChannel | undefined;
  private readonly statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
  private readonly board = new ProgressBoard();
  private readonly running = new Map<string, RunningTurn>();
  private readonly disposables: vscode.Disposable[] = [];
  private fallbackProvider: vscode.Disposable | undefined;
  private lastTurn: LastTurn | undefined;

  constructor(private readonly context: vscode.ExtensionContext) {
    this.config = this.readConfig();
    this.statusItem.command = UI_COMMANDS.runTurn.id;
    this.updateStatus();
    this.disposables.push(
      this.output,
      this.statusItem,
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration('fleet')) {
          void this.configurationChanged();
        }
      }),
    );
  }

  dispose(): void {
    for (const turn of this.running.values()) {
      turn.cancel.dispose();
    }
    this.fallbackProvider?.dispose();
    this.turnsOutput?.dispose();
    vscode.Disposable.from(...this.disposables).dispose();
  }

  // state --------------------------------------------------------------------------------------

  get sessionId(): string | undefined {
    return this.context.workspaceState.get<string>(SESSION_KEY);
  }

  private async useSession(info: SessionInfo | undefined): Promise<void> {
    await this.context.workspaceState.update(SESSION_KEY, info?.sessionId);
    this.updateStatus();
  }

  private updateStatus(): void {
    const session = this.sessionId;
    const progress = this.board.status();
    if (this.running.size > 0) {
      this.statusItem.text = `$(sync~spin) Fleet: ${truncate(progress || 'running', 60)}`;
      this.statusItem.command = UI_COMMANDS.cancelTurn.id;
      this.statusItem.tooltip = 'Fleet: a Turn is running. Click to cancel it.';
    } else {
      this.statusItem.text = session ? `$(hubot) Fleet: ${session}` : '$(hubot) Fleet';
      this.statusItem.command = session ? UI_COMMANDS.runTurn.id : UI_COMMANDS.newSession.id;
      this.statusItem.tooltip = session ? `Fleet session ${session}. Click to run a Turn.` : 'Fleet: click to start a Session.';
    }
    this.statusItem.show();
  }

  private readConfig(): FleetConfig {
    const { config, problems } = readConfig((key) => vscode.workspace.getConfiguration('fleet').get(key));
    for (const problem of problems) {
      void vscode.window.showWarningMessage(`Fleet: ${problem.message}`);
    }
    return config;
  }

  // server -------------------------------------------------------------------------------------

  async start(): Promise<void> {
    const [command, ...args] = this.config.serverCommand;
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    // The command runs verbatim and must speak LSP on stdin/stdout (`fleet-lsp serve` does).
    const serverOptions: ServerOptions = { command, args, options: { cwd, env: process.env } };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [], // no text synchronization: fleet-lsp offers no language features
      initializationOptions: initializationOptions(this.config),
      outputChannel: this.output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      connectionOptions: { maxRestartCount: 2 },
      middleware: {
        executeCommand: (cmd, cmdArgs) => this.executeServerCommand(cmd, cmdArgs),
        provideTextDocumentContent: (uri, token) => this.provideDocument(uri, token),
      },
    };
    const client = new LanguageClient('fleet', 'Fleet', serverOptions, clientOptions);
    client.onNotification(Notifications.turnDidEmit, (event: TurnEvent) => this.turnEvent(event));
    client.onNotification(Notifications.sessionDidChange, (change: SessionDidChange) => this.sessionChanged(change));
    this.client = client;
    this.api = new FleetApi(client);
    try {
      await client.start();
    } catch (error) {
      void vscode.window
        .showErrorMessage(
          formatError(error, `Fleet: cannot start ${this.config.serverCommand.join(' ')}`) +
            " Install fleet-lsp or set 'fleet.serverCommand'.",
          'Open Settings',
          'Show Output',
        )
        .then((choice) => {
          if (choice === 'Open Settings') {
            void vscode.commands.executeCommand('workbench.action.openSettings', 'fleet.serverCommand');
          } else if (choice === 'Show Output') {
            this.output.show();
          }
        });
      return;
    }
    this.checkServer(client);
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.api = undefined;
    this.fallbackProvider?.dispose();
    this.fallbackProvider = undefined;
    if (client && client.state !== State.Stopped) {
      await client.stop().catch(() => undefined);
    }
    await client?.dispose().catch(() => undefined);
  }

  private checkServer(client: LanguageClient): void {
    const result = client.initializeResult;
    const fleet = (result?.capabilities.experimental as { fleet?: FleetServerCapability } | undefined)?.fleet;
    if (!fleet) {
      void vscode.window.showWarningMessage(
        `Fleet: the server ${result?.serverInfo?.name ?? '?'} does not speak the fleet protocol; check 'fleet.serverCommand'.`,
      );
    } else if (fleet.protocolVersion !== PROTOCOL_VERSION) {
      void vscode.window.showWarningMessage(
        `Fleet: the server speaks protocol version ${fleet.protocolVersion}; this extension speaks ${PROTOCOL_VERSION}.`,
      );
    }
    // vscode-languageclient >= 10 registers the `fleet` content provider from the server's static
    // `workspace.textDocumentContent` capability. A server without it gets the fallback over the
    // custom `fleet/artifact/read` request.
    const schemes = (result?.capabilities.workspace as { textDocumentContent?: { schemes?: string[] } } | undefined)
      ?.textDocumentContent?.schemes;
    if (!schemes?.includes(URI_SCHEME)) {
      this.output.info('the server does not advertise workspace.textDocumentContent; using fleet/artifact/read');
      this.fallbackProvider = vscode.workspace.registerTextDocumentContentProvider(URI_SCHEME, {
        provideTextDocumentContent: async (uri, token) => {
          try {
            return (await this.requireApi().readArtifact(uri.toString(), token)).text;
          } catch (error) {
            return errorDocument(uri.toString(), error);
          }
        },
      });
    }
  }

  private requireApi(): FleetApi {
    if (!this.api || !this.client || this.client.state !== State.Running) {
      throw new Error("the Fleet server is not running (see 'Fleet: Show Output'; 'Fleet: Restart Server' restarts it)");
    }
    return this.api;
  }

  private async restart(): Promise<void> {
    await this.stop();
    this.config = this.readConfig();
    await this.start();
  }

  private async configurationChanged(): Promise<void> {
    const before = this.config;
    const after = this.readConfig();
    if (needsRestart(before, after)) {
      const choice = await vscode.window.showInformationMessage(
        'Fleet: restart the server to use the new fleet.serverCommand / fleet.turnEvents?',
        'Restart',
      );
      if (choice === 'Restart') {
        await this.restart();
      }
      return;
    }
    this.config = after;
    if (JSON.stringify(before.settings) !== JSON.stringify(after.settings) && this.client?.state === State.Running) {
      await this.client.sendNotification(DidChangeConfigurationNotification.type, didChangeConfigurationParams(after));
    }
  }

  // middleware ---------------------------------------------------------------------------------

  /** Server commands (registered by languageclient) come here first. */
  private async executeServerCommand(command: string, args: unknown[]): Promise<unknown> {
    if (!isServerCommand(command)) {
      return this.requireApi().executeCommandWith(command, args);
    }
    const route = routeServerCommand(command, args, this.sessionId);
    if (route.kind === 'ui') {
      return vscode.commands.executeCommand(route.command);
    }
    try {
      return await this.requireApi().executeCommandWith(command, route.arguments);
    } catch (error) {
      void vscode.window.showErrorMessage(formatError(error, `Fleet: ${command}`));
      throw error;
    }
  }

  /** `fleet:` documents: languageclient's provider, with failures shown in the document. */
  private async provideDocument(uri: vscode.Uri, token: vscode.CancellationToken): Promise<string | undefined> {
    try {
      return await this.requireApi().documentContent(uri.toString(), token);
    } catch (error) {
      if (token.isCancellationRequested) {
        return undefined;
      }
      return errorDocument(uri.toString(), error);
    }
  }

  // notifications ------------------------------------------------------------------------------

  private turnEvent(event: TurnEvent): void {
    if (!this.turnsOutput) {
      this.turnsOutput = vscode.window.createOutputChannel('Fleet Turns');
    }
    this.turnsOutput.appendLine(formatTurnEvent(event));
  }

  private sessionChanged(change: SessionDidChange): void {
    if (change.sessionId === this.sessionId && (change.change === 'closed' || change.change === 'deleted')) {
      void this.useSession(undefined);
    }
  }

  // commands -----------------------------------------------------------------------------------

  registerCommands(): void {
    const handlers: Record<UiCommandName, (...args: any[]) => unknown> = {
      newSession: (arg?: { sessionId?: string; mode?: Mode }) => this.newSession(arg),
      loadSession: (arg?: { sessionId?: string }) => this.loadSession(arg),
      closeSession: () => this.closeSession(),
      setMode: (arg?: { mode?: Mode }) => this.setMode(arg),
      attachFile: (uri?: vscode.Uri, uris?: vscode.Uri[]) => this.attachFile(uri, uris),
      attachSelection: () => this.attachSelection(),
      setDataset: (arg?: { path?: string; description?: string }) => this.setDataset(arg),
      clearDataset: () => this.clearDataset(),
      runTurn: (arg?: { task?: string; sessionId?: string; mode?: Mode }) => this.runTurn(arg),
      cancelTurn: () => this.cancelTurn(),
      openArtifact: (arg?: { uri?: string; path?: string }) => this.openArtifact(arg),
      saveArtifact: (arg?: { uri?: string }) => this.saveArtifact(arg),
      showTrace: (arg?: { traceId?: string; turnId?: string }) => this.showTrace(arg),
      labelTrace: (arg?: { traceId?: string }) => this.labelTrace(arg),
      showOutput: () => this.output.show(),
      restartServer: () => this.restart(),
    };
    for (const [name, handler] of Object.entries(handlers) as [UiCommandName, (...a: unknown[]) => unknown][]) {
      this.disposables.push(
        vscode.commands.registerCommand(UI_COMMANDS[name].id, async (...args: unknown[]) => {
          try {
            return await handler(...args);
          } catch (error) {
            if (!isCancellation(error)) {
              void vscode.window.showErrorMessage(formatError(error, `Fleet: ${UI_COMMANDS[name].title.replace('…', '')}`));
            }
            return undefined;
          }
        }),
      );
    }
  }

  /** The current Session, or one the user creates or picks now. */
  private async ensureSession(): Promise<string | undefined> {
    if (this.sessionId) {
      return this.sessionId;
    }
    const api = this.requireApi();
    const sessions = await api.listSessions();
    const NEW = '$(add) New Session';
    const picked = await vscode.window.showQuickPick(
      [{ label: NEW, description: '' }, ...sessions.map((s) => sessionItem(s))],
      { title: 'Fleet: choose a Session', placeHolder: 'No Session is selected in this workspace' },
    );
    if (!picked) {
      return undefined;
    }
    const info = picked.label === NEW ? await api.newSession() : await api.loadSession(picked.label);
    await this.useSession(info);
    return info.sessionId;
  }

  private async newSession(arg?: { sessionId?: string; mode?: Mode }): Promise<SessionInfo | undefined> {
    let params = arg;
    if (!params) {
      const sessionId = await vscode.window.showInputBox({
        title: 'Fleet: New Session',
        prompt: 'Session id (leave empty for a generated one)',
        validateInput: (v) => (v && !/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(v) ? 'letters, digits, _ . - (up to 64)' : undefined),
      });
      if (sessionId === undefined) {
        return undefined;
      }
      const mode = await vscode.window.showQuickPick([...MODES], { title: 'Fleet: mode', placeHolder: 'hybrid' });
      if (mode === undefined) {
        return undefined;
      }
      params = { ...(sessionId ? { sessionId } : {}), mode: mode as Mode };
    }
    const info = await this.requireApi().newSession(params);
    await this.useSession(info);
    void vscode.window.showInformationMessage(`Fleet: session ${info.sessionId} (${info.mode})`);
    return info;
  }

  private async loadSession(arg?: { sessionId?: string }): Promise<SessionInfo | undefined> {
    const api = this.requireApi();
    let sessionId = arg?.sessionId;
    if (!sessionId) {
      const sessions = await api.listSessions();
      if (sessions.length === 0) {
        void vscode.window.showInformationMessage("Fleet: no stored Sessions; 'Fleet: New Session…' makes one.");
        return undefined;
      }
      const picked = await vscode.window.showQuickPick(sessions.map(sessionItem), { title: 'Fleet: load a Session' });
      sessionId = picked?.label;
    }
    if (!sessionId) {
      return undefined;
    }
    const info = await api.loadSession(sessionId);
    await this.useSession(info);
    void vscode.window.showInformationMessage(`Fleet: session ${info.sessionId} (${info.mode}, ${info.turnCount} turns)`);
    return info;
  }

  private async closeSession(): Promise<void> {
    const sessionId = this.sessionId;
    if (!sessionId) {
      return;
    }
    await this.requireApi().closeSession(sessionId);
    await this.useSession(undefined);
  }

  private async setMode(arg?: { mode?: Mode }): Promise<SessionInfo | undefined> {
    const sessionId = await this.ensureSession();
    if (!sessionId) {
      return undefined;
    }
    const mode = arg?.mode ?? ((await vscode.window.showQuickPick([...MODES], { title: `Fleet: mode of ${sessionId}` })) as Mode | undefined);
    if (!mode) {
      return undefined;
    }
    const info = await this.requireApi().setMode(sessionId, mode);
    void vscode.window.showInformationMessage(`Fleet: session ${info.sessionId} runs in ${info.mode} mode`);
    return info;
  }

  private async attachFile(uri?: vscode.Uri, uris?: vscode.Uri[]): Promise<void> {
    const sessionId = await this.ensureSession();
    if (!sessionId) {
      return;
    }
    let targets = uris && uris.length > 0 ? uris : uri instanceof vscode.Uri ? [uri] : [];
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
    for (const target of targets) {
      if (target.scheme !== 'file') {
        void vscode.window.showWarningMessage(`Fleet: only local files can be attached, not ${target.toString()}`);
        continue;
      }
      const result = await this.requireApi().attach(sessionId, target.toString());
      const count = result.files ? ` (${result.files.length} files${result.skipped?.length ? `, ${result.skipped.length} skipped` : ''})` : '';
      void vscode.window.showInformationMessage(`Fleet: attached ${result.path}${count} to ${sessionId}`);
    }
  }

  private async attachSelection(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.selection.isEmpty) {
      void vscode.window.showInformationMessage('Fleet: select some text first');
      return;
    }
    const sessionId = await this.ensureSession();
    if (!sessionId) {
      return;
    }
    const base = editor.document.uri.path.split('/').pop() || 'selection.txt';
    const name = await vscode.window.showInputBox({ title: 'Fleet: attach the selection as', value: `files/${base}` });
    if (!name) {
      return;
    }
    const result = await this.requireApi().attachText(sessionId, editor.document.getText(editor.selection), name);
    void vscode.window.showInformationMessage(`Fleet: attached ${result.path} to ${sessionId}`);
  }

  private async setDataset(arg?: { path?: string; description?: string }): Promise<void> {
    const sessionId = await this.ensureSession();
    if (!sessionId) {
      return;
    }
    const api = this.requireApi();
    let path = arg?.path;
    let description = arg?.description;
    if (!path) {
      const { files } = await api.workspace(sessionId);
      if (files.length === 0) {
        void vscode.window.showInformationMessage("Fleet: attach a file first ('Fleet: Attach File or Folder…')");
        return;
      }
      const picked = await vscode.window.showQuickPick(
        files.map((f) => ({ label: f.path, description: formatBytes(f.sizeBytes) })),
        { title: `Fleet: dataset of ${sessionId}` },
      );
      if (!picked) {
        return;
      }
      path = picked.label;
      description = await vscode.window.showInputBox({ title: 'Fleet: describe the dataset (optional)' });
      if (description === undefined) {
        return;
      }
    }
    const result = await api.setDataset(sessionId, path, description || undefined);
    void vscode.window.showInformationMessage(`Fleet: dataset ${result.path} (${formatBytes(result.sizeBytes)})`);
  }

  private async clearDataset(): Promise<void> {
    const sessionId = await this.ensureSession();
    if (sessionId) {
      await this.requireApi().clearDataset(sessionId);
      void vscode.window.showInformationMessage(`Fleet: ${sessionId} has no dataset now`);
    }
  }

  /** Run a Turn in a cancellable notification; the Cancel button sends `$/cancelRequest`. */
  private async runTurn(arg?: { task?: string; sessionId?: string; mode?: Mode }): Promise<TurnResult | undefined> {
    const sessionId = arg?.sessionId ?? (await this.ensureSession());
    if (!sessionId) {
      return undefined;
    }
    const task =
      arg?.task ??
      (await vscode.window.showInputBox({
        title: `Fleet: run a Turn in ${sessionId}`,
        prompt: 'What should the agents do?',
        placeHolder: 'Calculate revenue by region and save artifacts/revenue_by_region.csv.',
        ignoreFocusOut: true,
      }));
    if (!task || !task.trim()) {
      return undefined;
    }
    const api = this.requireApi();
    const token = newWorkDoneToken(randomUUID);
    const turn: RunningTurn = { token, sessionId, task, cancel: new vscode.CancellationTokenSource() };
    this.running.set(token, turn);
    this.output.info(`Turn in ${sessionId}: ${task}`);
    this.updateStatus();
    let result: TurnResult | undefined;
    let failure: unknown;
    await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: turnTitle(task), cancellable: true },
      async (progress, cancelButton) => {
        const sub = cancelButton.onCancellationRequested(() => turn.cancel.cancel());
        try {
          result = await api.runTurn(
            { sessionId, task, ...(arg?.mode ? { mode: arg.mode } : {}) },
            {
              workDoneToken: token,
              token: turn.cancel.token,
              onProgress: (value) => {
                turn.turnId = value.turnId ?? turn.turnId;
                this.board.apply(token, value);
                const message = progressMessage(value);
                if (message && value.kind !== 'end') {
                  progress.report({ message });
                }
                this.updateStatus();
              },
            },
          );
        } catch (error) {
          failure = error;
        } finally {
          sub.dispose();
          turn.cancel.dispose();
          this.running.delete(token);
          this.board.apply(token, { kind: 'end' });
          this.updateStatus();
        }
      },
    );
    if (failure !== undefined) {
      if (isCancellation(failure)) {
        this.output.info(`Turn ${turn.turnId ?? ''} cancelled`);
        void vscode.window.showInformationMessage(`Fleet: Turn ${turn.turnId ?? ''} cancelled`.replace('  ', ' '));
        return undefined;
      }
      throw failure;
    }
    if (result) {
      this.turnFinished(result);
    }
    return result;
  }

  private turnFinished(result: TurnResult): void {
    this.lastTurn = {
      sessionId: result.sessionId,
      turnId: result.turnId,
      traceId: result.traceId,
      answer: result.answer,
      route: result.route,
    };
    const summary = formatTurnResult(result);
    this.output.info(`${summary} (${formatUsage(result)})`);
    if (result.learnedNote) {
      this.output.info(`learned: ${result.learnedNote}`);
    }
    const actions: string[] = ['Show Trace'];
    if (result.artifacts.length > 0) {
      actions.push(result.artifacts.length === 1 ? 'Open Artifact' : 'Open Artifacts…');
    }
    const show = result.status === 'completed' ? vscode.window.showInformationMessage : vscode.window.showWarningMessage;
    void show(`Fleet: ${summary}`, ...actions).then((choice) => {
      if (choice === 'Show Trace') {
        void vscode.commands.executeCommand(UI_COMMANDS.showTrace.id, result.traceId ? { traceId: result.traceId } : { turnId: result.turnId });
      } else if (choice === 'Open Artifact') {
        void this.openDocument(result.artifacts[0].uri);
      } else if (choice === 'Open Artifacts…') {
        void this.pickArtifact(result.artifacts).then((a) => a && this.openDocument(a.uri));
      }
    });
  }

  private async cancelTurn(): Promise<void> {
    const turns = [...this.running.values()];
    if (turns.length === 1) {
      turns[0].cancel.cancel();
      return;
    }
    if (turns.length > 1) {
      const picked = await vscode.window.showQuickPick(
        turns.map((t) => ({ label: truncate(t.task, 60), description: `${t.sessionId} ${t.turnId ?? ''}`, turn: t })),
        { title: 'Fleet: cancel which Turn?' },
      );
      picked?.turn.cancel.cancel();
      return;
    }
    // A Turn this window did not start (a script, another command): cancel it by id.
    const sessionId = this.sessionId;
    const history: TurnSummary[] = sessionId ? await this.requireApi().history(sessionId, 20) : [];
    const runningTurn = history.find((t) => t.status === 'running');
    const turnId =
      runningTurn?.turnId ??
      (await vscode.window.showInputBox({ title: 'Fleet: cancel a Turn', prompt: 'No Turn of this window is running. Turn id:' }));
    if (turnId) {
      await this.requireApi().cancelTurn(turnId);
      void vscode.window.showInformationMessage(`Fleet: cancelled Turn ${turnId}`);
    }
  }

  private async pickArtifact(artifacts: Artifact[]): Promise<Artifact | undefined> {
    if (artifacts.length === 0) {
      void vscode.window.showInformationMessage('Fleet: the Session has no artifacts yet');
      return undefined;
    }
    const picked = await vscode.window.showQuickPick(
      artifacts.map((a) => ({
        label: a.path.replace(/^artifacts\//, ''),
        description: formatBytes(a.sizeBytes),
        detail: [a.turnId && `turn ${a.turnId}`, a.agentId && `agent ${a.agentId}`].filter(Boolean).join(' · ') || undefined,
        artifact: a,
      })),
      { title: 'Fleet: artifacts', matchOnDetail: true },
    );
    return picked?.artifact;
  }

  private async openDocument(uri: string): Promise<void> {
    const document = await vscode.workspace.openTextDocument(vscode.Uri.parse(uri, true));
    await vscode.window.showTextDocument(document, { preview: true });
  }

  private async openArtifact(arg?: { uri?: string; path?: string }): Promise<void> {
    if (arg?.uri && isFleetUri(arg.uri)) {
      return this.openDocument(arg.uri);
    }
    const sessionId = await this.ensureSession();
    if (!sessionId) {
      return;
    }
    if (arg?.path) {
      return this.openDocument(artifactUri(sessionId, arg.path));
    }
    const artifact = await this.pickArtifact(await this.requireApi().listArtifacts(sessionId));
    if (artifact) {
      await this.openDocument(artifact.uri);
    }
  }

  private async saveArtifact(arg?: { uri?: string }): Promise<void> {
    let uri = arg?.uri;
    if (!uri) {
      const active = vscode.window.activeTextEditor?.document.uri;
      if (active?.scheme === URI_SCHEME && parseFleetUri(active.toString())?.kind === 'artifact') {
        uri = active.toString();
      } else {
        const sessionId = await this.ensureSession();
        uri = sessionId ? (await this.pickArtifact(await this.requireApi().listArtifacts(sessionId)))?.uri : undefined;
      }
    }
    if (!uri) {
      return;
    }
    const parsed = parseFleetUri(uri);
    const name = parsed?.kind === 'artifact' ? parsed.path.split('/').pop() : 'artifact';
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
    const target = await vscode.window.showSaveDialog({
      title: 'Fleet: save the artifact as',
      defaultUri: folder ? vscode.Uri.joinPath(folder, name ?? 'artifact') : undefined,
    });
    if (!target) {
      return;
    }
    const saved = await this.requireApi().saveArtifact(uri, target.toString());
    void vscode.window.showInformationMessage(`Fleet: saved ${formatBytes(saved.sizeBytes)} to ${target.fsPath}`);
  }

  /** A trace reference: the argument, else a Turn of the current Session picked from its history. */
  private async pickTrace(arg?: { traceId?: string; turnId?: string }, title = 'Fleet: which Turn?'): Promise<{ traceId: string } | { turnId: string } | undefined> {
    if (arg?.traceId) {
      return { traceId: arg.traceId };
    }
    if (arg?.turnId) {
      return { turnId: arg.turnId };
    }
    const sessionId = await this.ensureSession();
    if (!sessionId) {
      return undefined;
    }
    const turns = await this.requireApi().history(sessionId, 50);
    if (turns.length === 0) {
      void vscode.window.showInformationMessage(`Fleet: ${sessionId} has no Turns yet`);
      return undefined;
    }
    const picked = await vscode.window.showQuickPick(
      [...turns].reverse().map((t) => ({
        label: truncate(t.task, 80),
        description: `${t.status}${t.route ? ' · ' + t.route : ''}`,
        detail: t.answer ? truncate(t.answer, 120) : t.turnId,
        turn: t,
      })),
      { title, matchOnDescription: true, matchOnDetail: true },
    );
    if (!picked) {
      return undefined;
    }
    return picked.turn.traceId ? { traceId: picked.turn.traceId } : { turnId: picked.turn.turnId };
  }

  private async showTrace(arg?: { traceId?: string; turnId?: string }): Promise<void> {
    const ref = await this.pickTrace(arg, 'Fleet: show the trace of which Turn?');
    if (!ref) {
      return;
    }
    const trace = await this.requireApi().trace(ref);
    await this.openDocument(trace.uri);
  }

  private async labelTrace(arg?: { traceId?: string }): Promise<void> {
    let traceId = arg?.traceId;
    if (!traceId) {
      const active = vscode.window.activeTextEditor?.document.uri;
      const parsed = active?.scheme === URI_SCHEME ? parseFleetUri(active.toString()) : undefined;
      if (parsed?.kind === 'trace') {
        traceId = parsed.traceId;
      } else {
        const ref = await this.pickTrace(undefined, 'Fleet: label the trace of which Turn?');
        traceId = ref && ('traceId' in ref ? ref.traceId : (await this.requireApi().trace(ref)).traceId);
      }
    }
    if (!traceId) {
      return;
    }
    const status = await vscode.window.showQuickPick([...LABEL_STATUSES], { title: `Fleet: label trace ${traceId}` });
    if (!status) {
      return;
    }
    const answer = await vscode.window.showInputBox({
      title: 'Fleet: expected answer (optional)',
      value: this.lastTurn?.traceId === traceId ? (this.lastTurn.answer ?? '') : '',
    });
    if (answer === undefined) {
      return;
    }
    const valuesText = await vscode.window.showInputBox({
      title: 'Fleet: expected values (optional, comma-separated)',
      prompt: status === 'approved' ? 'An approved label needs an expected answer or values' : undefined,
    });
    if (valuesText === undefined) {
      return;
    }
    const values = splitValues(valuesText);
    const route = await vscode.window.showQuickPick(['(any)', ...ROUTES], { title: 'Fleet: expected route' });
    if (route === undefined) {
      return;
    }
    const result = await this.requireApi().labelTrace({
      traceId,
      status,
      ...(answer ? { answer } : {}),
      ...(values.length > 0 ? { values } : {}),
      ...(route !== '(any)' ? { route } : {}),
    });
    void vscode.window.showInformationMessage(`Fleet: labelled ${result.traceId}: ${JSON.stringify(result.labels)}`);
  }
}

function sessionItem(s: SessionInfo): vscode.QuickPickItem {
  return {
    label: s.sessionId,
    description: `${s.mode} · ${s.turnCount} turns${s.dataset ? ' · ' + s.dataset.path : ''}`,
    detail: `updated ${s.updatedAt}`,
  };
}

function formatBytes(n: number): string {
  if (n < 1024) {
    return `${n} B`;
  }
  if (n < 1024 * 1024) {
    return `${(n / 1024).toFixed(1)} KB`;
  }
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

let extension: FleetExtension | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  extension = new FleetExtension(context);
  context.subscriptions.push(extension);
  extension.registerCommands();
  // Awaited so the server's commands are registered before VS Code runs the one that activated us.
  await extension.start();
}

export async function deactivate(): Promise<void> {
  await extension?.stop();
  extension = undefined;
}
