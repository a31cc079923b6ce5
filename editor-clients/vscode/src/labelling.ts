// Labelling a trace for evaluation (`fleet/trace/label`): the questions the extension asks, in
// order, through injected prompts (quick picks and input boxes in VS Code, plain functions in the
// unit tests). Pure: no `vscode` import.
import { LABEL_STATUSES, LabelStatus, ROUTES, TraceLabelParams } from './protocol';
import { splitValues } from './progress';
import { answerPrefill } from './words';

export interface PickItem<T> {
  label: string;
  description?: string;
  value: T;
}

/** What a prompt answers when the user pressed Back. */
export const BACK = Symbol('back');
export type Back = typeof BACK;

/** Where a question sits in the flow: shown as "step/totalSteps"; Back is offered after step 1. */
export interface Step {
  step: number;
  totalSteps: number;
}

/** The prompts the flow needs; `undefined` from any of them means the user gave up, `BACK` that
 * they went one step back. `value`/`active` is what to show again when the user comes back. */
export interface LabelPrompts {
  pick<T>(title: string, items: PickItem<T>[], step: Step, active?: T): Promise<T | Back | undefined>;
  input(title: string, options: { value?: string; prompt?: string }, step: Step): Promise<string | Back | undefined>;
  /** A JSON file of structured expectations (`schema_version: 1`), read and parsed; `null`: none. */
  expectations(title: string, step: Step): Promise<Record<string, unknown> | null | Back | undefined>;
}

export interface LabelDefaults {
  answer?: string;
  route?: string;
  /** How the trace is named in the titles ("Turn #3"); default "trace <id>". */
  name?: string;
}

export const ANY_ROUTE = '(any)';
type Route = (typeof ROUTES)[number];

interface Answers {
  status?: LabelStatus;
  answer?: string;
  valuesText?: string;
  route?: Route | typeof ANY_ROUTE;
  critical?: boolean;
  expectations?: Record<string, unknown> | null;
}

type Question = 'status' | 'answer' | 'values' | 'route' | 'critical' | 'expectations';

/** The questions in order; "critical" only when values were given. */
function questions(a: Answers): Question[] {
  const values = splitValues(a.valuesText ?? '').length > 0;
  return ['status', 'answer', 'values', 'route', ...(values ? (['critical'] as const) : []), 'expectations'];
}

/**
 * Ask for status, expected answer, values, route, critical and expectations as one multi-step
 * input ("Label Turn #3 (2/5)", Back goes one step back keeping what was typed), and build the
 * params. The answer is pre-filled with the model's answer unless the label is "rejected".
 */
export async function collectLabel(
  traceId: string,
  prompts: LabelPrompts,
  defaults: LabelDefaults = {},
): Promise<TraceLabelParams | undefined> {
  const a: Answers = {};
  const title = `Fleet: label ${defaults.name ?? `trace ${traceId}`}`;
  let index = 0;
  for (;;) {
    const order = questions(a);
    if (index >= order.length) break;
    const step: Step = { step: index + 1, totalSteps: order.length };
    const answer = await ask(order[index], a, prompts, title, step, defaults);
    if (answer === undefined) return undefined;
    if (answer === BACK) {
      index = Math.max(0, index - 1);
      continue;
    }
    index += 1;
  }
  const values = splitValues(a.valuesText ?? '');
  return {
    traceId,
    status: a.status!,
    ...(a.answer ? { answer: a.answer } : {}),
    ...(values.length > 0 ? { values } : {}),
    ...(a.route && a.route !== ANY_ROUTE ? { route: a.route } : {}),
    ...(values.length > 0 && a.critical ? { critical: true } : {}),
    ...(a.expectations ? { expectations: a.expectations } : {}),
  };
}

/** One question; records the answer in `a`. */
async function ask(
  q: Question,
  a: Answers,
  prompts: LabelPrompts,
  title: string,
  step: Step,
  defaults: LabelDefaults,
): Promise<true | Back | undefined> {
  switch (q) {
    case 'status': {
      const v = await prompts.pick(
        `${title}: status`,
        LABEL_STATUSES.map((s): PickItem<LabelStatus> => ({ label: s, description: STATUS_HELP[s], value: s })),
        step,
        a.status,
      );
      if (v === undefined || v === BACK) return v;
      if (v !== a.status) a.answer = undefined; // the pre-fill depends on the status
      a.status = v;
      return true;
    }
    case 'answer': {
      const v = await prompts.input(
        `${title}: expected answer (optional)`,
        { value: a.answer ?? answerPrefill(a.status!, defaults.answer) },
        step,
      );
      if (v === undefined || v === BACK) return v;
      a.answer = v;
      return true;
    }
    case 'values': {
      const v = await prompts.input(
        `${title}: expected values (optional, comma-separated)`,
        { value: a.valuesText ?? '', prompt: a.status === 'approved' && !a.answer ? 'An approved label needs an expected answer or values' : undefined },
        step,
      );
      if (v === undefined || v === BACK) return v;
      a.valuesText = v;
      return true;
    }
    case 'route': {
      const v = await prompts.pick<Route | typeof ANY_ROUTE>(
        `${title}: expected route`,
        [
          { label: ANY_ROUTE, value: ANY_ROUTE },
          ...ROUTES.map((r) => ({ label: r, description: r === defaults.route ? 'this Turn took it' : undefined, value: r })),
        ],
        step,
        a.route,
      );
      if (v === undefined || v === BACK) return v;
      a.route = v;
      return true;
    }
    case 'critical': {
      const v = await prompts.pick(
        `${title}: are the values hard requirements?`,
        [
          { label: 'not critical', value: false },
          { label: 'critical', description: 'the answer must contain every value', value: true },
        ],
        step,
        a.critical,
      );
      if (v === undefined || v === BACK) return v;
      a.critical = v;
      return true;
    }
    case 'expectations': {
      const v = await prompts.expectations(`${title}: structured expectations (schema_version 1)`, step);
      if (v === undefined || v === BACK) return v;
      a.expectations = v;
      return true;
    }
  }
}

const STATUS_HELP: Readonly<Record<LabelStatus, string>> = {
  approved: 'a reviewed expected answer (optimization data)',
  benchmark: 'held out for evaluation, never optimization data',
  synthetic: 'a generated example (optimization data)',
  rejected: 'the answer is wrong; kept out of optimization',
};

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
