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
import { LABEL_ICONS, agentView, labelStatuses, traceDescription, turnView } from '../treeModel';
import { visible } from '../progress';
import { plural } from '../words';
import { SessionFilter } from '../api';
import { FILTERS, FILTER_LABELS, FilterName, filterDetail, sessionFilterParams, thisMachine } from '../filters';

export const VIEW_ID = 'fleet.sessions';

export type FleetNode =
  | { kind: 'session'; id: string; sessionId: string; info: SessionInfo; parent?: undefined }
  | { kind: 'turn'; id: string; sessionId: string; turnId: string; parent: string }
  | { kind: 'agent'; id: string; sessionId: string; turnId: string; agentId: string; parent: string }
  | { kind: 'artifact'; id: string; sessionId: string; turnId: string; uri: string; path: string; sizeBytes?: number; parent: string }
  | { kind: 'trace'; id: string; sessionId: string; turnId: string; traceId?: string; labelStatus?: string; parent: string }
  | { kind: 'files'; id: string; sessionId: string; parent: string }
  | { kind: 'file'; id: string; sessionId: string; path: string; sizeBytes: number; dataset: boolean; parent: string }
  | { kind: 'placeholder'; id: string; sessionId: string; parent: string }
  | { kind: 'message'; id: string; text: string; parent?: string };

/** What the view shows, for the welcome content (`fleet.viewState`) and the end-to-end test. */
export type ViewState = 'loading' | 'ready' | 'stopped';

/** Files listed under a Session's Files node. */
const MAX_FILES = 200;

interface SessionData {
  turns: TurnSummary[];
  artifacts: Artifact[];
  /** Each labelled trace's review status (`fleet/trace/list`'s `labelStatus`). */
  labels: Map<string, string>;
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
  /** Each Session's number of Turns (every status), from its newest Turn's number. */
  private readonly turnTotals = new Map<string, number>();
  private state: ViewState | undefined;
  private listed: number | undefined;
  /** The view states in order, with the number of Sessions listed when ready (bounded; e2e). */
  readonly states: string[] = [];
  private loadingDone: (() => void) | undefined;
  /** Turns whose running row was revealed, and children revealed (once each). */
  private readonly revealed = new Set<string>();
  private readonly refetched = new Set<string>();

