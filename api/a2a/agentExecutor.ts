import { type Message, type Task, TaskState } from "@a2a-js/sdk";
import {
  AgentEvent,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
} from "@a2a-js/sdk/server";
import { decodePaymentResponseHeader, encodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentPayload } from "@x402/core/types";
import { claimView } from "../claims/claimView.ts";
import { paidAnswerView, pendingAnswerView } from "../claims/earnAnswerView.ts";
import type { Core } from "../core/createCore.ts";
import { ledgerPageView } from "../ledger/ledgerView.ts";
import { invalidField, paymentRefusalWords, type Refusal } from "../reasons/refusal.ts";
import { receiptView } from "../receipts/receiptView.ts";
import { currentClient } from "../web/requestClient.ts";
import { storedRecord, X402_REQUEST } from "./taskStore.ts";
import {
  agentMessage,
  dataPart,
  followClaim,
  refusalParts,
  status,
  TERMINAL_STATES,
  textPart,
  X402_RECEIPTS_KEY,
} from "./taskViews.ts";

type Args = Record<string, unknown>;
type Ids = { taskId: string; contextId: string };

export const SKILLS = [
  "create_claim",
  "earn_with_x402",
  "attach_payment_tx",
  "get_offer",
  "get_claim",
  "get_receipt",
  "get_ledger",
] as const;
type Skill = (typeof SKILLS)[number];

const X402_STATUS = "x402.payment.status";
const X402_REQUIRED = "x402.payment.required";
const X402_PAYLOAD = "x402.payment.payload";
const X402_ERROR = "x402.payment.error";

/** A message's request: the skill and its arguments (REST field names), or why it is unreadable. */
export function readRequest(message: Message): { skill: Skill; args: Args } | Refusal {
  const paying = message.metadata?.[X402_PAYLOAD] !== undefined;
  for (const part of message.parts) {
    if (part.content?.$case !== "data") continue;
    const data = part.content.value;
    if (!data || typeof data !== "object" || Array.isArray(data)) {
      return invalidField("", "the data part must be a JSON object");
    }
    const { skill = paying ? "earn_with_x402" : "create_claim", ...args } = data as Args;
    if (!SKILLS.includes(skill as Skill)) {
      return invalidField("skill", `must be one of ${SKILLS.join(", ")}`);
    }
    return { skill: skill as Skill, args };
  }
  const sentence = message.parts
    .map((part) => (part.content?.$case === "text" ? part.content.value : ""))
    .join(" ")
    .trim();
  // The first 0x… word is the payout address, as written: the core says what is wrong with it.
  const address = /0x[0-9a-zA-Z]+/.exec(sentence)?.[0];
  if (!address) {
    if (/\b(offer|price|terms|how)\b/i.test(sentence)) return { skill: "get_offer", args: {} };
    return invalidField(
      "payout_address",
      'is required: name the address that gets the payout, e.g. "earn 1 USDC to 0x…"',
    );
  }
  return {
    skill: paying || /x402/i.test(sentence) ? "earn_with_x402" : "create_claim",
    args: { payout_address: address },
  };
}

/**
 * The agent behind /a2a: each skill calls the same use-case as its REST route and MCP tool.
 * Claim and x402 skills make a task (stored, fetched with GetTask) whose state follows the
 * claim; the read skills answer with a message.
 */
/**
 * A task takes no webhook_url: its secret would have nowhere to go but the task, which anyone
 * with its id reads. Its push configs do the same job (docs/events.md#a2a-push-notifications).
 */
const WEBHOOK_URL_REFUSED = invalidField(
  "webhook_url",
  "is not taken here: set a push notification config on the task (CreateTaskPushNotificationConfig); its pushes are signed by the service",
);

function namesWebhookUrl(args: unknown): boolean {
  return typeof args === "object" && args !== null && "webhook_url" in args;
}

export class PayAndEarnExecutor implements AgentExecutor {
  readonly #core: Core;

  constructor(core: Core) {
    this.#core = core;
  }

  async execute(context: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const ids = { taskId: context.taskId, contextId: context.contextId };
    const message = context.userMessage;
    const task = context.task
      ? await this.#continueTask(context.task, message)
      : await this.#start(ids, message);
    bus.publish(
      task.kind === "message" ? AgentEvent.message(task.message) : AgentEvent.task(task.task),
    );
    bus.finished();
  }

  async cancelTask(taskId: string, bus: ExecutionEventBus): Promise<void> {
    const record = await this.#core.agentTasks.read(taskId);
    const contextId = record?.contextId ?? "";
    bus.publish(
      AgentEvent.statusUpdate({
        taskId,
        contextId,
        status: status({ taskId, contextId }, TaskState.TASK_STATE_CANCELED, [
          textPart("Canceled. Nothing was paid; a payment sent now still pays the claim."),
        ]),
        metadata: undefined,
      }),
    );
    bus.finished();
  }

