// Live state of the Turns this window hears about, from `fleet/turn/didEmit` events and the
// Turn's `$/progress` reports: the agent tree (root and children with their subtask and state),
// the root's step, model calls against the limit, and the outcome. The tree view and the progress
// notification both read it. Pure: no `vscode` import, unit-tested under node.
import type { TurnEvent, TurnProgressValue, TurnResult, TurnStatus } from './protocol';
import { truncate } from './progress';

export type AgentState = 'running' | 'succeeded' | 'failed' | 'cancelled' | 'deadline' | 'budget' | string;

export interface LiveAgent {
  agentId: string;
  parentAgentId?: string;
  subtask?: string;
  depth?: number;
  state: AgentState;
  /** The agent's latest step (a cell, a tool call, a model call). */
  step?: string;
}

export interface LiveTurn {
  turnId: string;
  sessionId: string;
  task?: string;
  status: TurnStatus;
  route?: string;
  /** The root's latest `$/progress` report (route, step, cells, model calls, children running). */
  rootMessage?: string;
  callsUsed?: number;
  callsMax?: number;
  startedAt: number;
  durationSeconds?: number;
  agents: Map<string, LiveAgent>;
  artifacts: Set<string>;
  result?: TurnResult;
}

const TERMINAL: Record<string, TurnStatus> = {
  turn_completed: 'completed',
  turn_failed: 'failed',
  turn_cancelled: 'cancelled',
};

const SPAWN_STEPS: Readonly<Record<string, string>> = { spawn_agent: 'starting a child agent', spawn_agents: 'starting child agents' };

