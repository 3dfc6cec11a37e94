import SchemaBuilder from "@pothos/core";
import type { GraphQLError } from "graphql";
import { createGraphQLError } from "graphql-yoga";
import { z } from "zod";
import type { Core } from "../core/createCore.ts";

/**
 * The GraphQL schema at /graphql is built with Pothos, code first. Resolvers call the same
 * use-cases as REST (the service's `core`, from the context, so one schema serves any service
 * instance) and resolve fields from the domain objects they return.
 */
export interface GraphqlContext {
  core: Core;
  /** Who asks, as live streams are counted (EVENT_STREAMS_PER_CLIENT). */
  client: string;
}

export const builder = new SchemaBuilder<{
  Context: GraphqlContext;
  DefaultFieldNullability: false;
  Scalars: {
    DateTime: { Input: Date; Output: Date };
    JSON: { Input: unknown; Output: unknown };
  };
}>({ defaultFieldNullability: false });

const dateTime = z.iso.datetime({ offset: true });

function parseDateTime(value: unknown): Date {
  if (typeof value !== "string" || !dateTime.safeParse(value).success) {
    throw createGraphQLError("DateTime must be an ISO 8601 date-time, e.g. 2025-01-31T12:00:00Z");
  }
  return new Date(value);
}

builder.scalarType("DateTime", {
  description: "An instant as an ISO 8601 string in UTC (2025-01-31T12:00:00.000Z).",
  serialize: (value) => value.toISOString(),
  parseValue: parseDateTime,
});

builder.scalarType("JSON", {
  description: "Any JSON value, for documents whose shape is described elsewhere.",
  serialize: (value) => value,
  parseValue: (value) => value,
});

builder.queryType({
  description: "pay-and-earn: pay 10 USDC on Base, get 1 USDC back and a signed receipt.",
});

builder.subscriptionType({
  description: "Live changes, over Server-Sent Events (graphql-yoga's GraphQL over SSE).",
});

/**
 * A client mistake in the arguments: reported as is (not masked), with one entry per argument.
 * Built with yoga's `createGraphQLError`, not `new GraphQLError` from "graphql": under vitest
 * our sources load graphql's ESM build while yoga loads its CommonJS build, and yoga would not
 * recognise (and so would mask) an error of the other build.
 */
export function badUserInput(
  message: string,
  errors: { argument: string; message: string }[],
): GraphQLError {
  return createGraphQLError(message, { extensions: { code: "BAD_USER_INPUT", errors } });
}
