// Memory: list a Session's memories (learned notes and user memories), review one (only reviewed
// memories reach the model), hide it again, or reject (delete) it; add one.
import * as vscode from 'vscode';
import { UiCommandName } from '../commands';
import { Fleet, Handler } from '../fleet';
import { truncate } from '../progress';
import { Memory } from '../protocol';

type Action = 'review' | 'unreview' | 'reject';

export function memoryCommands(fleet: Fleet): Partial<Record<UiCommandName, Handler>> {
  return {
    memory: (arg?: { sessionId?: string; memoryId?: string; action?: Action }) => manageMemory(fleet, arg),
    addMemory: (arg?: { sessionId?: string; content?: string }) => addMemory(fleet, arg),
  };
}

export function memoryDescription(m: Memory): string {
  return `${m.reviewed ? '$(check) reviewed' : '$(circle-outline) unreviewed'} · ${m.kind} · ${m.createdAt}`;
}

async function manageMemory(fleet: Fleet, arg?: { sessionId?: string; memoryId?: string; action?: Action }): Promise<Memory[] | undefined> {
  const sessionId = arg?.sessionId ?? (await fleet.ensureSession());
  if (!sessionId) {
    return undefined;
  }
  const api = fleet.api();
  let memoryId = arg?.memoryId;
  let action = arg?.action;
  if (!memoryId) {
    const { memories } = await api.listMemories(sessionId);
    if (memories.length === 0) {
      void vscode.window.showInformationMessage(`Fleet: ${sessionId} has no memories yet ('Fleet: Add Memory…' adds one)`);
      return memories;
    }
    const picked = await vscode.window.showQuickPick(
      memories.map((m) => ({ label: truncate(m.content, 100), description: memoryDescription(m), detail: m.memoryId, memory: m })),
      { title: `Fleet: memories of ${sessionId} (only reviewed ones reach the model)`, matchOnDetail: true },
    );
    if (!picked) {
      return memories;
    }
    memoryId = picked.memory.memoryId;
    const choices: { label: string; action: Action }[] = [
      picked.memory.reviewed
        ? { label: '$(eye-closed) Hide from the model (unreview)', action: 'unreview' }
        : { label: '$(check) Review: let the model use it', action: 'review' },
      { label: '$(trash) Reject: delete it', action: 'reject' },
    ];
    action = (await vscode.window.showQuickPick(choices, { title: truncate(picked.memory.content, 80) }))?.action;
  }
  if (!action) {
    return undefined;
  }
  if (action === 'reject') {
    await api.rejectMemory(sessionId, memoryId);
  } else {
    await api.reviewMemory(sessionId, memoryId, action === 'review');
  }
  fleet.output.info(`memory ${memoryId} of ${sessionId}: ${action}`);
  void vscode.window.showInformationMessage(`Fleet: memory ${memoryId} ${action === 'reject' ? 'rejected' : action === 'review' ? 'reviewed' : 'hidden from the model'}`);
  return (await api.listMemories(sessionId)).memories;
}

async function addMemory(fleet: Fleet, arg?: { sessionId?: string; content?: string }): Promise<Memory | undefined> {
  const sessionId = arg?.sessionId ?? (await fleet.ensureSession());
  if (!sessionId) {
    return undefined;
  }
  const content =
    arg?.content ??
    (await vscode.window.showInputBox({
      title: `Fleet: add a memory to ${sessionId}`,
      prompt: 'It starts unreviewed; review it to let the model use it (at most 4,000 characters)',
      validateInput: (v) => (v.trim().length > 4000 ? 'at most 4,000 characters' : undefined),
    }));
  if (!content || !content.trim()) {
    return undefined;
  }
  const { memory } = await fleet.api().addMemory(sessionId, content);
  void vscode.window.showInformationMessage(`Fleet: memory ${memory.memoryId} added (unreviewed)`);
  return memory;
}
