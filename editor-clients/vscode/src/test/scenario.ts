// The scripted Turns the contract test and the real-VS-Code end-to-end driver (e2e/run.mjs, which
// imports the compiled out/test/scenario.js) both run: the quickstart over sales.csv, whose root
// spawns one child agent, and a slow Turn to cancel. FLEET_TEST_SCRIPT makes the models
// deterministic; the code they write really runs in the sandbox.

export const TASK = 'Calculate revenue by region and save artifacts/revenue_by_region.csv.';
export const SLOW = 'SLOWTASK: count slowly';
/** A Turn whose first cell fails (1 / 0) and whose second answers: outcome `partial`, one sandbox
 * error, shown "completed with errors" (the contract test runs it; the e2e driver does not). */
export const FIRST_CELL_FAILS = 'FIRSTFAILS: compute x';
export const SUBTASK = 'REGION=North check';
export const SALES = 'region,revenue\nNorth,100\nSouth,250\nNorth,50.5\n';
export const EXPECTED_CSV = 'region,revenue\nNorth,150.5\nSouth,250.0\n';

const ROOT_CODE = [
  'import csv',
  'totals = {}',
  "for row in csv.DictReader(open('files/sales.csv')):",
  "    totals[row['region']] = totals.get(row['region'], 0.0) + float(row['revenue'])",
  "with open('artifacts/revenue_by_region.csv', 'w', newline='') as out:",
  "    out.write('region,revenue\\n' + ''.join(f'{k},{v}\\n' for k, v in sorted(totals.items())))",
  `checks = spawn_agents(subtasks=['${SUBTASK}'], input_paths=[['files/sales.csv']])`,
  'print(totals)',
  'print(checks)',
].join('\n');

/** The FLEET_TEST_SCRIPT; the child sleeps `childSeconds` first (long enough for a driver to see
 * and photograph its progress). */
export function scenarioScript(childSeconds = 0): object {
  const child = [
    {
      action: [
        'import csv, time',
        ...(childSeconds > 0 ? [`time.sleep(${childSeconds})`] : []),
        "total = sum(float(r['revenue']) for r in csv.DictReader(open('files/sales.csv')) if r['region'] == 'North')",
        'print(total)',
      ].join('\n'),
    },
    { action: "SUBMIT(findings='North=' + str(total))", reasoning: 'Submit.' },
  ];
  return {
    root: {
      rules: {
        // first: a later Turn's prompt may quote an earlier task, and the first matching rule answers
        FIRSTFAILS: [{ action: '1 / 0' }, { action: 'x = 42\nprint(x)' }, { submit: 'str(x)' }],
        'revenue by region': [{ action: ROOT_CODE }, { submit: "'; '.join(f'{k}={v}' for k, v in sorted(totals.items()))", note: 'csv sum' }],
        SLOWTASK: { action: 'import time\nfor _ in range(1200):\n    time.sleep(0.05)' },
      },
    },
    sub: {
      rules: {
        FIRSTFAILS: { route: 'rlm' },
        'REGION=North': child,
        'revenue by region': { route: 'rlm' },
        SLOWTASK: { route: 'rlm' },
      },
    },
  };
}
