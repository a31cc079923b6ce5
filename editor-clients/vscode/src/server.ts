// The connection to `fleet-lsp serve`: start, stop, restart on a settings change, the server
// check after `initialize`, and the server's notifications as events. vscode-languageclient
// (>= 10) registers the server's `fleet.*` commands and, from its
// `workspace.textDocumentContent {schemes: ["fleet"]}` capability (LSP 3.18), the read-only
// `fleet:` document provider. Logging: the "Fleet" output channel gets the server's stderr (the
// client pipes it there), this client's own lines, and the JSON-RPC traffic at the level of
// `fleet.trace.server` (off | messages | verbose; languageclient reads `<id>.trace.server`).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
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
import { routeServerCommand } from './commands';
import { FleetConfig, didChangeConfigurationParams, needsRestart, readConfig } from './config';
import { errorDocument, formatError } from './errors';
import {
  ArtifactDidChange,
  FleetServerCapability,
  Notifications,
  PROTOCOL_VERSION,
  SessionDidChange,
  TurnEvent,
  URI_SCHEME,
  initializationOptions,
  isServerCommand,
} from './protocol';
import { WORKSPACE_CONFIG_FILES, serverLaunch, trustGrantedPrompt } from './trust';
import { LogLevel, stderrLevel } from './words';

function lines(input: Readable, onLine: (line: string) => void): void {
  createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 }).on('line', onLine);
}

