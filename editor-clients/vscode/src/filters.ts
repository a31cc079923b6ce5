// The Fleet view's Session filters (`fleet/session/list`'s ownerHost, ownerUser, updatedSince).
// Pure apart from reading this machine's host name and user: unit-tested under node.
import { hostname, userInfo } from 'node:os';
import type { SessionFilter } from './api';

export const FILTERS = ['all', 'machine', 'mine', 'recent'] as const;
export type FilterName = (typeof FILTERS)[number];

export const FILTER_LABELS: Readonly<Record<FilterName, string>> = {
  all: 'All',
  machine: 'This machine',
  mine: 'Mine',
  recent: 'Updated in the last 7 days',
};

export interface Machine {
  host: string;
  user: string;
}

/** The host and user the server records as a Session's owner: the server's `host_name` setting
 * comes from FLEET_HOST_NAME (else the machine's host name); the user is the OS user (the server
 * runs as this user, started by this extension). */
export function thisMachine(env: NodeJS.ProcessEnv = process.env): Machine {
  let user = '';
  try {
    user = userInfo().username;
  } catch {
    user = env.USER ?? env.USERNAME ?? '';
  }
  return { host: env.FLEET_HOST_NAME || hostname(), user };
}

export function filterDetail(name: FilterName, me: Machine): string | undefined {
  switch (name) {
    case 'machine':
      return me.host;
    case 'mine':
      return `${me.user}@${me.host}`;
    default:
      return undefined;
  }
}

/** The list params of a filter ("Mine" is this host and this user, as `fleet-lsp sessions --mine`). */
export function sessionFilterParams(name: FilterName, me: Machine, now: Date): SessionFilter {
  switch (name) {
    case 'all':
      return {};
    case 'machine':
      return { ownerHost: me.host };
    case 'mine':
      return { ownerHost: me.host, ownerUser: me.user };
    case 'recent':
      return { updatedSince: new Date(now.getTime() - 7 * 24 * 3600 * 1000).toISOString() };
  }
}
