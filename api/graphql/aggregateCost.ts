import {
  type ArgumentNode,
  type ASTVisitor,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLOutputType,
  Kind,
  type SelectionSetNode,
  type ValidationContext,
} from "graphql";
import { createGraphQLError, type Plugin } from "graphql-yoga";
import { MAX_LEDGER_DAYS } from "../ledger/readLedgerStats.ts";

/**
 * The fields that aggregate over every completed claim, weighed where graphql-armor's cost
 * limit (which counts fields and list sizes, not what a resolver does) cannot: each `stats`,
 * and each `daily` by its number of days. A query whose aggregates weigh more than the budget is
 * refused before anything runs, so aliases cannot multiply full scans (ten `daily(days: 366)`
 * under ten aliases). `days` given by a variable is weighed at its maximum (variables are not
 * known while a query is validated).
 */
export const AGGREGATE_COSTS = {
  maxCost: 1_000,
  stats: 50,
  daily: { base: 50, perDay: 2 },
} as const;

const DAILY_DEFAULT_DAYS = 30;

export function aggregateCostPlugin(): Plugin {
  return {
    onValidate({ addValidationRule }) {
      addValidationRule(aggregateCostRule);
    },
  };
}

function aggregateCostRule(context: ValidationContext): ASTVisitor {
  const schema = context.getSchema();
  const fragmentCosts = new Map<string, number>();
  const visiting = new Set<string>();

  const fieldCost = (parent: string, field: string, days: number | undefined) => {
    if (parent === "Query" && field === "stats") return AGGREGATE_COSTS.stats;
    if (parent === "Stats" && field === "daily") {
      return AGGREGATE_COSTS.daily.base + AGGREGATE_COSTS.daily.perDay * (days ?? MAX_LEDGER_DAYS);
    }
    return 0;
  };

  const fragmentCost = (fragment: FragmentDefinitionNode): number => {
    const name = fragment.name.value;
    const known = fragmentCosts.get(name);
    if (known !== undefined) return known;
    // A cycle is refused by the standard rules; here it only must not recurse forever.
    if (visiting.has(name)) return 0;
    visiting.add(name);
    const type = schema.getType(fragment.typeCondition.name.value);
    const cost = type ? costOf(fragment.selectionSet, type) : 0;
    visiting.delete(name);
    fragmentCosts.set(name, cost);
    return cost;
  };

  function costOf(selectionSet: SelectionSetNode, parent: GraphQLNamedType): number {
    let cost = 0;
    for (const selection of selectionSet.selections) {
      if (selection.kind === Kind.FIELD) {
        const definition = fieldsOf(parent)?.[selection.name.value];
        if (!definition) continue;
        cost += fieldCost(parent.name, selection.name.value, daysOf(selection.arguments));
        if (selection.selectionSet) {
          cost += costOf(selection.selectionSet, namedTypeOf(definition.type));
        }
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        const type = selection.typeCondition
          ? schema.getType(selection.typeCondition.name.value)
          : parent;
        if (type) cost += costOf(selection.selectionSet, type);
      } else {
        const fragment = context.getFragment(selection.name.value);
        if (fragment) cost += fragmentCost(fragment);
      }
    }
    return cost;
  }

  return {
    OperationDefinition(operation) {
      const root = schema.getRootType(operation.operation);
      if (!root) return;
      const cost = costOf(operation.selectionSet, root);
      if (cost > AGGREGATE_COSTS.maxCost) {
        context.reportError(
          createGraphQLError(
            `Query aggregate cost limit of ${AGGREGATE_COSTS.maxCost} exceeded, found ${cost}: each stats weighs ${AGGREGATE_COSTS.stats}, each daily ${AGGREGATE_COSTS.daily.base} plus ${AGGREGATE_COSTS.daily.perDay} per day. Ask for fewer, or fewer days.`,
            { nodes: [operation], extensions: { code: "QUERY_TOO_EXPENSIVE" } },
          ),
        );
      }
    },
  };
}

// Duck-typed rather than graphql's isObjectType/getNamedType: under vitest this file and the
// schema (built by Pothos) can load two builds of graphql, and its instanceof checks throw
// across them (docs/traps.md#graphql).
function fieldsOf(type: GraphQLNamedType): Record<string, GraphQLField<unknown, unknown>> | null {
  return "getFields" in type && typeof type.getFields === "function"
    ? (type.getFields() as Record<string, GraphQLField<unknown, unknown>>)
    : null;
}

function namedTypeOf(type: GraphQLOutputType): GraphQLNamedType {
  let named: GraphQLOutputType = type;
  while ("ofType" in named && named.ofType) named = named.ofType as GraphQLOutputType;
  return named as GraphQLNamedType;
}

/** `days` as written; undefined when it comes from a variable (weighed at the maximum). */
function daysOf(args: readonly ArgumentNode[] = []): number | undefined {
  const days = args.find((argument) => argument.name.value === "days");
  if (!days) return DAILY_DEFAULT_DAYS;
  if (days.value.kind !== Kind.INT) return undefined;
  const value = Number(days.value.value);
  return Number.isFinite(value) ? Math.min(Math.max(value, 0), MAX_LEDGER_DAYS) : undefined;
}
