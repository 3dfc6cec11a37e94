/**
 * Statements that would rewrite a table of the service, or hold a lock on it while reading every
 * row, in a migration: each migration runs while the service serves
 * (docs/operating.md#migrations-at-size). Found by reading the SQL, statement by statement;
 * comments, string literals and function bodies ($$ … $$) are not statements of the migration.
 */

import { isOutsideTransaction } from "../../api/db/migrate.ts";

/**
 * The tables that stay small by design (a row per intake, per status, per gap in the nonces, per
 * migration): every other table of schema app grows with traffic, or may, and a new table is
 * taken as growing until it is named here.
 */
export const SMALL_TABLES = [
  "mail_intake",
  "mail_messages_pruned",
  "matcher_cursor",
  "nonce_fillers",
  // a row per label counted, and one row (migration 0032)
  "row_counts",
  "row_count_state",
  "schema_definitions",
  "schema_migrations",
];

export interface LockingStatement {
  rule: string;
  table: string;
  statement: string;
  /** The pattern that does the same without the lock. */
  instead: string;
}

const SAFE_COLUMN =
  "add the column nullable (no default, or a constant one), backfill it in batches outside the migration, then add a `check (… is not null) not valid` constraint, validate it in a later migration, and only then set not null";

const RULES: { rule: string; pattern: RegExp; unless?: RegExp; instead: string }[] = [
  {
    rule: "index built under lock",
    pattern:
      /^create\s+(unique\s+)?index\s+(?!concurrently)(if\s+not\s+exists\s+)?\S+\s+on\s+(only\s+)?(?<table>[\w."]+)/,
    instead:
      "`create index concurrently` (it blocks no writes) in a file whose first line is `--! no-transaction`, after `drop index concurrently if exists` of the same index (docs/operating.md#migrations-at-size)",
  },
  {
    rule: "column type changed (rewrites the table)",
    pattern:
      /^alter\s+table\s+(if\s+exists\s+)?(only\s+)?(?<table>[\w."]+)\s.*\balter\s+(column\s+)?\S+\s+(set\s+data\s+)?type\b/,
    instead:
      "a new column of the new type, backfilled in batches, read by the code, then the old one dropped",
  },
  {
    rule: "column added with a volatile default (rewrites the table)",
    pattern:
      /^alter\s+table\s+(if\s+exists\s+)?(only\s+)?(?<table>[\w."]+)\s.*\badd\s+(column\s+)?(if\s+not\s+exists\s+)?(?!constraint\b|primary\b|unique\b|check\b|foreign\b|exclude\b)[\w"]+\s[^,]*\bdefault\s+(now|clock_timestamp|random|gen_random_uuid|nextval|timeofday|statement_timestamp|transaction_timestamp|uuid_generate)\w*\s*\(/,
    instead: SAFE_COLUMN,
  },
  {
    rule: "column added not null without a default (fails on a filled table)",
    pattern:
      /^alter\s+table\s+(if\s+exists\s+)?(only\s+)?(?<table>[\w."]+)\s.*\badd\s+(column\s+)?(if\s+not\s+exists\s+)?(?!constraint\b|primary\b|unique\b|check\b|foreign\b|exclude\b)[\w"]+\s(?:(?!default)[^,])*\bnot\s+null\b(?:(?!default)[^,])*(,|$)/,
    instead: SAFE_COLUMN,
  },
  {
    rule: "set not null scans the table under lock",
    pattern:
      /^alter\s+table\s+(if\s+exists\s+)?(only\s+)?(?<table>[\w."]+)\s.*\bset\s+not\s+null\b/,
    unless: /\bvalidate\s+constraint\b/,
    instead: SAFE_COLUMN,
  },
  {
    rule: "constraint checked against every row under lock",
    pattern:
      /^alter\s+table\s+(if\s+exists\s+)?(only\s+)?(?<table>[\w."]+)\s.*\badd\s+(constraint\s+\S+\s+)?(check|foreign\s+key)\b(?!.*\bnot\s+valid\b)/,
    instead:
      "add it `not valid` (new rows are checked at once), then `validate constraint` in a later migration (it locks no writes)",
  },
  {
    rule: "unique or primary key built under lock",
    pattern:
      /^alter\s+table\s+(if\s+exists\s+)?(only\s+)?(?<table>[\w."]+)\s.*\badd\s+(constraint\s+\S+\s+)?(unique|primary\s+key)\s*\(/,
    instead: "`create unique index concurrently`, then `add constraint … unique using index`",
  },
  {
    rule: "every row written in the migration's transaction",
    pattern:
      /^(update\s+(only\s+)?(?<table>[\w."]+)\s+set\b|delete\s+from\s+(only\s+)?(?<table2>[\w."]+))/,
    instead:
      "backfill in batches of a few thousand rows, each its own transaction, from a job (not in the migration)",
  },
  {
    rule: "table rewritten",
    pattern:
      /^(vacuum\s+full|cluster|lock\s+table|alter\s+table\s+(if\s+exists\s+)?(only\s+)?(?<table>[\w."]+)\s.*\bset\s+(tablespace|logged|unlogged)\b)/,
    instead: "none inside a migration: an operator's maintenance window",
  },
];

/** The migration's top-level statements, lower case and on one line each. */
export function statementsOf(sql: string): string[] {
  const statements: string[] = [];
  let current = "";
  let index = 0;
  while (index < sql.length) {
    const rest = sql.slice(index);
    if (rest.startsWith("--")) {
      const end = rest.indexOf("\n");
      index += end === -1 ? rest.length : end;
      continue;
    }
    if (rest.startsWith("/*")) {
      index += rest.indexOf("*/") + 2;
      continue;
    }
    const dollar = /^\$(\w*)\$/.exec(rest);
    if (dollar) {
      const tag = dollar[0];
      const end = rest.indexOf(tag, tag.length);
      current += " $body$ ";
      index += end === -1 ? rest.length : end + tag.length;
      continue;
    }
    if (rest.startsWith("'")) {
      const end = /^'(?:[^']|'')*'/.exec(rest)?.[0] ?? rest;
      current += "'…'";
      index += end.length;
      continue;
    }
    const char = sql[index] as string;
    if (char === ";") {
      statements.push(current);
      current = "";
    } else {
      current += char;
    }
    index += 1;
  }
  statements.push(current);
  return statements
    .map((statement) => statement.replace(/\s+/g, " ").trim().toLowerCase())
    .filter((statement) => statement.length > 0);
}

const tableName = (raw: string) => raw.replaceAll('"', "").split(".").at(-1) ?? raw;

/**
 * The statements of `sql` that would lock or rewrite a table that is not small and that the same
 * migration did not create, and what to do instead.
 */
export function lockingStatements(sql: string): LockingStatement[] {
  const found: LockingStatement[] = [];
  const statements = statementsOf(sql);
  const whole = statements.join(";\n");
  // A table the same migration creates is empty while it runs: nothing to lock out.
  const created = new Set(
    statements.flatMap((statement) => {
      const match = /^create\s+(unlogged\s+)?table\s+(if\s+not\s+exists\s+)?([\w."]+)/.exec(
        statement,
      );
      return match?.[3] ? [tableName(match[3])] : [];
    }),
  );
  for (const statement of statements) {
    for (const { rule, pattern, unless, instead } of RULES) {
      const match = pattern.exec(statement);
      if (!match) continue;
      if (unless?.test(whole)) continue;
      const raw = match.groups?.table ?? match.groups?.table2;
      const table = raw ? tableName(raw) : "(any)";
      if (raw && (SMALL_TABLES.includes(table) || created.has(table))) continue;
      found.push({ rule, table, statement: statement.slice(0, 160), instead });
    }
  }
  return found;
}

/**
 * What makes a migration fail where it runs: `concurrently` inside the runner's transaction, or,
 * outside one, a concurrent index build that an interrupted run would leave invalid and the next
 * run could not build again: each needs `drop index concurrently if exists` of its name first.
 * Outside a transaction the runner splits statements at `;` at a line's end, so no function body.
 */
export function outsideTransactionProblems(sql: string): string[] {
  const outside = isOutsideTransaction(sql);
  const problems: string[] = [];
  const dropped = new Set<string>();
  for (const statement of statementsOf(sql)) {
    const drop = /^drop\s+index\s+concurrently\s+if\s+exists\s+([\w."]+)$/.exec(statement);
    if (drop?.[1]) dropped.add(tableName(drop[1]));
    if (!/\bconcurrently\b/.test(statement)) continue;
    const build =
      /^create\s+(unique\s+)?index\s+concurrently\s+(if\s+not\s+exists\s+)?([\w."]+)/.exec(
        statement,
      );
    if (!outside) {
      problems.push(`concurrently inside the runner's transaction: ${statement.slice(0, 160)}`);
    } else if (build?.[3] && !dropped.has(tableName(build[3]))) {
      problems.push(`built without dropping an invalid leftover first: ${statement.slice(0, 160)}`);
    }
  }
  if (outside && sql.includes("$$")) problems.push("a function body outside a transaction");
  return problems;
}