function str(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** Bounded: the newest `limit` Turns are kept (a long editor session must not grow without end). */
export class LiveTurns {
  private readonly turns = new Map<string, LiveTurn>();

  constructor(
    private readonly limit = 200,
    private readonly now: () => number = Date.now,
  ) {}

  get(turnId: string): LiveTurn | undefined {
    return this.turns.get(turnId);
  }

  all(): LiveTurn[] {
    return [...this.turns.values()];
  }

  forSession(sessionId: string): LiveTurn[] {
    return this.all().filter((t) => t.sessionId === sessionId);
  }

  private ensure(turnId: string, sessionId: string): LiveTurn {
    let turn = this.turns.get(turnId);
    if (!turn) {
      turn = {
        turnId,
        sessionId,
        status: 'running',
        startedAt: this.now(),
        agents: new Map([['root', { agentId: 'root', state: 'running' }]]),
        artifacts: new Set(),
      };
      this.turns.set(turnId, turn);
      while (this.turns.size > this.limit) {
        const oldest = this.turns.keys().next().value as string;
        this.turns.delete(oldest);
      }
    }
    return turn;
  }

  /** Apply one `fleet/turn/didEmit` event; returns the Turn it changed. */
  applyEvent(event: TurnEvent): LiveTurn {
    const turn = this.ensure(event.turnId, event.sessionId);
    // Each case reads its kind's generated payload type; values are still checked at run time.
    switch (event.kind) {
      case 'turn_started':
        turn.task = str(event.payload?.task) ?? turn.task;
        break;
      case 'triage_decision':
        turn.route = str(event.payload?.route) ?? turn.route;
        break;
      case 'budget_update': {
        const { used, max } = event.payload ?? {};
        if (typeof used === 'number') turn.callsUsed = used;
        if (typeof max === 'number') turn.callsMax = max;
        break;
      }
      case 'child_spawned': {
        const p = event.payload ?? {};
        const agent = turn.agents.get(event.agentId) ?? { agentId: event.agentId, state: 'running' };
        agent.parentAgentId = event.parentAgentId ?? 'root';
        agent.subtask = str(p.subtask) ?? agent.subtask;
        agent.depth = typeof p.depth === 'number' ? p.depth : agent.depth;
        agent.state = 'running';
        turn.agents.set(event.agentId, agent);
        break;
      }
      case 'child_finished': {
        const agent = turn.agents.get(event.agentId) ?? { agentId: event.agentId, state: 'running' };
        agent.state = str(event.payload?.status) ?? 'succeeded';
        agent.step = undefined;
        turn.agents.set(event.agentId, agent);
        break;
      }
      case 'code_cell': {
        const cell = event.payload?.cell;
        this.step(turn, event, typeof cell === 'number' ? `cell ${cell}` : 'cell');
        break;
      }
      case 'tool_call_start': {
        const tool = str(event.payload?.tool);
        // the sandbox's child-agent tools in words, as the server's progress text says them
        this.step(turn, event, tool ? (SPAWN_STEPS[tool] ?? `tool ${tool}`) : undefined);
        break;
      }
      case 'lm_start':
        this.step(turn, event, 'thinking');
        break;
      case 'artifact': {
        const path = str(event.payload?.path);
        if (path) turn.artifacts.add(path);
        break;
      }
      case 'turn_completed':
      case 'turn_failed':
      case 'turn_cancelled':
        this.finish(turn, TERMINAL[event.kind], event.payload as TurnResult | undefined);
        break;
    }
    return turn;
  }

  private step(turn: LiveTurn, event: TurnEvent, step: string | undefined): void {
    if (!step) return;
    let agent = turn.agents.get(event.agentId);
    if (!agent) {
      agent = { agentId: event.agentId, parentAgentId: event.parentAgentId, state: 'running' };
      turn.agents.set(event.agentId, agent);
    }
    agent.step = step;
  }

  /** Apply a `$/progress` value of the Turn's own token. */
  applyProgress(turnId: string, sessionId: string, value: TurnProgressValue): LiveTurn {
    const turn = this.ensure(turnId, sessionId);
    if (value.kind === 'report' && value.message && (value.agentId ?? 'root') === 'root') {
      turn.rootMessage = value.message;
    }
    return turn;
  }

  /** Record a Turn's result (the answer of `fleet/turn/run` or a terminal event). */
  applyResult(result: TurnResult): LiveTurn {
    const turn = this.ensure(result.turnId, result.sessionId);
    this.finish(turn, result.status, result);
    return turn;
  }

  private finish(turn: LiveTurn, status: TurnStatus, result: TurnResult | undefined): void {
    turn.status = status;
    if (result && typeof result === 'object') {
      turn.result = { ...turn.result, ...result };
      turn.route = result.route || turn.route;
      if (typeof result.durationSeconds === 'number') {
        turn.durationSeconds = result.durationSeconds;
      }
      for (const a of result.artifacts ?? []) {
        turn.artifacts.add(a.path);
      }
    }
    turn.durationSeconds ??= (this.now() - turn.startedAt) / 1000;
    const root = turn.agents.get('root');
    if (root) {
      root.state = status === 'completed' ? 'succeeded' : status;
      root.step = undefined;
    }
    for (const agent of turn.agents.values()) {
      if (agent.state === 'running') {
        agent.state = status === 'completed' ? 'succeeded' : status;
      }
    }
  }
}

/** The children of `parent` in a Turn's agent tree, in spawn order. */
export function childAgents(turn: LiveTurn, parent: string): LiveAgent[] {
  return [...turn.agents.values()].filter((a) => a.agentId !== 'root' && (a.parentAgentId ?? 'root') === parent);
}

/** "root step · 3/40 model calls" plus one line per child agent: its subtask and state. */
export function notificationMessage(turn: LiveTurn): string {
  const head: string[] = [];
  // the model calls come from this window's events (the same count the tree shows), not the
  // server's rate-limited report text
  const calls = turn.callsUsed !== undefined ? callsText(turn) : undefined;
  const root = (turn.rootMessage ?? '')
    .split(' · ')
    .filter((part) => part !== '' && !(calls && / model calls$/.test(part)))
    .join(' · ');
  if (root) {
    head.push(root);
  } else if (turn.route) {
    head.push(`route ${turn.route}`);
  }
  if (calls) {
    head.push(calls);
  }
  const children = [...turn.agents.values()].filter((a) => a.agentId !== 'root');
  const lines = children.map((a) => {
    const what = a.subtask ? truncate(a.subtask, 60) : a.agentId;
    const state = a.state === 'running' && a.step ? `running, ${a.step}` : a.state;
    return `↳ ${what} (${state})`;
  });
  return [head.join(' · ') || 'starting', ...lines].join(' — ');
}

/** "17/150 model calls": the Turn's model calls against its limit, as the tree and the
 * notification both show them. */
export function callsText(turn: Pick<LiveTurn, 'callsUsed' | 'callsMax'>): string {
  return `${turn.callsUsed ?? 0}/${turn.callsMax ?? '?'} model calls`;
}

/** "12.3 s", "2 min 5 s": a Turn's duration for the tree. */
export function formatDuration(seconds: number | undefined): string | undefined {
  if (seconds === undefined || !Number.isFinite(seconds)) {
    return undefined;
  }
  if (seconds < 60) {
    return `${seconds.toFixed(1)} s`;
  }
  const minutes = Math.floor(seconds / 60);
  return `${minutes} min ${Math.round(seconds - minutes * 60)} s`;
}
