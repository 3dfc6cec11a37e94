import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * ARCHITECTURE.md's import rules, held against the code: each part of api/ stands on one of six
 * layers and imports only from its own layer or below, parts never import each other in a
 * loop, the domain keeps its own order and the core's use-cases know no web plumbing, no
 * surface imports another, and only the surfaces (with the web plumbing under them) know a web
 * framework. A new folder must be given a layer here.
 */

const LAYERS: Record<string, string[]> = {
  // values, settings, the database and its migrations, the reasons, the wire schemas, the
  // service's keys, the worker loop: nothing here knows a claim
  foundation: [
    "money.ts",
    "withTimeout.ts",
    "readCache.ts",
    "redaction.ts",
    "logger.ts",
    "logLines.ts",
    "requestLines.ts",
    "crashHook.ts",
    "serviceDeps.ts",
    "config",
    "db",
    "reasons",
    "schemas",
    "html",
    "signing",
    "workers",
  ],
  // what the chain says, and stored records that take no decision: A2A tasks, counters
  facts: ["chain", "agentTasks", "rateLimits"],
  // the rules and use-cases: claims and their one writer per transition, receipts, payouts,
  // x402, the matcher, what the service does with a mail and its mailbox, the ledger, and what
  // the service says about itself
  domain: [
    "matching",
    "receipts",
    "lifecycle",
    "claims",
    "payments",
    "ledger",
    "offer",
    "payouts",
    "matcher",
    "x402",
    "mailRequests",
    "mailbox",
    "events",
    "webhooks",
    "health",
    "metrics",
    "openapi",
  ],
  // what every surface stands on: the use-cases bound once, and the shared web plumbing
  core: ["core", "web"],
  // surfaces (adapters): they translate the core's results into their protocol
  surfaces: ["http", "graphql", "pages", "mcp", "a2a", "mail"],
  // the composition root and the process
  root: ["service.ts", "main.ts"],
};

/**
 * The order inside the domain, lowest first: the rules a claim's life stands on (which transfer
 * pays which claim, the signed receipt), then the one writer of each claim transition; the rest
 * of the domain stands on these and on each other (without a loop). A part imports no part of
 * its own step or a higher one.
 */
const DOMAIN_STEPS = [["matching", "receipts"], ["lifecycle"]];

/** Imports that break the domain's order on purpose, file to file, and why. */
const DOMAIN_ORDER_EXCEPTIONS = new Set([
  // A completion queues its receipt mails in the completing transaction, through the outbox's
  // one writer (ARCHITECTURE.md#one-writer-per-table); outbox.ts imports only the foundation.
  "lifecycle/completeClaims.ts -> mailbox/outbox.ts",
]);

/** Inside the core's layer: the use-cases know no web, the web plumbing may call them. */
const CORE_WITHOUT_WEB = { from: "core", to: "web" };

const ORDER = Object.values(LAYERS);
const SURFACES = new Set(LAYERS.surfaces);
/** Who may know a web framework: the surfaces, their plumbing, and the root that mounts them. */
const WEB_FRAMEWORK = new Set([...(LAYERS.surfaces ?? []), "web", "service.ts"]);
const apiRoot = resolve(import.meta.dirname, "..", "..", "api");

/** Code files: TypeScript and JavaScript, whichever module flavour. */
const CODE_FILE = /\.[cm]?[jt]s$/;

function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return CODE_FILE.test(entry.name) ? [path] : [];
  });
}

/** `claims` for api/claims/x.ts, `service.ts` for api/service.ts. */
function partOf(file: string): string {
  return relative(apiRoot, file).split("/")[0] as string;
}

function layerOf(part: string): number {
  const layer = ORDER.findIndex((parts) => parts.includes(part));
  if (layer < 0) throw new Error(`api/${part} has no layer in test/unit/architecture.test.ts`);
  return layer;
}

/**
 * The one module (a file, or a folder ending in /) that writes each table of schema `app`, from
 * the repository's root; ARCHITECTURE.md#one-writer-per-table lists their transitions. The SQL
 * functions of api/db/definitions/ that write (`app.create_claim(s)`: claims and amount
 * reservations) are called only by their callers, FUNCTION_CALLERS below.
 */
