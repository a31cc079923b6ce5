// The "Fleet" view in the activity bar: Sessions → Turns (status, route, duration) → the root agent
// (its children nested under it, live while running), the Turn's artifacts and its trace. It
// refreshes from fleet/session/didChange, fleet/artifact/didChange and fleet/turn/didEmit.
import * as vscode from 'vscode';
import { UI_COMMANDS, UiCommandName } from '../commands';
import { Fleet, Handler, formatBytes } from '../fleet';
import { LiveTurn, childAgents } from '../live';
import { artifactsOfTurn } from '../answer';
import { formatError } from '../errors';
import { Artifact, SessionInfo, TurnSummary } from '../protocol';
import { agentView, turnView } from '../treeModel';
import { visible } from '../progress';

export const VIEW_ID = 'fleet.sessions';

export type FleetNode =
  | { kind: 'session'; id: string; sessionId: string; info: SessionInfo; parent?: undefined }
  | { kind: 'turn'; id: string; sessionId: string; turnId: string; parent: string }
  | { kind: 'agent'; id: string; sessionId: string; turnId: string; agentId: string; parent: string }
  | { kind: 'artifact'; id: string; sessionId: string; turnId: string; uri: string; path: string; sizeBytes?: number; parent: string }
  | { kind: 'trace'; id: string; sessionId: string; turnId: string; traceId?: string; parent: string }
  | { kind: 'message'; id: string; text: string; parent?: string };

interface SessionData {
  turns: TurnSummary[];
  artifacts: Artifact[];
}

/** Sessions shown, and Turns per Session (newest first): bounded. */
const MAX_TURNS = 50;

