// Labelling a trace for evaluation (`fleet/trace/label`): the questions the extension asks, in
// order, through injected prompts (quick picks and input boxes in VS Code, plain functions in the
// unit tests). Pure: no `vscode` import.
import { LABEL_STATUSES, LabelStatus, ROUTES, TraceLabelParams } from './protocol';
import { splitValues } from './progress';

export interface PickItem<T> {
  label: string;
  description?: string;
  value: T;
}

/** The prompts the flow needs; `undefined` from any of them means the user gave up. */
export interface LabelPrompts {
  pick<T>(title: string, items: PickItem<T>[]): Promise<T | undefined>;
  input(title: string, options: { value?: string; prompt?: string }): Promise<string | undefined>;
  /** A JSON file of structured expectations (`schema_version: 1`), read and parsed; `null`: none. */
  expectations(): Promise<Record<string, unknown> | null | undefined>;
}

export interface LabelDefaults {
  answer?: string;
  route?: string;
}

export const ANY_ROUTE = '(any)';
type Route = (typeof ROUTES)[number];

/** Ask for status, expected answer, values, route, critical and expectations; build the params. */
export async function collectLabel(
  traceId: string,
  prompts: LabelPrompts,
  defaults: LabelDefaults = {},
): Promise<TraceLabelParams | undefined> {
  const status = await prompts.pick(
    `Fleet: label trace ${traceId}: status`,
    LABEL_STATUSES.map((s): PickItem<LabelStatus> => ({ label: s, value: s })),
  );
  if (status === undefined) return undefined;
  const answer = await prompts.input('Fleet: expected answer (optional)', { value: defaults.answer ?? '' });
  if (answer === undefined) return undefined;
  const valuesText = await prompts.input('Fleet: expected values (optional, comma-separated)', {
    prompt: status === 'approved' ? 'An approved label needs an expected answer or values' : undefined,
  });
  if (valuesText === undefined) return undefined;
  const values = splitValues(valuesText);
  const route = await prompts.pick<Route | typeof ANY_ROUTE>('Fleet: expected route', [
    { label: ANY_ROUTE, value: ANY_ROUTE },
    ...ROUTES.map((r) => ({ label: r, description: r === defaults.route ? 'this Turn took it' : undefined, value: r })),
  ]);
  if (route === undefined) return undefined;
  let critical = false;
  if (values.length > 0) {
    const picked = await prompts.pick('Fleet: are the values hard requirements (critical)?', [
      { label: 'not critical', value: false },
      { label: 'critical', description: 'the answer must contain every value', value: true },
    ]);
    if (picked === undefined) return undefined;
    critical = picked;
  }
  const expectations = await prompts.expectations();
  if (expectations === undefined) return undefined;
  return {
    traceId,
    status,
    ...(answer ? { answer } : {}),
    ...(values.length > 0 ? { values } : {}),
    ...(route !== ANY_ROUTE ? { route } : {}),
    ...(critical ? { critical } : {}),
    ...(expectations ? { expectations } : {}),
  };
}

/** Parse an expectations file's text; the error names the file and what is wrong. */
export function parseExpectations(name: string, text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(`${name} is not JSON: ${(error as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new Error(`${name} must hold a JSON object (schema_version 1 expectations)`);
  }
  return value as Record<string, unknown>;
}