const TABLE_OWNERS: Record<string, string> = {
  claims: "api/lifecycle/",
  amount_reservations: "api/lifecycle/releaseReservations.ts",
  payments: "api/lifecycle/recordPayments.ts",
  unmatched_transfers: "api/lifecycle/recordPayments.ts",
  x402_payments: "api/lifecycle/x402Records.ts",
  payouts: "api/payouts/payoutRecords.ts",
  payout_attempts: "api/payouts/payoutRecords.ts",
  nonce_fillers: "api/payouts/fillNonceGaps.ts",
  receipts: "api/receipts/",
  withdrawn_receipts: "api/receipts/withdrawReceipts.ts",
  outbox: "api/mailbox/outbox.ts",
  mail_messages: "api/mailbox/inboundMessages.ts",
  mail_messages_pruned: "api/mailbox/inboundMessages.ts",
  mail_intake: "api/mailbox/mailStatus.ts",
  a2a_tasks: "api/agentTasks/taskRecords.ts",
  matcher_blocks: "api/matcher/matcherBlocks.ts",
  matcher_cursor: "api/matcher/matchNextBatch.ts",
  rate_limits: "api/rateLimits/rateLimitCounter.ts",
  schema_migrations: "api/db/migrate.ts",
  schema_definitions: "api/db/migrate.ts",
  // events are written by the database's triggers (FUNCTION_CALLERS); webhooks/ marks them fanned out
  events: "api/webhooks/",
  webhook_endpoints: "api/webhooks/",
  webhook_deliveries: "api/webhooks/",
  // kept by triggers as entries come and go: no code of the service writes them
  ledger_days: "api/db/definitions/ledger_stats.sql",
  ledger_day_payees: "api/db/definitions/ledger_stats.sql",
  ledger_payees: "api/db/definitions/ledger_stats.sql",
  ledger_totals: "api/db/definitions/ledger_stats.sql",
  ledger_backfill: "api/db/definitions/ledger_stats.sql",
  // the scrape's counts: appended by the triggers of row_counts.sql, folded and counted once by
  // its functions (FUNCTION_CALLERS), which the row-counts worker calls
  row_counts: "api/db/definitions/row_counts.sql",
  row_count_changes: "api/db/definitions/row_counts.sql",
  row_count_state: "api/db/definitions/row_counts.sql",
  attention_checked: "api/health/attentionChecked.ts",
  attention_held: "api/health/attentionChecked.ts",
};

/**
 * Files that write tables without being their owner, and why: none of them runs in the
 * service or its command.
 */
const NOT_THE_SERVICE = new Set([
  // bench:scale's year of rows, written set-based straight into the database, triggers off
  // (BENCHMARKS.md#a-year-of-traffic): a benchmark's fixture, not a transition
  "scripts/bench/yearOfTraffic.ts",
  // bench:ledger-count's claims, written the same way, and the writes it times against the count
  "scripts/bench/ledgerCount.ts",
  // bench:ledger-triggers' claims, taken through the writes it times with the triggers on and off
  "scripts/bench/ledgerTriggers.ts",
  // bench:claims-db's held amount space (BENCH_SPACE_HELD), written the same way before it times
  // the creations
  "scripts/bench/claimCreationsDb.ts",
]);

const repositoryRoot = resolve(apiRoot, "..");

/**
 * Who may call each SQL function of api/db/definitions/ that writes a table, and so writes it
 * outside the table's owner (ARCHITECTURE.md#one-writer-per-table, the claims' row). A new
 * function that writes must be named here.
 */
const FUNCTION_CALLERS: Record<string, string[]> = {
  create_claim: ["api/claims/insertClaim.ts"],
  create_claims: ["api/claims/openClaims.ts"],
  // called only by the two above, inside the database
  take_claim_amount: [],
  // triggers on app.claims and app.unmatched_transfers (api/db/definitions/events.sql): every
  // change writes its event in its own transaction, whoever made it
  record_created_claims: [],
  record_changed_claims: [],
  // the row trigger on amount_due alone: app.take_claim_amount's update, in the creation
  record_taken_amount: [],
  record_unmatched_transfers: [],
  // the ledger's figures: moved only by the triggers of ledger_stats.sql, counted once by the
  // ledger count worker after the start (and by the benchmark's year, NOT_THE_SERVICE, after
  // writing with triggers off)
  ledger_move_payee: [],
  ledger_move_day: [],
  ledger_move_received: [],
  count_ledger_figures: ["api/ledger/ledgerCountWorker.ts"],
  // the scrape's counts (api/db/definitions/row_counts.sql): the triggers append every change;
  // the row-counts worker folds them and counts every row once, through api/db/rowCounts.ts
  count_changed_claims: [],
  count_changed_payouts: [],
  count_changed_outbox: [],
  count_changed_mail_messages: [],
  count_truncated: [],
  fold_row_count_changes: ["api/db/rowCounts.ts"],
  count_rows: ["api/db/rowCounts.ts"],
};