  constructor(private readonly fleet: Fleet) {
    this.view = vscode.window.createTreeView(VIEW_ID, { treeDataProvider: this, showCollapseAll: true });
    this.setState('loading');
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
          this.turnTotals.delete(live.sessionId);
        }
        if (live && live.status === 'running' && !this.summaries.has(turnId) && !this.refetched.has(turnId)) {
          this.refetched.add(turnId); // a Turn started after the history was read: read it again for its number
          this.data.delete(live.sessionId);
        }
        this.schedule();
        if (live && live.status === 'running') {
          void this.revealRunning(live.sessionId, turnId);
        }
      }),
      fleet.onLabelled.event((sessionId) => {
        this.data.delete(sessionId); // its traces' labels changed
        this.schedule();
      }),
      fleet.onSessionSelected.event((sessionId) => {
        this.schedule();
        if (sessionId) void this.revealSession(sessionId);
      }),
      server.onRunning.event((running) => {
        this.setState(running ? 'loading' : 'stopped');
        this.refresh();
      }),
    );
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.loadingDone?.();
    vscode.Disposable.from(...this.disposables).dispose();
  }

  commands(): Partial<Record<UiCommandName, Handler>> {
    return {
      refreshView: () => this.refresh(),
      filterSessions: (arg?: { filter?: FilterName }) => this.pickFilter(arg?.filter),
    };
  }

  private filter: FilterName = 'all';

  /** The filter's `fleet/session/list` params ({} for "all", or a server without filters). */
  private sessionFilter(): { filter?: SessionFilter } {
    if (this.filter === 'all' || !this.fleet.server.features().includes('sessions.filter')) return {};
    return { filter: sessionFilterParams(this.filter, thisMachine(), new Date()) };
  }

  /** "Fleet: Filter Sessions": All / This machine / Mine / Updated in the last 7 days, shown in
   * the view's description. */
  private async pickFilter(name?: FilterName): Promise<FilterName | undefined> {
    if (!this.fleet.server.features().includes('sessions.filter')) {
      void vscode.window.showInformationMessage('Fleet: this server cannot filter Sessions (it does not list sessions.filter)');
      return undefined;
    }
    let chosen = name;
    if (!chosen) {
      const me = thisMachine();
      const picked = await vscode.window.showQuickPick(
        FILTERS.map((f) => ({ label: FILTER_LABELS[f], description: [f === this.filter ? 'current' : undefined, filterDetail(f, me)].filter(Boolean).join(' · '), f })),
        { title: 'Fleet: show which Sessions?' },
      );
      chosen = picked?.f;
    }
    if (!chosen) return undefined;
    this.filter = chosen;
    this.view.description = chosen === 'all' ? undefined : FILTER_LABELS[chosen];
    this.refresh();
    return chosen;
  }

  /** Each listed Session's number of Turns (all statuses): its newest Turn's number. */
  private async loadTotals(sessions: SessionInfo[]): Promise<void> {
    const api = this.fleet.api();
    await Promise.all(
      sessions.slice(0, 100).map(async (s) => {
        try {
          const [newest] = await api.history(s.sessionId, 1);
          this.turnTotals.set(s.sessionId, newest?.seq ?? 0);
        } catch {
          // the stored count of completed Turns is shown
        }
      }),
    );
  }

  /** Reveal a running Turn of this window, expanded with its agents, and each new child agent. */
  private async revealRunning(sessionId: string, turnId: string): Promise<void> {
    const live = this.fleet.live.get(turnId);
    if (!live || !this.view.visible) return;
    const children = [...live.agents.values()].filter((a) => a.agentId !== 'root').map((a) => a.agentId);
    const todo = [`t:${turnId}`, ...children.map((c) => `a:${turnId}:${c}`)].filter((id) => !this.revealed.has(id));
    if (todo.length === 0) return;
    try {
      const session = (await this.getChildren()).find((n) => n.kind === 'session' && n.sessionId === sessionId);
      if (!session) return;
      const turn = (await this.getChildren(session)).find((n) => n.kind === 'turn' && n.turnId === turnId);
      if (!turn) return;
      if (!this.revealed.has(turn.id)) {
        await this.view.reveal(turn, { select: false, focus: false, expand: 2 });
        this.revealed.add(turn.id);
      }
      for (const agentId of children) {
        const node = this.nodes.get(`a:${turnId}:${agentId}`) ?? (await this.findAgent(turn, agentId));
        if (node && !this.revealed.has(node.id)) {
          await this.view.reveal(node, { select: false, focus: false, expand: true });
          this.revealed.add(node.id);
        }
      }
      if (this.revealed.size > 2000) this.revealed.clear();
    } catch {
      // the view is being rebuilt: the next event reveals it
    }
  }

  private async findAgent(turn: FleetNode, agentId: string): Promise<FleetNode | undefined> {
    const queue: FleetNode[] = (await this.getChildren(turn)).filter((n) => n.kind === 'agent');
    while (queue.length > 0) {
      const next = queue.shift()!;
      if (next.kind === 'agent' && next.agentId === agentId) return next;
      queue.push(...(await this.getChildren(next)));
    }
    return undefined;
  }

  /** Reveal the current Session's row, expanded. */
  private async revealSession(sessionId: string): Promise<void> {
    if (!this.view.visible) return;
    try {
      const session = (await this.getChildren()).find((n) => n.kind === 'session' && n.sessionId === sessionId);
      if (session) await this.view.reveal(session, { select: false, focus: false, expand: true });
    } catch {
      // rebuilt meanwhile
    }
  }

  refresh(): void {
    this.sessions = undefined;
    this.data.clear();
    this.summaries.clear();
    this.turnTotals.clear();
    this.changed.fire(undefined);
  }

  /** The server failed to start (no Sessions can be listed): the welcome says so. */
  stopped(): void {
    this.setState('stopped');
  }

  /** Loading shows a progress bar in the view and its message, never the "no Sessions" welcome
   * (that shows only once the list came back empty: `fleet.viewState == ready`). */
  private setState(state: ViewState, sessions?: number): void {
    if (state === this.state && (state !== 'ready' || sessions === this.listed)) return;
    this.state = state;
    this.listed = sessions;
    this.states.push(state === 'ready' ? `ready:${sessions ?? 0}` : state);
    if (this.states.length > 50) this.states.splice(0, this.states.length - 50);
    void vscode.commands.executeCommand('setContext', 'fleet.viewState', state);
    this.view.message = state === 'loading' ? 'Loading Sessions…' : undefined;
    if (state === 'loading' && !this.loadingDone) {
      void vscode.window.withProgress({ location: { viewId: VIEW_ID } }, () => new Promise<void>((resolve) => (this.loadingDone = resolve)));
    } else if (state !== 'loading') {
      this.loadingDone?.();
      this.loadingDone = undefined;
    }
  }

  /** Coalesce bursts of events into at most one refresh every 300 ms. */
  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.changed.fire(undefined);
    }, 150);
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
      // labels are a mark, not the tree's substance: a server that cannot list traces shows none
      const traces = api.listTraces(sessionId, MAX_TURNS).catch(() => []);
      pending = Promise.all([api.history(sessionId, MAX_TURNS), api.listArtifacts(sessionId), traces]).then(([turns, artifacts, refs]) => {
        for (const t of turns) {
          this.summaries.set(t.turnId, t);
        }
        return { turns, artifacts, labels: labelStatuses(refs) };
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
      if (!this.sessions) {
        this.setState('loading');
        const sessions = await this.fleet.api().listSessions(this.sessionFilter());
        await this.loadTotals(sessions);
        this.sessions = sessions;
      }
      this.setState('ready', this.sessions.length);
      return this.sessions.map((info) => this.node({ kind: 'session', id: `s:${info.sessionId}`, sessionId: info.sessionId, info }));
    }
    switch (element.kind) {
      case 'session': {
        const { turns } = await this.sessionData(element.sessionId);
        const ids = new Set(turns.map((t) => t.turnId));
        const live = this.fleet.live.forSession(element.sessionId).filter((t) => !ids.has(t.turnId));
        const all = [...live.map((t) => t.turnId).reverse(), ...[...turns].reverse().map((t) => t.turnId)];
        const nodes: FleetNode[] = [this.node({ kind: 'files', id: `files:${element.sessionId}`, sessionId: element.sessionId, parent: element.id })];
        if (all.length === 0) {
          nodes.push(this.node({ kind: 'placeholder', id: `run:${element.sessionId}`, sessionId: element.sessionId, parent: element.id }));
        }
        return [...nodes, ...all.map((turnId) => this.node({ kind: 'turn', id: `t:${turnId}`, sessionId: element.sessionId, turnId, parent: element.id }))];
      }
      case 'files': {
        const { files } = await this.fleet.api().workspace(element.sessionId);
        const session = this.sessions?.find((x) => x.sessionId === element.sessionId);
        const shown: FleetNode[] = files.slice(0, MAX_FILES).map((f) =>
          this.node({ kind: 'file', id: `file:${element.sessionId}:${f.path}`, sessionId: element.sessionId, path: f.path, sizeBytes: f.sizeBytes, dataset: session?.dataset?.path === f.path, parent: element.id }),
        );
        if (files.length > MAX_FILES) {
          shown.push(this.node({ kind: 'message', id: `morefiles:${element.sessionId}`, text: `${files.length - MAX_FILES} more files`, parent: element.id }));
        }
        return shown;
      }
      case 'turn': {
        const { turns, artifacts, labels } = await this.sessionData(element.sessionId);
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
          const labelStatus = labels.get(traceId ?? element.turnId);
          nodes.push(this.node({ kind: 'trace', id: `tr:${element.turnId}`, sessionId: element.sessionId, turnId: element.turnId, traceId, labelStatus, parent: element.id }));
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
        // the stored total, or more while this window's Turns run (they are numbered already)
        const running = this.fleet.live.forSession(element.sessionId).map((t) => this.summaries.get(t.turnId)?.seq ?? 0);
        const total = Math.max(this.turnTotals.get(element.sessionId) ?? element.info.turnCount, ...running);
        item.description = `${current ? 'current · ' : ''}${element.info.mode} · ${plural(total, 'Turn')}`;
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
        // expanded while it runs (its children appear under it) and whenever it has children
        const open = hasChildren || (element.agentId === 'root' && live?.status === 'running');
        const item = new vscode.TreeItem(view.label, open ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None);
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
        item.description = traceDescription(element.traceId, element.labelStatus);
        item.iconPath = element.labelStatus ? new vscode.ThemeIcon(LABEL_ICONS[element.labelStatus] ?? 'tag') : new vscode.ThemeIcon('list-tree');
        if (element.labelStatus) {
          item.tooltip = `Labelled ${element.labelStatus}`;
        }
        item.contextValue = 'fleet.trace';
        item.command = { command: UI_COMMANDS.showTrace.id, title: 'Show Trace', arguments: [element.traceId ? { traceId: element.traceId } : { turnId: element.turnId }] };
        return item;
      }
      case 'files': {
        const info = this.sessions?.find((x) => x.sessionId === element.sessionId);
        const item = new vscode.TreeItem('Files', vscode.TreeItemCollapsibleState.Collapsed);
        item.id = element.id;
        item.description = info?.dataset ? `dataset ${visible(info.dataset.path.replace(/^files\//, ''))}` : undefined;
        item.tooltip = 'The files attached to this Session (its workspace files/); the dataset is marked.';
        item.iconPath = new vscode.ThemeIcon('files');
        item.contextValue = 'fleet.files';
        return item;
      }
      case 'file': {
        const item = new vscode.TreeItem(visible(element.path.replace(/^files\//, '')), vscode.TreeItemCollapsibleState.None);
        item.id = element.id;
        item.description = [element.dataset ? 'dataset' : undefined, formatBytes(element.sizeBytes)].filter(Boolean).join(' · ');
        item.iconPath = new vscode.ThemeIcon(element.dataset ? 'database' : 'file');
        item.contextValue = element.dataset ? 'fleet.file.dataset' : 'fleet.file';
        return item;
      }
      case 'placeholder': {
        const item = new vscode.TreeItem('Run a Turn…', vscode.TreeItemCollapsibleState.None);
        item.id = element.id;
        item.iconPath = new vscode.ThemeIcon('play');
        item.tooltip = 'This Session has no Turns yet: run one.';
        item.command = { command: UI_COMMANDS.runTurn.id, title: 'Run a Turn', arguments: [{ sessionId: element.sessionId }] };
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
