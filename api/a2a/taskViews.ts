import { randomUUID } from "node:crypto";
import {
  type Artifact,
  type Message,
  type Part,
  Role,
  type Task,
  TaskState,
  type TaskStatus,
} from "@a2a-js/sdk";
import { claimView } from "../claims/claimView.ts";
import type { ClaimDetails } from "../claims/readClaim.ts";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import { describeRefusal, type Refusal } from "../reasons/refusal.ts";
import type { StoredReceipt } from "../receipts/readReceipt.ts";
import { receiptView } from "../receipts/receiptView.ts";

type Metadata = Record<string, unknown>;

export function textPart(text: string): Part {
  return {
    content: { $case: "text", value: text },
    metadata: undefined,
    filename: "",
    mediaType: "text/plain",
  };
}

export function dataPart(data: unknown): Part {
  return {
    content: { $case: "data", value: data },
    metadata: undefined,
    filename: "",
    mediaType: "application/json",
  };
}

export function agentMessage(
  ids: { taskId: string; contextId: string },
  parts: Part[],
  metadata?: Metadata,
): Message {
  return {
    messageId: randomUUID(),
    contextId: ids.contextId,
    taskId: ids.taskId,
    role: Role.ROLE_AGENT,
    parts,
    metadata,
    extensions: [],
    referenceTaskIds: [],
  };
}

export function status(
  ids: { taskId: string; contextId: string },
  state: TaskState,
  parts: Part[],
  metadata?: Metadata,
): TaskStatus {
  return {
    state,
    message: agentMessage(ids, parts, metadata),
    timestamp: new Date().toISOString(),
  };
}

/** A refusal as a task's last word: the REST reason code and its words, as data and text. */
export function refusalParts(refusal: Refusal): Part[] {
  const described = describeRefusal(refusal);
  return [
    textPart(
      `${described.code}: ${described.title}.${described.detail ? ` ${described.detail}` : ""}`,
    ),
    dataPart({
      error: {
        code: described.code,
        status: described.status,
        title: described.title,
        ...(described.detail !== undefined ? { detail: described.detail } : {}),
        ...described.fields,
      },
    }),
  ];
}

/** The x402 settlement(s) kept on a task, so the claim-following status still carries them. */
export const X402_RECEIPTS_KEY = "x402.payment.receipts";

/**
 * What a claim's state means for its task: awaiting payment = input-required (with what to
 * pay) or working once a transaction is named; paid and paying = working; completed, with the
 * receipt as an artifact; failed and expired = failed, with the reason.
 */
export function followClaim(
  config: ServiceConfig,
  task: Task,
  claim: ClaimDetails,
  receipt: StoredReceipt | null,
): Task {
  const ids = { taskId: task.id, contextId: task.contextId };
  const view = claimView(config, claim);
  const settled = task.metadata?.[X402_RECEIPTS_KEY];
  const x402 = settled
    ? { "x402.payment.status": "payment-completed", [X402_RECEIPTS_KEY]: settled }
    : undefined;
  const artifacts: Artifact[] = [];
  let next: TaskStatus;
  switch (claim.status) {
    case "awaiting_payment":
      next =
        claim.txHash || claim.payment
          ? status(
              ids,
              TaskState.TASK_STATE_WORKING,
              [textPart(view.next_step), dataPart(view)],
              x402,
            )
          : status(ids, TaskState.TASK_STATE_INPUT_REQUIRED, [
              textPart(view.next_step),
              dataPart(view),
            ]);
      break;
    case "paid":
    case "paying":
      next = status(
        ids,
        TaskState.TASK_STATE_WORKING,
        [textPart(view.next_step), dataPart(view)],
        x402,
      );
      break;
    case "completed": {
      next = status(
        ids,
        TaskState.TASK_STATE_COMPLETED,
        [textPart(view.next_step), dataPart(view)],
        x402,
      );
      if (receipt) {
        artifacts.push({
          artifactId: `receipt-${claim.id}`,
          name: "receipt",
          description: "The EIP-191 signed receipt of earning 1 USDC; check it with verifyMessage.",
          parts: [dataPart(receiptView(receipt, `${config.http.publicUrl}/api/receipts/verify`))],
          metadata: undefined,
          extensions: [],
        });
      }
      break;
    }
    default:
      next = status(
        ids,
        TaskState.TASK_STATE_FAILED,
        [
          textPart(
            `The claim is ${claim.status}${claim.failureReason ? ` (${claim.failureReason})` : ""}. ${view.next_step}`,
          ),
          dataPart(view),
        ],
        x402,
      );
  }
  return { ...task, status: next, artifacts: artifacts.length > 0 ? artifacts : task.artifacts };
}

export const TERMINAL_STATES = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
]);