/*
 * The pieces of an SQL statement the scan reads. Between two words there may be blanks or
 * comments of either kind; a name may be quoted, or be an interpolation `${…}` of the code.
 */
const GAP = String.raw`(?:\s|/\*[\s\S]*?\*/|--[^\n]*\n)+`;
const NAME = String.raw`(?:"[^"\n]*"|\$\{[^}]*\}|\w+)`;
const QUALIFIED_NAME = String.raw`${NAME}(?:(?:${GAP})?\.(?:${GAP})?${NAME})?`;
const ONLY = `(?:only${GAP})?`;
const ONE_TABLE = new RegExp(`${ONLY}(${QUALIFIED_NAME})`, "gi");
const WRITE = new RegExp(
  [
    String.raw`\b(?:insert${GAP}into|update|delete${GAP}from|merge${GAP}into)${GAP}${ONLY}(${QUALIFIED_NAME})`,
    // every table of the list
    String.raw`\btruncate(?:${GAP}table)?${GAP}(${ONLY}${QUALIFIED_NAME}(?:(?:${GAP})?,(?:${GAP})?${ONLY}${QUALIFIED_NAME})*)`,
    // `copy … to` reads; `copy … from` writes
    String.raw`\bcopy${GAP}(${QUALIFIED_NAME})(?:(?:${GAP})?\([^)]*\))?${GAP}from\b`,
    // a call of a function of `app`: those that write are told apart in writesIn
    String.raw`\b(?:app|"app")(?:${GAP})?\.(?:${GAP})?"?(\w+)"?(?:${GAP})?\(`,
  ].join("|"),
  "gi",
);

/**
 * The table of `app` a written name stands for: `null` when the code interpolates it (no one can
 * tell which table that is), `undefined` for a table of another schema (Ponder's, say).
 */
