// The page around a rendered Fleet document (an answer, a trace) in a webview: the HTML that VS
// Code's markdown engine made of the document, links to `fleet:` documents turned into command
// links, colours and fonts from the theme, and an "Open source" link. Pure: no `vscode` import.

/** Commands a rendered page may run (the webview allows exactly these command links). */
export const PAGE_COMMANDS = ['fleet.ui.openArtifact', 'fleet.ui.showAnswer', 'fleet.ui.showTrace', 'fleet.ui.labelTrace'] as const;

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

export function commandLink(command: (typeof PAGE_COMMANDS)[number], argument: unknown): string {
  return `command:${command}?${encodeURIComponent(JSON.stringify([argument]))}`;
}

/** `href="fleet:/…"` links (artifacts, traces) open the read-only document through the extension. */
export function linkFleetDocuments(html: string): string {
  return html.replace(/href="(fleet:[^"]*)"/g, (_m, uri: string) => {
    const decoded = uri.replace(/&amp;/g, '&');
    return `href="${escapeHtml(commandLink('fleet.ui.openArtifact', { uri: decoded }))}"`;
  });
}

export interface Page {
  title: string;
  /** The markdown engine's HTML of the document (its user and model text is fenced, so escaped). */
  body: string;
  /** The command link that opens the document's source. */
  sourceLink: string;
  nonce: string;
}

export function pageHtml(page: Page): string {
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'nonce-${page.nonce}';">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>${escapeHtml(page.title)}</title>
<style nonce="${page.nonce}">
body { font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); color: var(--vscode-foreground); background: var(--vscode-editor-background); padding: 0 20px 20px; line-height: 1.5; max-width: 60em; }
a { color: var(--vscode-textLink-foreground); } a:hover { color: var(--vscode-textLink-activeForeground); }
code, pre { font-family: var(--vscode-editor-font-family); font-size: var(--vscode-editor-font-size); }
pre { background: var(--vscode-textCodeBlock-background); padding: 8px 12px; white-space: pre-wrap; word-break: break-word; border-radius: 3px; }
table { border-collapse: collapse; } th, td { border: 1px solid var(--vscode-panel-border); padding: 2px 8px; text-align: left; }
h1 { font-size: 1.5em; border-bottom: 1px solid var(--vscode-panel-border); padding-bottom: 4px; }
h2 { font-size: 1.2em; margin-top: 1.4em; }
.fleet-source { float: right; margin-top: 1em; }
</style></head>
<body><a class="fleet-source" href="${escapeHtml(page.sourceLink)}">Open source</a>
${page.body}
</body></html>`;
}
