import type { TaskPushNotificationConfig } from "@a2a-js/sdk";
import { A2A_CONTENT_TYPE, StreamResponse, type Task, TaskState } from "@a2a-js/sdk";
import { RequestMalformedError } from "@a2a-js/sdk/errors";
import type {
  PushNotificationSender,
  PushNotificationStore,
  ServerCallContext,
} from "@a2a-js/sdk/server";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Core } from "../core/createCore.ts";
import { claimOfEvent, eventEnvelope, type StoredEvent } from "../events/eventEnvelope.ts";
import { agentMessage, dataPart, followClaim, textPart } from "./taskViews.ts";

/** Where a push notification says which event it carries (the envelope's id, type and time). */
export const PUSH_EVENT_KEY = "pay-and-earn.event";

/**
 * The SDK's push notification store on the webhook outbox's endpoints (through the core): a
 * config set over A2A is an endpoint for the events of its task's claim, delivered by the
 * webhook worker, signed per Standard Webhooks, to public addresses only, retried, in order
 * (docs/events.md#a2a-push-notifications). A config read back (get, list) shows no token and no
 * credentials: anyone who has a task's id may read its configs.
 */
export class ClaimPushConfigStore implements PushNotificationStore {
  readonly #core: Core;

  constructor(core: Core) {
    this.#core = core;
  }

  async save(
    taskId: string,
    _context: ServerCallContext,
    config: TaskPushNotificationConfig,
  ): Promise<void> {
    // The SDK reads the id the store assigns from the config it passed (its interface says so).
    if (!config.id) config.id = crypto.randomUUID();
    const saved = await this.#core.agentTasks.pushConfigs.save({
      taskId,
      id: config.id,
      url: config.url,
      token: config.token ?? "",
      authentication: config.authentication?.scheme
        ? {
            scheme: config.authentication.scheme,
            credentials: config.authentication.credentials ?? "",
          }
        : null,
    });
    if (saved.type === "refused") {
      throw new RequestMalformedError(`taskPushNotificationConfig: ${saved.why}`);
    }
  }

  async load(taskId: string): Promise<TaskPushNotificationConfig[]> {
    const configs = await this.#core.agentTasks.pushConfigs.list(taskId);
    return configs.map((config) => ({
      tenant: "",
      id: config.id,
      taskId,
      url: config.url,
      token: "",
      authentication: config.authentication
        ? { scheme: config.authentication.scheme, credentials: "" }
        : undefined,
    }));
  }

  async delete(taskId: string, _context: ServerCallContext, configId?: string): Promise<void> {
    // As the SDK's own store: no id names the config whose id is the task's.
    await this.#core.agentTasks.pushConfigs.delete(taskId, configId ?? taskId);
  }
}

/**
 * The SDK would post each task event itself, from the process that made it, unsigned, to any
 * address, and forget it on a crash. The webhook worker delivers instead, from the claim's
 * events: this sender sends nothing.
 */
export const outboxPushSender: PushNotificationSender = {
  send: async () => {},
};

/**
 * The body of an A2A push notification for one event of a task's claim: a `StreamResponse` as
 * A2A 1.0 serializes it (`application/a2a+json`). A claim's change is a `statusUpdate` with the
 * task's state for it (as GetTask would show it then: the claim view in a data part); an
 * unmatched payment naming the claim is a `message`. Both carry the event's envelope id, type
 * and time in their metadata.
 */
export function a2aPushNotification(
  config: ServiceConfig,
  event: StoredEvent,
  ids: { taskId: string; contextId: string },
): { body: string; contentType: string } {
  const envelope = eventEnvelope(config, event);
  const metadata = {
    [PUSH_EVENT_KEY]: { id: envelope.id, type: envelope.type, time: envelope.time },
  };
  const claim = claimOfEvent(event);
  let response: StreamResponse;
  if (claim) {
    const task: Task = {
      id: ids.taskId,
      contextId: ids.contextId,
      status: undefined,
      artifacts: [],
      history: [],
      metadata: undefined,
    };
    const followed = followClaim(config, task, claim, null);
    const status = followed.status ?? { state: TaskState.TASK_STATE_WORKING, message: undefined };
    response = {
      payload: {
        $case: "statusUpdate",
        value: {
          taskId: ids.taskId,
          contextId: ids.contextId,
          status: { ...status, timestamp: envelope.time },
          metadata,
        },
      },
    };
  } else {
    response = {
      payload: {
        $case: "message",
        value: agentMessage(
          ids,
          [
            textPart(`A payment for this claim was not matched (${envelope.type}).`),
            dataPart(envelope.data),
          ],
          metadata,
        ),
      },
    };
  }
  return { body: JSON.stringify(StreamResponse.toJSON(response)), contentType: A2A_CONTENT_TYPE };
}