function appTable(qualifiedName: string): string | null | undefined {
  if (qualifiedName.includes("${")) return null;
  const [schema, table, ...more] = qualifiedName
    .replace(new RegExp(GAP, "g"), "")
    .split(".")
    .map((part) => part.replace(/"/g, "").toLowerCase());
  return schema === "app" && table !== undefined && more.length === 0 ? table : undefined;
}

/** What each function of api/db/definitions/ writes, by the same scan: `create_claim` → claims, … */
function tablesWrittenByFunctions(): Map<string, string[]> {
  const definitions = join(apiRoot, "db", "definitions");
  const written = new Map<string, string[]>();
  for (const file of readdirSync(definitions)) {
    const text = readFileSync(join(definitions, file), "utf8");
    const functions = text
      .split(/\bcreate\s+or\s+replace\s+(?:function|procedure)\s+app\./i)
      .slice(1);
    for (const definition of functions) {
      const name = (definition.match(/^\w+/) as RegExpMatchArray)[0].toLowerCase();
      const tables = writesIn(definition, file, new Map()).flatMap((write) => write.table ?? []);
      if (tables.length > 0) written.set(name, [...new Set(tables)].sort());
    }
  }
  return written;
}

interface TableWrite {
  file: string;
  /** The table of `app` written, or `null` when the statement interpolates it. */
  table: string | null;
  /** The SQL function of api/db/definitions/ the write goes through, when it is a call. */
  through?: string;
  statement: string;
}

/**
 * Each write of a table of `app` in `text`, by table name: an insert, update, delete, merge,
 * truncate or `copy … from`, and a call of a function of `functions` (name → tables it writes).
 */
function writesIn(text: string, file = "", functions = WRITING_FUNCTIONS): TableWrite[] {
  return [...text.matchAll(WRITE)].flatMap((match) => {
    const statement = (match[0] as string).replace(/\s+/g, " ");
    const [, target, truncated, copied, called] = match;
    if (called !== undefined) {
      const tables = functions.get(called.toLowerCase()) ?? [];
      return tables.map((table) => ({ file, table, through: called.toLowerCase(), statement }));
    }
    const names =
      truncated !== undefined
        ? [...truncated.matchAll(ONE_TABLE)].map((name) => name[1] as string)
        : [(target ?? copied) as string];
    return names.flatMap((name) => {
      const table = appTable(name);
      return table === undefined ? [] : [{ file, table, statement }];
    });
  });
}

const WRITING_FUNCTIONS = tablesWrittenByFunctions();

/** The writes of the service, its command, its scripts and the indexer; migrations are not read. */
function writes(): TableWrite[] {
  return ["api", "cli", "scripts", "src"]
    .flatMap((folder) => sourceFiles(join(repositoryRoot, folder)))
    .flatMap((file) => writesIn(readFileSync(file, "utf8"), relative(repositoryRoot, file)));
}

interface Import {
  from: string;
  to: string;
  line: string;
}

function imports(): Import[] {
  return sourceFiles(apiRoot).flatMap((file) =>
    [...readFileSync(file, "utf8").matchAll(/^(?:import|export)[^;]*?from "(\.[^"]+)";/gms)].map(
      (match) => ({
        from: file,
        to: resolve(dirname(file), match[1] as string),
        line: (match[0] as string).replace(/\s+/g, " "),
      }),
    ),
  );
}

describe("the service's architecture (ARCHITECTURE.md)", () => {
  const all = imports().filter((entry) => entry.to.startsWith(apiRoot));

  it("has no import from a lower layer up into a higher one", () => {
    const upward = all
      .filter((entry) => layerOf(partOf(entry.to)) > layerOf(partOf(entry.from)))
      .map((entry) => `${relative(apiRoot, entry.from)}: ${entry.line}`);
    expect(upward).toEqual([]);
  });

  it("keeps the order inside the domain: matching and receipts, then lifecycle, then the rest", () => {
    const domain = new Set(LAYERS.domain);
    const stepOf = (part: string) => {
      const step = DOMAIN_STEPS.findIndex((parts) => parts.includes(part));
      return step < 0 ? DOMAIN_STEPS.length : step;
    };
    const disordered = all
      .filter((entry) => {
        const [from, to] = [partOf(entry.from), partOf(entry.to)];
        if (from === to || !domain.has(from) || !domain.has(to)) return false;
        const inTheRest = stepOf(from) === DOMAIN_STEPS.length;
        return !(stepOf(to) < stepOf(from) || (inTheRest && stepOf(to) === stepOf(from)));
      })
      .map((entry) => `${relative(apiRoot, entry.from)} -> ${relative(apiRoot, entry.to)}`)
      .filter((edge) => !DOMAIN_ORDER_EXCEPTIONS.has(edge));
    expect(disordered).toEqual([]);
  });

  it("keeps the core's use-cases free of the web plumbing beside them", () => {
    const intoWeb = all
      .filter(
        (entry) =>
          partOf(entry.from) === CORE_WITHOUT_WEB.from && partOf(entry.to) === CORE_WITHOUT_WEB.to,
      )
      .map((entry) => `${relative(apiRoot, entry.from)}: ${entry.line}`);
    expect(intoWeb).toEqual([]);
  });

  it("has no loop of imports between parts", () => {
    const edges = new Map<string, Set<string>>();
    for (const entry of all) {
      const [from, to] = [partOf(entry.from), partOf(entry.to)];
      if (from === to) continue;
      edges.set(from, (edges.get(from) ?? new Set()).add(to));
    }
    const reaches = (start: string, goal: string, seen = new Set<string>()): boolean => {
      for (const next of edges.get(start) ?? []) {
        if (next === goal) return true;
        if (!seen.has(next)) {
          seen.add(next);
          if (reaches(next, goal, seen)) return true;
        }
      }
      return false;
    };
    const loops = [...edges.keys()].filter((part) => reaches(part, part));
    expect(loops).toEqual([]);
  });

  it("has no surface importing another: what two share lives below them (web/, core/)", () => {
    const across = all
      .filter((entry) => {
        const [from, to] = [partOf(entry.from), partOf(entry.to)];
        return from !== to && SURFACES.has(from) && SURFACES.has(to);
      })
      .map((entry) => `${relative(apiRoot, entry.from)}: ${entry.line}`);
    expect(across).toEqual([]);
  });

  it("lets only the surfaces, their web plumbing and the composition root know a web framework", () => {
    const framework = sourceFiles(apiRoot)
      .filter((file) => /from "(express|graphql-yoga|hono)"/.test(readFileSync(file, "utf8")))
      .map((file) => partOf(file))
      .filter((part) => !WEB_FRAMEWORK.has(part));
    expect(framework).toEqual([]);
  });

  it("has one writer per table: every insert, update and delete of app.<table> in its owner", () => {
    const strays = writes()
      .filter((write) => !NOT_THE_SERVICE.has(write.file))
      .flatMap((write) => {
        const where = `${write.file}: ${write.statement}`;
        if (write.table === null) {
          return [`${where}: the table is interpolated, so its one writer cannot be checked`];
        }
        if (write.through !== undefined) {
          const callers = FUNCTION_CALLERS[write.through] ?? [];
          return callers.includes(write.file)
            ? []
            : [`${where} writes ${write.table} (callers: ${callers.join(", ") || "none"})`];
        }
        const owner = TABLE_OWNERS[write.table];
        const isOwner =
          owner !== undefined &&
          (owner.endsWith("/") ? write.file.startsWith(owner) : write.file === owner);
        return isOwner ? [] : [`${where} (owner: ${owner ?? "none"})`];
      });
    expect(strays).toEqual([]);
  });

  it("types an owner's parameter named transaction as a Transaction, so the pool cannot be passed", () => {
    const owners = Object.values(TABLE_OWNERS).map((owner) => join(repositoryRoot, owner));
    const untyped = sourceFiles(apiRoot)
      .filter((file) => owners.some((owner) => file === owner || file.startsWith(owner)))
      .flatMap((file) =>
        [
          ...readFileSync(file, "utf8").matchAll(
            /(?:\(|^\s+)(?:transaction|tx)\??:\s*(?!Transaction\b)[A-Z]\w*/gm,
          ),
        ].map((match) => `${relative(repositoryRoot, file)}: ${match[0].trim()}`),
      );
    expect(untyped).toEqual([]);
  });

  it("names the callers of every SQL function that writes a table", () => {
    expect([...WRITING_FUNCTIONS.keys()].sort()).toEqual(Object.keys(FUNCTION_CALLERS).sort());
  });

  it("finds a write to a table whatever its alias or spacing", () => {
    const found = [
      "update app.claims c set status = 'paid'",
      "insert into app.outbox as o (claim_id) values ($1)",
      "delete from app.unmatched_transfers u using unnest($1)",
      "update\n      app.x402_payments x\n      set status = 'settled'",
      "insert into app.payouts $1",
      "with moved as (update only app.payouts p set status = 'broadcast') select 1",
      "select * from app.claims where status = 'paid' for update",
      'update "app"."claims" set status = \'paid\'',
      'insert into app."payouts" (nonce) values ($1)',
      "update /* x */ app.claims set status = 'paid'",
      "delete from -- x\n app.payouts where nonce = $1",
      // the code's own interpolations, as the scan reads them in a file
      `insert into app.\${table} (id) values ($1)`,
      `update \${sql("app.claims")} set status = 'paid'`,
      "truncate app.claims, only app.payouts",
      "copy app.payments (tx_hash) from stdin",
      "copy app.payments to stdout",
      "select * from app.create_claim($1, $2)",
      `select * from app.create_claims(\${batch})`,
      "select * from app.claim_to_reuse($1, $2, $3, $4)",
      "update chain.blocks set hash = $1",
    ].map((text) => writesIn(text).map((write) => write.table));
    expect(found).toEqual([
      ["claims"],
      ["outbox"],
      ["unmatched_transfers"],
      ["x402_payments"],
      ["payouts"],
      ["payouts"],
      [],
      ["claims"],
      ["payouts"],
      ["claims"],
      ["payouts"],
      [null],
      [null],
      ["claims", "payouts"],
      ["payments"],
      [],
      ["amount_reservations", "claims"],
      ["amount_reservations", "claims"],
      [],
      [],
    ]);
  });
});