export class FleetServer implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private api: FleetApi | undefined;
  private fallbackProvider: vscode.Disposable | undefined;
  config: FleetConfig;
  readonly onTurnEvent = new vscode.EventEmitter<TurnEvent>();
  readonly onSessionChange = new vscode.EventEmitter<SessionDidChange>();
  readonly onArtifactChange = new vscode.EventEmitter<ArtifactDidChange>();
  /** Fires when the server started (true) or stopped (false). */
  readonly onRunning = new vscode.EventEmitter<boolean>();
  private readonly disposables: vscode.Disposable[];
  /** Whether the running server was started ignoring the workspace's config files (untrusted). */
  private ignoringWorkspaceConfig = false;
  private untrustedNoticeShown = false;

  constructor(
    readonly output: vscode.LogOutputChannel,
    private readonly currentSession: () => string | undefined,
  ) {
    this.config = this.readConfig();
    this.disposables = [
      this.onTurnEvent,
      this.onSessionChange,
      this.onArtifactChange,
      this.onRunning,
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration('fleet')) {
          void this.configurationChanged();
        }
      }),
      vscode.workspace.onDidGrantWorkspaceTrust(() => void this.trustGranted()),
    ];
  }

  dispose(): void {
    this.fallbackProvider?.dispose();
    vscode.Disposable.from(...this.disposables).dispose();
  }

  get running(): boolean {
    return this.client?.state === State.Running;
  }

  /** The server's process id (for logs and the end-to-end test), when it runs. */
  get pid(): number | undefined {
    return (this.client as unknown as { _serverProcess?: { pid?: number } } | undefined)?._serverProcess?.pid;
  }

  /** The fleet features the running server lists (`capabilities.experimental.fleet.features`). */
  features(): string[] {
    const experimental = this.client?.initializeResult?.capabilities.experimental as { fleet?: FleetServerCapability } | undefined;
    return experimental?.fleet?.features ?? [];
  }

  requireApi(): FleetApi {
    if (!this.api || !this.client || this.client.state !== State.Running) {
      throw new Error("the Fleet server is not running (see 'Fleet: Show Output'; 'Fleet: Restart Server' restarts it)");
    }
    return this.api;
  }

  private readConfig(): FleetConfig {
    const { config, problems } = readConfig((key) => vscode.workspace.getConfiguration('fleet').get(key));
    for (const problem of problems) {
      this.output.warn(problem.message);
      void vscode.window.showWarningMessage(`Fleet: ${problem.message}`);
    }
    return config;
  }

  async start(): Promise<void> {
    const [command, ...args] = this.config.serverCommand;
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    // Restricted Mode: the server reads neither the workspace's config/fleet.toml nor its .env.
    const launch = serverLaunch(process.env, vscode.workspace.isTrusted, this.workspaceConfigFiles(cwd));
    this.ignoringWorkspaceConfig = launch.ignoresWorkspaceConfig;
    if (launch.ignoresWorkspaceConfig) {
      this.output.info('the workspace is not trusted: the server ignores its config/fleet.toml and .env');
    }
    if (launch.notice && !this.untrustedNoticeShown) {
      this.untrustedNoticeShown = true;
      void vscode.window.showInformationMessage(launch.notice, 'Manage Workspace Trust').then((choice) => {
        if (choice) {
          void vscode.commands.executeCommand('workbench.trust.manage');
        }
      });
    }
    // The command runs verbatim and must speak LSP on stdin/stdout (`fleet-lsp serve` does).
    const serverOptions: ServerOptions = { command, args, options: { cwd, env: launch.env } };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [], // no text synchronization: fleet-lsp offers no language features
      // The tree view and the progress notification need every Turn event, so the client always
      // asks for them; `fleet.turnEvents` only decides whether they are logged.
      initializationOptions: initializationOptions({ ...this.config, turnEvents: true }),
      outputChannel: this.output,
      traceOutputChannel: this.output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      // the server logs to stderr at every level: each line goes to the channel at its own level
      // (an INFO line is not an [error]); stdout carries LSP and never reaches these handlers
      stdioOptions: {
        stdout: (input, channel) => lines(input, (line) => channel.info(line)),
        stderr: (input, channel) => {
          let level: LogLevel | undefined;
          lines(input, (line) => {
            level = stderrLevel(line, level);
            channel[level](line);
          });
        },
      },
      connectionOptions: { maxRestartCount: 2 },
      middleware: {
        executeCommand: (cmd, cmdArgs) => this.executeServerCommand(cmd, cmdArgs),
        provideTextDocumentContent: (uri, token) => this.provideDocument(uri, token),
      },
    };
    const client = new LanguageClient('fleet', 'Fleet', serverOptions, clientOptions);
    client.onNotification(Notifications.turnDidEmit, (event: TurnEvent) => this.onTurnEvent.fire(event));
    client.onNotification(Notifications.sessionDidChange, (change: SessionDidChange) => this.onSessionChange.fire(change));
    client.onNotification(Notifications.artifactDidChange, (change: ArtifactDidChange) => this.onArtifactChange.fire(change));
    client.onDidChangeState((e) => {
      this.output.info(`server ${State[e.oldState]} -> ${State[e.newState]}`);
      if (e.newState === State.Stopped) {
        this.onRunning.fire(false);
      }
    });
    this.client = client;
    this.api = new FleetApi(client);
    this.output.info(`starting ${this.config.serverCommand.join(' ')} in ${cwd ?? process.cwd()}`);
    try {
      await client.start();
    } catch (error) {
      this.output.error(formatError(error, `cannot start ${this.config.serverCommand.join(' ')}`));
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
    const info = client.initializeResult?.serverInfo;
    this.output.info(`server ${info?.name ?? '?'} ${info?.version ?? ''} running (pid ${this.pid ?? '?'})`);
    this.checkServer(client);
    this.onRunning.fire(true);
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

  async restart(): Promise<void> {
    await this.stop();
    this.config = this.readConfig();
    await this.start();
  }

  /** The workspace configuration files present in the server's working directory. */
  private workspaceConfigFiles(cwd: string | undefined): string[] {
    return cwd ? WORKSPACE_CONFIG_FILES.filter((name) => existsSync(join(cwd, name))) : [];
  }

  /** Trust was granted: offer a restart that reads the workspace's configuration files. */
  private async trustGranted(): Promise<void> {
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const prompt = trustGrantedPrompt(this.ignoringWorkspaceConfig && this.client !== undefined, this.workspaceConfigFiles(cwd));
    if (!prompt) {
      return;
    }
    const choice = await vscode.window.showInformationMessage(prompt, 'Restart');
    if (choice === 'Restart') {
      await this.restart();
    }
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
    // A server without `workspace.textDocumentContent` gets the fallback over `fleet/artifact/read`.
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

  private async configurationChanged(): Promise<void> {
    const before = this.config;
    const after = this.readConfig();
    if (needsRestart(before, after)) {
      const choice = await vscode.window.showInformationMessage(
        'Fleet: restart the server to use the new fleet.serverCommand?',
        'Restart',
      );
      if (choice === 'Restart') {
        await this.restart();
      }
      return;
    }
    this.config = after;
    if (JSON.stringify(before.settings) !== JSON.stringify(after.settings) && this.running) {
      await this.client?.sendNotification(DidChangeConfigurationNotification.type, didChangeConfigurationParams(after));
    }
  }

  /** Server commands (registered by languageclient) come here first. */
  private async executeServerCommand(command: string, args: unknown[]): Promise<unknown> {
    if (!isServerCommand(command)) {
      return this.requireApi().executeCommandWith(command, args);
    }
    const route = routeServerCommand(command, args, this.currentSession());
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
}
