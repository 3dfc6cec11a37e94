import {
  type ListTasksRequest,
  type ListTasksResponse,
  type Message,
  Task,
  TaskState,
} from "@a2a-js/sdk";
import { RequestMalformedError, TaskNotCancelableError } from "@a2a-js/sdk/errors";
import type { TaskStore } from "@a2a-js/sdk/server";
import type { TaskRecord } from "../agentTasks/taskRecords.ts";
import type { Core } from "../core/createCore.ts";
import { currentClient } from "../web/requestClient.ts";
import { followClaim, TERMINAL_STATES } from "./taskViews.ts";

const MAX_PAGE = 100;
/** Messages kept in a stored task's history: a chatty client cannot grow a row without end. */
const MAX_HISTORY = 20;
const DEFAULT_PAGE = 20;
/** Where a task keeps the body an x402 payment will be for (agentExecutor.ts). */
export const X402_REQUEST = "x402_request";

/** An e-mail address inside a text (as people write one). */
const EMAIL = /[^\s@<>"'(),;:]+@[^\s@<>"'(),;:]+\.[^\s@<>"'(),;:]+/g;
const REDACTED_EMAIL = "[email]";

/**
 * The history without e-mail addresses: a data part's `email` (the receipt's recipient) and any
 * address written in a text. The claim keeps the address where it is needed; a task is read by
 * anyone who has its id.
 */
export function historyWithoutEmails(history: Message[]): Message[] {
  return history.map((message) => ({
    ...message,
    parts: message.parts.map((part) => {
      const content = part.content;
      if (content?.$case === "text") {
        return {
          ...part,
          content: { ...content, value: content.value.replace(EMAIL, REDACTED_EMAIL) },
        };
      }
      if (
        content?.$case === "data" &&
        content.value &&
        typeof content.value === "object" &&
        !Array.isArray(content.value) &&
        "email" in content.value
      ) {
        return {
          ...part,
          content: { ...content, value: { ...content.value, email: REDACTED_EMAIL } },
        };
      }
      return part;
    }),
  }));
}

/**
 * A task that ends without a claim (refused: rejected, or its payment failed) is not kept: it
 * holds nothing a client could come back for, and keeping it would let anyone fill the table.
 */
function refusedWithoutClaim(task: Task, claimId: string | null): boolean {
  const state = task.status?.state;
  return (
    claimId === null &&
    (state === TaskState.TASK_STATE_REJECTED || state === TaskState.TASK_STATE_FAILED)
  );
}

/** `claim_id` a task's metadata names (set when its claim is created). */
export function claimIdOf(task: Task): string | null {
  const claimId = task.metadata?.claim_id;
  return typeof claimId === "string" ? claimId : null;
}

/** A task as it is stored: its last messages without e-mail addresses, its columns. */
export function storedRecord(task: Task): Omit<TaskRecord, "updatedAt"> {
  const claimId = claimIdOf(task);
  // Once the claim exists it holds the x402 request (its email included): the task need not.
  const { [X402_REQUEST]: _request, ...metadata } = task.metadata ?? {};
  return {
    id: task.id,
    contextId: task.contextId,
    claimId,
    state: TaskState[task.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED] ?? "UNKNOWN",
    task: Task.toJSON({
      ...task,
      ...(claimId && task.metadata ? { metadata } : {}),
      history: historyWithoutEmails(task.history.slice(-MAX_HISTORY)),
    }) as Record<string, unknown>,
  };
}

interface PageToken {
  updatedAt: string;
  id: string;
}

function encodeToken(token: PageToken): string {
  return Buffer.from(JSON.stringify([token.updatedAt, token.id])).toString("base64url");
}

function decodeToken(text: string): PageToken {
  try {
    const [updatedAt, id] = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
    if (typeof updatedAt === "string" && typeof id === "string") return { updatedAt, id };
  } catch {
    // falls through to the refusal
  }
  throw new RequestMalformedError(
    "pageToken is not one this agent gave: pass nextPageToken as it came",
  );
}

/**
 * The A2A SDK's task store on PostgreSQL (app.a2a_tasks, through the core), so tasks survive
 * restarts and are the same on every replica. A task that names a claim follows it: reading
 * the task reads the claim and, if the claim has moved on (paid, paying, completed with its
 * receipt, failed, expired), the task's state moves with it and is saved. A task whose claim
 * is paid cannot be canceled: the money is moving.
 */
export class ClaimTaskStore implements TaskStore {
  readonly #core: Core;

  constructor(core: Core) {
    this.#core = core;
  }

  async save(task: Task): Promise<void> {
    const claimId = claimIdOf(task);
    if (task.status?.state === TaskState.TASK_STATE_CANCELED && claimId) {
      const claim = await this.#core.getClaim(claimId);
      const {
        status: claimStatus,
        payment,
        txHash,
      } = claim.type === "claim" ? claim.claim : { status: "", payment: null, txHash: null };
      // Once a payment is named or matched the money is moving: the task goes on to the end.
      if (claimStatus !== "awaiting_payment" || payment || txHash) {
        throw new TaskNotCancelableError(
          `The task's claim is ${claimStatus || "gone"}${txHash ? " and names its payment" : ""}: ` +
            "only a task whose claim is unpaid can be canceled.",
        );
      }
    }
    if (refusedWithoutClaim(task, claimId)) {
      await this.#core.agentTasks.delete(task.id);
      return;
    }
    await this.#core.agentTasks.save(storedRecord(task), currentClient() ?? null);
  }

  async load(taskId: string): Promise<Task | undefined> {
    const record = await this.#core.agentTasks.read(taskId);
    if (!record) return undefined;
    return this.#follow(Task.fromJSON(record.task));
  }

  async list(params: ListTasksRequest): Promise<ListTasksResponse> {
    if (!params.contextId) {
      throw new RequestMalformedError(
        "contextId is required: tasks are listed within the context they were created in",
      );
    }
    const pageSize = Math.min(Math.max(params.pageSize ?? DEFAULT_PAGE, 1), MAX_PAGE);
    const records = await this.#core.agentTasks.list({
      contextId: params.contextId,
      state: params.status ? (TaskState[params.status] ?? null) : null,
      limit: pageSize + 1,
      after: params.pageToken ? decodeToken(params.pageToken) : null,
    });
    const page = records.slice(0, pageSize);
    const tasks = await Promise.all(page.map((record) => this.#follow(Task.fromJSON(record.task))));
    const last = page.at(-1);
    return {
      tasks: tasks.map((task) => (params.includeArtifacts ? task : { ...task, artifacts: [] })),
      nextPageToken: records.length > pageSize && last ? encodeToken(last) : "",
      pageSize,
      totalSize: tasks.length,
    };
  }

  /** The task as its claim now says (saved when that changed it). */
  async #follow(task: Task): Promise<Task> {
    const claimId = claimIdOf(task);
    const state = task.status?.state;
    if (!claimId || state === undefined || TERMINAL_STATES.has(state)) return task;
    const found = await this.#core.getClaimWithReceipt(claimId);
    if (found.type !== "claim") return task;
    const followed = followClaim(this.#core.config, task, found.claim, found.receipt);
    if (followed.status?.state === state) return task;
    await this.save(followed);
    return followed;
  }
}
