import { type DocumentNode, Kind, parse } from "graphql";
import { type PrebuiltAnswer, prebuildAnswer } from "../web/prebuiltAnswer.ts";

/**
 * Answers to GraphQL queries that read the completed ledger and nothing else (the unfiltered first
 * page, the stats), kept while the ledger is unchanged: the query every ledger view sends would
 * otherwise be parsed, validated, checked against the armor limits and executed field by field on
 * every request, over data that changes only when a claim completes (a POST /graphql ledger query
 * cost about six times the CPU of GET /api/ledger, BENCHMARKS.md#http-routes). The first request
 * for a query runs through GraphQL in full; only a successful answer is kept.
 *
 * An answer is current while `ledgerVersion()` (the completions the core has been told of) is
 * unchanged and it is younger than `maxAgeMs` (READ_CACHE_MS, the age the ledger's own shared
 * reads may have, and so today's date for the daily stats).
 *
 * A query is run once for all the requests that ask for it while its answer is being made: when
 * the kept answer expired (every READ_CACHE_MS), every request that came before the first one's
 * answer ran GraphQL in full, 50 at once under 50 clients, and the paced run's p99 rose to
 * 40-150 ms (BENCHMARKS.md#http-routes). A request joins an answer only when it was begun on
 * the ledger's current version, so none is answered from before a completion it could know of.
 */

/** Root fields whose data is the completed ledger alone. */
const LEDGER_ROOT_FIELDS = new Set(["ledger", "stats", "__typename"]);
/** `ledger` arguments that ask for another page than the shared first one. */
const LEDGER_PAGE_ARGUMENTS = new Set(["first"]);
/** Bounds on what is remembered: distinct query texts are the client's to choose. */
const MAX_KEPT_ANSWERS = 64;
const MAX_JUDGED_QUERIES = 512;

export interface LedgerAnswers {
  /** The key under which this request's answer may be kept, or null when it may not. */
  keyFor(body: unknown, accept: string | undefined): string | null;
  /** The kept answer for `key`, if it is still current. */
  current(key: string): PrebuiltAnswer | undefined;
  /**
   * The answer `run` makes for `key`, or the one an earlier request's run is making on the
   * current version; kept when it is a success read on a version still current.
   */
  answer(key: string, run: () => Promise<MadeAnswer>): Promise<PrebuiltAnswer>;
}

/** What GraphQL answered a query. */
export interface MadeAnswer {
  status: number;
  contentType: string;
  body: string;
}

export function ledgerAnswers(ledgerVersion: () => number, maxAgeMs: number): LedgerAnswers {
  const judged = new Map<string, boolean>();
  const kept = new Map<string, { answer: PrebuiltAnswer; version: number; keptAt: number }>();
  const making = new Map<string, { answer: Promise<PrebuiltAnswer>; version: number }>();

  function keep(key: string, version: number, made: MadeAnswer, answer: PrebuiltAnswer): void {
    if (made.status !== 200 || version !== ledgerVersion() || hasErrors(made.body)) return;
    if (kept.size >= MAX_KEPT_ANSWERS) kept.clear();
    kept.set(key, { answer, version, keptAt: Date.now() });
  }

  return {
    keyFor(body, accept) {
      if (!body || typeof body !== "object" || Array.isArray(body)) return null;
      const { query, operationName, variables, extensions, ...rest } = body as Record<
        string,
        unknown
      >;
      if (typeof query !== "string" || Object.keys(rest).length > 0) return null;
      if (extensions !== undefined || !isEmpty(variables)) return null;
      if (operationName != null && typeof operationName !== "string") return null;
      // An empty name is no name to yoga but a refusal (400): never the same answer as none.
      if (operationName === "") return null;
      let readsLedgerOnly = judged.get(query);
      if (readsLedgerOnly === undefined) {
        readsLedgerOnly = readsTheLedgerOnly(query);
        if (judged.size >= MAX_JUDGED_QUERIES) judged.clear();
        judged.set(query, readsLedgerOnly);
      }
      if (!readsLedgerOnly) return null;
      return `${accept ?? ""}\n${operationName ?? ""}\n${query}`;
    },
    current(key) {
      const entry = kept.get(key);
      if (!entry) return undefined;
      if (entry.version !== ledgerVersion() || Date.now() - entry.keptAt >= maxAgeMs) {
        kept.delete(key);
        return undefined;
      }
      return entry.answer;
    },
    answer(key, run) {
      const version = ledgerVersion();
      const begun = making.get(key);
      if (begun?.version === version) return begun.answer;
      const answer = run().then((made) => {
        const prebuilt = prebuildAnswer({
          body: made.body,
          contentType: made.contentType,
          cacheControl: "no-store",
          status: made.status,
        });
        keep(key, version, made, prebuilt);
        return prebuilt;
      });
      const entry = { answer, version };
      making.set(key, entry);
      // Forgotten once settled (a failure too: the next request runs the query again), unless a
      // run on a newer version has taken its place meanwhile.
      const forget = () => {
        if (making.get(key) === entry) making.delete(key);
      };
      answer.then(forget, forget);
      return answer;
    },
  };
}

function isEmpty(variables: unknown): boolean {
  if (variables === undefined || variables === null) return true;
  return typeof variables === "object" && Object.keys(variables).length === 0;
}

/**
 * One query operation, no variables or directives, whose root fields are all ledger fields,
 * and whose `ledger` asks for the first page of all entries (no cursor, no filter). Fields
 * below the root only shape what the ledger holds.
 */
export function readsTheLedgerOnly(query: string): boolean {
  let document: DocumentNode;
  try {
    document = parse(query, { noLocation: true });
  } catch {
    return false;
  }
  if (document.definitions.length !== 1) return false;
  const operation = document.definitions[0];
  if (operation?.kind !== Kind.OPERATION_DEFINITION || operation.operation !== "query") {
    return false;
  }
  if (operation.variableDefinitions?.length || operation.directives?.length) return false;
  return operation.selectionSet.selections.every(
    (selection) =>
      selection.kind === Kind.FIELD &&
      !selection.directives?.length &&
      LEDGER_ROOT_FIELDS.has(selection.name.value) &&
      (selection.name.value !== "ledger" ||
        (selection.arguments ?? []).every((argument) =>
          LEDGER_PAGE_ARGUMENTS.has(argument.name.value),
        )),
  );
}

function hasErrors(body: string): boolean {
  try {
    const parsed = JSON.parse(body) as { errors?: unknown };
    return parsed.errors !== undefined;
  } catch {
    return true;
  }
}
