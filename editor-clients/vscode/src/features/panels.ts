// Answers and traces rendered in a webview that follows the theme, titled "Turn #3 — answer": the
// markdown is rendered by VS Code's own engine (`markdown.api.render`), `fleet:` links open the
// read-only documents, and "Open source" opens the markdown text.
import { randomUUID } from 'crypto';
import * as vscode from 'vscode';
import { PAGE_COMMANDS, escapeHtml, linkFleetDocuments, pageHtml } from '../rendered';

/** What a rendered panel shows (read by the end-to-end test). */
export interface ShownPanel {
  key: string;
  title: string;
  html: string;
}

export class RenderedPanels implements vscode.Disposable {
  private readonly panels = new Map<string, vscode.WebviewPanel>();
  readonly shown: ShownPanel[] = [];

  dispose(): void {
    for (const panel of this.panels.values()) panel.dispose();
  }

  /** Show `markdown` rendered in the panel for `key` (created, or revealed and refreshed). */
  async show(key: string, title: string, markdown: string, sourceLink: string): Promise<void> {
    let body: string;
    try {
      body = await vscode.commands.executeCommand<string>('markdown.api.render', markdown);
      if (typeof body !== 'string') throw new Error('no renderer');
    } catch {
      body = `<pre>${escapeHtml(markdown)}</pre>`; // the markdown extension is disabled: show the text
    }
    const html = pageHtml({ title, body: linkFleetDocuments(body), sourceLink, nonce: randomUUID().replace(/-/g, '') });
    let panel = this.panels.get(key);
    if (panel) {
      panel.reveal(undefined, false);
    } else {
      panel = vscode.window.createWebviewPanel('fleet.document', title, { viewColumn: vscode.ViewColumn.Active, preserveFocus: false }, {
        enableCommandUris: [...PAGE_COMMANDS],
        enableScripts: false,
        enableFindWidget: true,
        retainContextWhenHidden: false,
      });
      this.panels.set(key, panel);
      const created = panel;
      created.onDidDispose(() => {
        if (this.panels.get(key) === created) this.panels.delete(key);
      });
    }
    panel.title = title;
    panel.webview.html = html;
    this.shown.push({ key, title, html });
    if (this.shown.length > 20) this.shown.splice(0, this.shown.length - 20);
  }
}