export class FleetTree implements vscode.TreeDataProvider<FleetNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<FleetNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly nodes = new Map<string, FleetNode>();
  private sessions: SessionInfo[] | undefined;
  private readonly data = new Map<string, Promise<SessionData>>();
  /** The last stored summary of each Turn shown (bounded by the Sessions' MAX_TURNS). */
  private readonly summaries = new Map<string, TurnSummary>();
  private timer: NodeJS.Timeout | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  readonly view: vscode.TreeView<FleetNode>;

  constructor(private readonly fleet: Fleet) {
    this.view = vscode.window.createTreeView(VIEW_ID, { treeDataProvider: this, showCollapseAll: true });
    const server = fleet.server;
    this.disposables.push(
      this.changed,
      this.view,
      server.onSessionChange.event((change) => {
        this.sessions = undefined;
        this.data.delete(change.sessionId);
        this.schedule();
      }),
      server.onArtifactChange.event((change) => {
        this.data.delete(change.sessionId);
        this.schedule();
      }),
      fleet.onLiveChange.event((turnId) => {
        const live = fleet.live.get(turnId);
        if (live && live.status !== 'running') {
          this.data.delete(live.sessionId); // its outcome, artifacts and trace are stored now
        }
        this.schedule();
      }),
      fleet.onSessionSelected.event(() => this.schedule()),
      server.onRunning.event(() => this.refresh()),
    );
  }

  dispose(): void {
    clearTimeout(this.timer);
    vscode.Disposable.from(...this.disposables).dispose();
  }

  commands(): Partial<Record<UiCommandName, Handler>> {
    return { refreshView: () => this.refresh() };
  }

  refresh(): void {
    this.sessions = undefined;
    this.data.clear();
    this.summaries.clear();
    this.changed.fire(undefined);
  }

  /** Coalesce bursts of events into at most one refresh every 300 ms. */
  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.changed.fire(undefined);
    }, 300);
  }

  private node<N extends FleetNode>(value: N): N {
    const existing = this.nodes.get(value.id) as N | undefined;
    if (existing) {
      Object.assign(existing, value);
      return existing;
    }
    this.nodes.set(value.id, value);
    if (this.nodes.size > 5000) {
      this.nodes.clear(); // bounded; nodes are rebuilt on the next getChildren
      this.nodes.set(value.id, value);
    }
    return value;
  }

  private sessionData(sessionId: string): Promise<SessionData> {
    let pending = this.data.get(sessionId);
    if (!pending) {
      const api = this.fleet.api();
      pending = Promise.all([api.history(sessionId, MAX_TURNS), api.listArtifacts(sessionId)]).then(([turns, artifacts]) => {
        for (const t of turns) {
          this.summaries.set(t.turnId, t);
        }
        return { turns, artifacts };
      });
      pending.catch(() => this.data.delete(sessionId));
      this.data.set(sessionId, pending);
    }
    return pending;
  }

  async getChildren(element?: FleetNode): Promise<FleetNode[]> {
    try {
      return await this.children(element);
    } catch (error) {
      return [this.node({ kind: 'message', id: `message:${element?.id ?? ''}`, text: formatError(error), parent: element?.id })];
    }
  }

  private async children(element?: FleetNode): Promise<FleetNode[]> {
    if (!this.fleet.server.running) {
      return [];
    }
    if (!element) {
      this.sessions ??= await this.fleet.api().listSessions();
      return this.sessions.map((info) => this.node({ kind: 'session', id: `s:${info.sessionId}`, sessionId: info.sessionId, info }));
    }
    switch (element.kind) {
      case 'session': {
        const { turns } = await this.sessionData(element.sessionId);
        const ids = new Set(turns.map((t) => t.turnId));
        const live = this.fleet.live.forSession(element.sessionId).filter((t) => !ids.has(t.turnId));
        const all = [...live.map((t) => t.turnId).reverse(), ...[...turns].reverse().map((t) => t.turnId)];
        return all.map((turnId) => this.node({ kind: 'turn', id: `t:${turnId}`, sessionId: element.sessionId, turnId, parent: element.id }));
      }
      case 'turn': {
        const { turns, artifacts } = await this.sessionData(element.sessionId);
        const summary = turns.find((t) => t.turnId === element.turnId);
        const live = this.fleet.live.get(element.turnId);
        const nodes: FleetNode[] = [
          this.node({ kind: 'agent', id: `a:${element.turnId}:root`, sessionId: element.sessionId, turnId: element.turnId, agentId: 'root', parent: element.id }),
        ];
        const seen = new Set<string>();
        for (const a of artifactsOfTurn(artifacts, element.turnId, live?.result?.artifacts, summary?.artifactPaths)) {
          seen.add(a.path);
          nodes.push(this.artifactNode(element, a.path, a.uri, a.sizeBytes));
        }
        for (const path of live?.artifacts ?? []) {
          if (!seen.has(path)) {
            const result = live?.result?.artifacts.find((a) => a.path === path);
            nodes.push(this.artifactNode(element, path, result?.uri, result?.sizeBytes));
          }
        }
        const omitted = live?.result?.artifactsOmitted ?? summary?.artifactsOmitted ?? 0;
        if (omitted > 0) {
          nodes.push(this.node({ kind: 'message', id: `more:${element.turnId}`, text: `${omitted} more artifacts (see the workspace)`, parent: element.id }));
        }
        const status = live?.status ?? summary?.status;
        if (status && status !== 'running') {
          const traceId = summary?.traceId ?? live?.result?.traceId ?? undefined;
          nodes.push(this.node({ kind: 'trace', id: `tr:${element.turnId}`, sessionId: element.sessionId, turnId: element.turnId, traceId, parent: element.id }));
        }
        return nodes;
      }
      case 'agent': {
        const live = this.fleet.live.get(element.turnId);
        return live
          ? childAgents(live, element.agentId).map((a) =>
              this.node({ kind: 'agent', id: `a:${element.turnId}:${a.agentId}`, sessionId: element.sessionId, turnId: element.turnId, agentId: a.agentId, parent: element.id }),
            )
          : [];
      }
      default:
        return [];
    }
  }

  private artifactNode(turn: { id: string; sessionId: string; turnId: string }, path: string, uri: string | undefined, sizeBytes: number | undefined): FleetNode {
    const rel = path.replace(/^artifacts\//, '');
    const artifactUri = uri ?? `fleet:/sessions/${encodeURIComponent(turn.sessionId)}/artifacts/${rel.split('/').map(encodeURIComponent).join('/')}`;
    return this.node({ kind: 'artifact', id: `f:${turn.turnId}:${path}`, sessionId: turn.sessionId, turnId: turn.turnId, uri: artifactUri, path, sizeBytes, parent: turn.id });
  }

  getParent(element: FleetNode): FleetNode | undefined {
    return element.parent ? this.nodes.get(element.parent) : undefined;
  }

  getTreeItem(element: FleetNode): vscode.TreeItem {
    switch (element.kind) {
      case 'session': {
        const current = element.sessionId === this.fleet.sessionId;
        const item = new vscode.TreeItem(visible(element.sessionId), vscode.TreeItemCollapsibleState.Collapsed);
        item.id = element.id;
        item.description = `${current ? 'current · ' : ''}${element.info.mode} · ${element.info.turnCount} turns`;
        item.tooltip = `Session ${element.sessionId}\nupdated ${element.info.updatedAt}`;
        item.iconPath = new vscode.ThemeIcon(current ? 'comment-discussion' : 'comment');
        item.contextValue = current ? 'fleet.session.current' : 'fleet.session';
        return item;
      }
      case 'turn': {
        const summary = this.summaryOf(element);
        const live = this.fleet.live.get(element.turnId);
        const view = turnView(summary, live);
        const expand = view.status === 'running' ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.Collapsed;
        const item = new vscode.TreeItem(view.label, expand);
        item.id = element.id;
        item.description = view.description;
        item.tooltip = view.tooltip;
        item.iconPath = new vscode.ThemeIcon(view.icon);
        item.contextValue = view.status === 'running' ? 'fleet.turn.running' : 'fleet.turn.done';
        if (view.status !== 'running') {
          item.command = { command: UI_COMMANDS.showAnswer.id, title: 'Show Answer', arguments: [{ sessionId: element.sessionId, turnId: element.turnId }] };
        }
        return item;
      }
      case 'agent': {
        const live: LiveTurn | undefined = this.fleet.live.get(element.turnId);
        const agent = live?.agents.get(element.agentId) ?? { agentId: element.agentId, state: this.summaryOf(element)?.status === 'completed' ? 'succeeded' : (this.summaryOf(element)?.status ?? 'unknown') };
        const view = agentView(agent);
        const hasChildren = live ? childAgents(live, element.agentId).length > 0 : false;
        const item = new vscode.TreeItem(view.label, hasChildren ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None);
        item.id = element.id;
        item.description = view.description;
        item.tooltip = agent.subtask ?? agent.agentId;
        item.iconPath = new vscode.ThemeIcon(view.icon);
        item.contextValue = 'fleet.agent';
        return item;
      }
      case 'artifact': {
        const item = new vscode.TreeItem(visible(element.path.replace(/^artifacts\//, '')), vscode.TreeItemCollapsibleState.None);
        item.id = element.id;
        item.description = element.sizeBytes !== undefined ? formatBytes(element.sizeBytes) : undefined;
        item.resourceUri = vscode.Uri.parse(element.uri, true);
        item.iconPath = vscode.ThemeIcon.File;
        item.contextValue = 'fleet.artifact';
        item.command = { command: UI_COMMANDS.openArtifact.id, title: 'Open Artifact', arguments: [{ uri: element.uri }] };
        return item;
      }
      case 'trace': {
        const item = new vscode.TreeItem('trace', vscode.TreeItemCollapsibleState.None);
        item.id = element.id;
        item.description = element.traceId;
        item.iconPath = new vscode.ThemeIcon('list-tree');
        item.contextValue = 'fleet.trace';
        item.command = { command: UI_COMMANDS.showTrace.id, title: 'Show Trace', arguments: [element.traceId ? { traceId: element.traceId } : { turnId: element.turnId }] };
        return item;
      }
      case 'message': {
        const item = new vscode.TreeItem(element.text, vscode.TreeItemCollapsibleState.None);
        item.iconPath = new vscode.ThemeIcon('warning');
        return item;
      }
    }
  }

  private summaryOf(element: { turnId: string }): TurnSummary | undefined {
    return this.summaries.get(element.turnId);
  }

  /** The tree as text, expanding everything the provider knows (for tests and bug reports). */
  async snapshot(element?: FleetNode, depth = 0): Promise<string[]> {
    const lines: string[] = [];
    for (const child of await this.getChildren(element)) {
      const item = this.getTreeItem(child);
      const label = typeof item.label === 'string' ? item.label : (item.label?.label ?? '');
      lines.push(`${'  '.repeat(depth)}${label}${item.description ? ` [${String(item.description)}]` : ''}`);
      if (depth < 4) {
        lines.push(...(await this.snapshot(child, depth + 1)));
      }
    }
    return lines;
  }

  /** Reveal and expand a Turn's row (its agents, artifacts and trace). */
  async revealTurn(sessionId: string, turnId: string): Promise<void> {
    const session = (await this.getChildren()).find((n) => n.kind === 'session' && n.sessionId === sessionId);
    if (!session) return;
    const turn = (await this.getChildren(session)).find((n) => n.kind === 'turn' && n.turnId === turnId);
    if (turn) {
      await this.view.reveal(turn, { select: true, focus: true, expand: 2 });
    }
  }
}