  async #start(
    ids: Ids,
    message: Message,
  ): Promise<{ kind: "task"; task: Task } | { kind: "message"; message: Message }> {
    const request = readRequest(message);
    if ("type" in request) return { kind: "task", task: this.#rejected(ids, message, request) };
    const { skill, args } = request;
    switch (skill) {
      case "create_claim": {
        if (namesWebhookUrl(args)) {
          return { kind: "task", task: this.#rejected(ids, message, WEBHOOK_URL_REFUSED) };
        }
        const result = await this.#core.createClaim(args, {
          client: currentClient(),
          reuseOpenClaim: false,
        });
        if (result.type !== "created") {
          return { kind: "task", task: this.#rejected(ids, message, result) };
        }
        const base = this.#task(ids, message, { skill, claim_id: result.claim.id });
        return { kind: "task", task: followClaim(this.#core.config, base, result.claim, null) };
      }
      case "earn_with_x402": {
        if (namesWebhookUrl(args)) {
          return { kind: "task", task: this.#rejected(ids, message, WEBHOOK_URL_REFUSED) };
        }
        const task = this.#task(ids, message, { skill, [X402_REQUEST]: args });
        // A task that waits for its payment is kept (an hour) with no money behind it: capped.
        // Its row is taken before the x402 answer, in the same step as the count, so parallel
        // requests cannot all pass the cap; the SDK's save of the answer overwrites it.
        const limit = this.#core.config.agents.openTasksPerClient;
        const client = currentClient();
        const capped = limit > 0 && client !== undefined;
        if (
          capped &&
          !(await this.#core.agentTasks.reserveWaiting(storedRecord(task), client, limit))
        ) {
          return {
            kind: "task",
            task: this.#rejected(ids, message, { type: "too_many_open_tasks", limit }),
          };
        }
        try {
          return { kind: "task", task: await this.#earn(task, message) };
        } catch (error) {
          // Nothing answered: the reserved row must not hold the client's slot for an hour.
          if (capped) await this.#core.agentTasks.delete(task.id).catch(() => {});
          throw error;
        }
      }
      default:
        return { kind: "message", message: await this.#read(ids, skill, args) };
    }
  }

  /** A message on an existing task: the x402 payment it waits for, or a tx hash for its claim. */
  async #continueTask(task: Task, message: Message): Promise<{ kind: "task"; task: Task }> {
    const ids = { taskId: task.id, contextId: task.contextId };
    const history = [...task.history, message];
    if (task.status && TERMINAL_STATES.has(task.status.state)) return { kind: "task", task };
    const x402Status = message.metadata?.[X402_STATUS];
    if (task.metadata?.skill === "earn_with_x402" && !task.metadata?.claim_id) {
      if (x402Status === "payment-rejected") {
        return {
          kind: "task",
          task: {
            ...task,
            history,
            status: status(
              ids,
              TaskState.TASK_STATE_CANCELED,
              [textPart("Payment declined; nothing was paid.")],
              {
                [X402_STATUS]: "payment-rejected",
              },
            ),
          },
        };
      }
      return { kind: "task", task: await this.#earn({ ...task, history }, message) };
    }
    const claimId = task.metadata?.claim_id;
    const request = readRequest(message);
    if (
      typeof claimId === "string" &&
      !("type" in request) &&
      typeof request.args.tx_hash === "string"
    ) {
      const result = await this.#core.attachTx(claimId, { tx_hash: request.args.tx_hash });
      if (result.type !== "attached") {
        return {
          kind: "task",
          task: {
            ...task,
            history,
            status: status(
              ids,
              task.status?.state ?? TaskState.TASK_STATE_INPUT_REQUIRED,
              refusalParts(result),
            ),
          },
        };
      }
      return {
        kind: "task",
        task: followClaim(this.#core.config, { ...task, history }, result.claim, null),
      };
    }
    return {
      kind: "task",
      task: {
        ...task,
        history,
        status: status(ids, task.status?.state ?? TaskState.TASK_STATE_INPUT_REQUIRED, [
          textPart(
            "This task waits for its payment. Pay as its status says, or send a data part with " +
              'the tx_hash that paid ({"tx_hash":"0x…"}), or an x402 payment in the metadata.',
          ),
        ]),
      },
    };
  }

  /** x402 inside the task (a2a-x402 v0.2): the same records and order as POST /api/x402/earn. */
  async #earn(task: Task, message: Message): Promise<Task> {
    const ids = { taskId: task.id, contextId: task.contextId };
    const body = task.metadata?.[X402_REQUEST] as Args;
    const payload = message.metadata?.[X402_PAYLOAD];
    const result = await this.#core.earnWithX402(body, paymentSignature(payload));
    switch (result.type) {
      case "payment_required":
        return {
          ...task,
          status: status(
            ids,
            TaskState.TASK_STATE_INPUT_REQUIRED,
            [
              textPart(
                "Payment is required: sign the x402 terms in x402.payment.required and send " +
                  "the PaymentPayload as x402.payment.payload in a message on this task.",
              ),
            ],
            { [X402_STATUS]: "payment-required", [X402_REQUIRED]: result.paymentRequired },
          ),
        };
      case "payment_refused":
        return {
          ...task,
          status: status(
            ids,
            TaskState.TASK_STATE_FAILED,
            [
              textPart(paymentRefusalWords(result.reason)),
              dataPart({ error: { code: "payment_refused", reason: result.reason } }),
            ],
            {
              [X402_STATUS]: "payment-failed",
              [X402_ERROR]: result.reason,
              [X402_RECEIPTS_KEY]: [
                {
                  success: false,
                  errorReason: result.reason,
                  transaction: "",
                  network: this.#core.offer.x402.network,
                },
              ],
            },
          ),
        };
      case "settlement_unknown": {
        const pending: Task = {
          ...task,
          metadata: { ...task.metadata, claim_id: result.claim.id },
        };
        return {
          ...followClaim(this.#core.config, pending, result.claim, null),
          status: status(
            ids,
            TaskState.TASK_STATE_WORKING,
            [
              textPart(pendingAnswerView(this.#core.config, result.claim).detail),
              dataPart(pendingAnswerView(this.#core.config, result.claim)),
            ],
            { [X402_STATUS]: "payment-submitted" },
          ),
        };
      }
      case "paid": {
        const settlement = result.paymentResponse
          ? decodePaymentResponseHeader(result.paymentResponse)
          : null;
        const paid: Task = {
          ...task,
          metadata: {
            ...task.metadata,
            claim_id: result.claim.id,
            ...(settlement ? { [X402_RECEIPTS_KEY]: [settlement] } : {}),
          },
        };
        const followed = followClaim(this.#core.config, paid, result.claim, result.receipt);
        const answer = paidAnswerView(this.#core.config, result.claim, result.receipt);
        return {
          ...followed,
          status: followed.status && {
            ...followed.status,
            message: agentMessage(
              ids,
              [textPart(answer.detail ?? "Paid, settled and paid out."), dataPart(answer)],
              {
                [X402_STATUS]: "payment-completed",
                [X402_RECEIPTS_KEY]: settlement ? [settlement] : [],
              },
            ),
          },
        };
      }
      default:
        return {
          ...task,
          status: status(ids, TaskState.TASK_STATE_REJECTED, refusalParts(result), {
            [X402_STATUS]: "payment-failed",
            [X402_ERROR]: result.type,
          }),
        };
    }
  }

  async #read(
    ids: Ids,
    skill: Exclude<Skill, "create_claim" | "earn_with_x402">,
    args: Args,
  ): Promise<Message> {
    const { config } = this.#core;
    const answer = (data: unknown) => agentMessage(ids, [dataPart(data)]);
    const refused = (refusal: Refusal) => agentMessage(ids, refusalParts(refusal));
    const claimId = typeof args.claim_id === "string" ? args.claim_id : undefined;
    switch (skill) {
      case "get_offer":
        return answer(this.#core.offer);
      case "get_ledger": {
        const result = await this.#core.listLedger(args);
        return result.type === "page"
          ? answer(ledgerPageView(config, result.query, result.page))
          : refused(result);
      }
      case "get_claim": {
        if (!claimId) return refused(invalidField("claim_id", "is required"));
        const result = await this.#core.getClaim(claimId);
        return result.type === "claim" ? answer(claimView(config, result.claim)) : refused(result);
      }
      case "get_receipt": {
        if (!claimId) return refused(invalidField("claim_id", "is required"));
        const result = await this.#core.getReceipt(claimId);
        return result.type === "receipt"
          ? answer(receiptView(result.receipt, `${config.http.publicUrl}/api/receipts/verify`))
          : refused(result);
      }
      case "attach_payment_tx": {
        if (!claimId) return refused(invalidField("claim_id", "is required"));
        const { claim_id: _claimId, ...rest } = args;
        const result = await this.#core.attachTx(claimId, rest);
        return result.type === "attached"
          ? answer({
              ...claimView(config, result.claim),
              attached_tx: { tx_hash: result.txHash, state: result.state },
            })
          : refused(result);
      }
    }
  }

  #task(ids: Ids, message: Message, metadata: Record<string, unknown>): Task {
    return {
      id: ids.taskId,
      contextId: ids.contextId,
      status: status(ids, TaskState.TASK_STATE_SUBMITTED, []),
      artifacts: [],
      history: [message],
      metadata,
    };
  }

  #rejected(ids: Ids, message: Message, refusal: Refusal): Task {
    return {
      ...this.#task(ids, message, {}),
      status: status(ids, TaskState.TASK_STATE_REJECTED, refusalParts(refusal)),
    };
  }
}

/** `x402.payment.payload` (a PaymentPayload, or already encoded) as the PAYMENT-SIGNATURE. */
function paymentSignature(payload: unknown): string | undefined {
  if (payload === undefined || payload === null) return undefined;
  if (typeof payload === "string") return payload;
  try {
    return encodePaymentSignatureHeader(payload as PaymentPayload);
  } catch {
    return "not-a-payment";
  }
}
