import type { Command } from "commander";
import { z } from "zod";
import type { ServiceConfig } from "../../api/config/serviceConfig.ts";
import { EVENT_TYPE_NAMES } from "../../api/schemas/events.ts";
import { webhookUrlInput } from "../../api/schemas/inputs.ts";
import { checkedOption, type GlobalOptions } from "../commands/options.ts";
import { CliError } from "../errors.ts";
import { createOutput, type Output } from "../output.ts";
import type { OperatorConnections } from "./operatorContext.ts";

const eventTypesInput = z
  .string()
  .transform((value) =>
    value
      .split(",")
      .map((type) => type.trim())
      .filter((type) => type !== ""),
  )
  .pipe(
    z.array(z.enum(EVENT_TYPE_NAMES, { message: `must be among ${EVENT_TYPE_NAMES.join(", ")}` })),
  );
const limitInput = z.coerce.number({ message: "is not a number" }).int().min(1).max(1000);
const deliveryIdInput = z.string().regex(/^\d{1,18}$/, { message: "is not a delivery id" });

/** Runs `work` with the service's database, as every operator command does. */
async function withDatabase<T>(
  work: (connections: OperatorConnections, config: ServiceConfig) => Promise<T>,
): Promise<T> {
  const { connect, requireServiceConfig } = await import("./operatorContext.ts");
  const config = requireServiceConfig();
  const connections = connect(config);
  try {
    return await work(connections, config);
  } finally {
    await connections.close();
  }
}

const outputOf = (command: Command): Output =>
  createOutput(command.optsWithGlobals<GlobalOptions>());

/**
 * `pay-and-earn webhooks …`: the operator's webhook endpoints (docs/events.md#webhooks): add
 * one (its secret is printed once), list them, see the deliveries given up, send them again.
 */
export function registerWebhooks(program: Command): void {
  const webhooks = program
    .command("webhooks")
    .description(
      "operator: webhook endpoints, failed deliveries and redelivery (reads the service's configuration)",
    );

  webhooks
    .command("add <url>")
    .description("register an endpoint; prints its signing secret once")
    .option(
      "--events <types>",
      `comma-separated event types (default: all): ${EVENT_TYPE_NAMES.join(", ")}`,
    )
    .option("--description <text>", "what it is, for the list")
    .action(
      async (url: string, options: { events?: string; description?: string }, command: Command) => {
        const output = outputOf(command);
        const checkedUrl = checkedOption("<url>", webhookUrlInput, url);
        const eventTypes = options.events
          ? checkedOption("--events", eventTypesInput, options.events)
          : [];
        const { addOperatorEndpoint } = await import("../../api/webhooks/webhookEndpoints.ts");
        const { refusedWebhookUrl } = await import("../../api/webhooks/publicAddress.ts");
        const endpoint = await withDatabase(({ sql }, config) => {
          const refused = refusedWebhookUrl(new URL(checkedUrl), config.webhooks.allowLoopback);
          if (refused) throw new CliError("invalid_option", `invalid_option: <url> ${refused}`, 2);
          return addOperatorEndpoint(sql, {
            url: new URL(checkedUrl).href,
            eventTypes,
            description: options.description ?? null,
          });
        });
        output.result({
          id: endpoint.id,
          url: endpoint.url,
          event_types: endpoint.event_types,
          secret: endpoint.secret,
        });
        output.fields([
          ["endpoint", endpoint.id],
          ["url", endpoint.url],
          ["events", eventTypes.length > 0 ? eventTypes.join(", ") : "all"],
          ["secret", endpoint.secret],
        ]);
        output.line(
          "Keep the secret: receivers verify each delivery with it (Standard Webhooks). It is not shown again.",
        );
      },
    );

  webhooks
    .command("list")
    .description("the endpoints, with their pending and failed deliveries")
    .action(async (_options: unknown, command: Command) => {
      const output = outputOf(command);
      const { listEndpoints } = await import("../../api/webhooks/webhookEndpoints.ts");
      const endpoints = await withDatabase(({ sql }) => listEndpoints(sql));
      output.result({ endpoints });
      if (endpoints.length === 0)
        output.line("No webhook endpoints. Add one: pay-and-earn webhooks add <url>");
      for (const endpoint of endpoints) {
        const state = endpoint.disabled_at
          ? `disabled ${endpoint.disabled_at.toISOString()} (${endpoint.disabled_reason})`
          : endpoint.failing_since
            ? `failing since ${endpoint.failing_since.toISOString()}`
            : "enabled";
        output.line(`${endpoint.id}  ${endpoint.url}  ${state}`);
        output.line(
          `  events: ${endpoint.event_types.length > 0 ? endpoint.event_types.join(", ") : "all"}; pending ${endpoint.pending}, failed ${endpoint.failed}`,
        );
      }
    });

  webhooks
    .command("failures")
    .description("deliveries given up (retries spent or endpoint disabled), newest first")
    .option("--endpoint <id>", "only this endpoint's")
    .option("--limit <n>", "at most this many", "100")
    .action(async (options: { endpoint?: string; limit: string }, command: Command) => {
      const output = outputOf(command);
      const limit = checkedOption("--limit", limitInput, options.limit);
      const { listFailedDeliveries } = await import("../../api/webhooks/webhookDeliveries.ts");
      const failures = await withDatabase(({ sql }) =>
        listFailedDeliveries(sql, { endpointId: options.endpoint, limit }),
      );
      output.result({ failures });
      if (failures.length === 0) output.line("No failed deliveries.");
      for (const failure of failures) {
        output.line(
          `${failure.id}  evt_${failure.event_id}  ${failure.type}  ${failure.claim_id ?? "-"}  ${failure.url}`,
        );
        output.line(
          `  ${failure.attempts} attempts, last ${failure.last_attempt_at?.toISOString() ?? "never"}: ${failure.last_error ?? `answered ${failure.last_status}`}`,
        );
      }
    });

  webhooks
    .command("redeliver [deliveryIds...]")
    .description("send failed deliveries again (marked as redeliveries); enables their endpoints")
    .option("--endpoint <id>", "every failed delivery of this endpoint")
    .action(async (ids: string[], options: { endpoint?: string }, command: Command) => {
      const output = outputOf(command);
      if ((ids.length === 0) === (options.endpoint === undefined)) {
        throw new CliError(
          "invalid_option",
          "invalid_option: name delivery ids (from `webhooks failures`) or --endpoint, not both",
          2,
        );
      }
      const deliveryIds = ids.map((id) =>
        BigInt(checkedOption("<deliveryIds>", deliveryIdInput, id)),
      );
      const { redeliver } = await import("../../api/webhooks/webhookDeliveries.ts");
      const count = await withDatabase(({ sql }) =>
        redeliver(sql, options.endpoint ? { endpointId: options.endpoint } : { deliveryIds }),
      );
      output.result({ redelivered: count });
      output.line(`${count} deliveries queued again.`);
    });
}
