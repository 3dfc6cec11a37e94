import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { lockingStatements, outsideTransactionProblems } from "../support/migrationLocks.ts";

/**
 * A migration that would rewrite a table that grows, or lock it while reading every row, is
 * refused before it lands (docs/operating.md#migrations-at-size): each runs while the service
 * serves, and at a year's size (BENCHMARKS.md#a-year-of-traffic) such a statement holds the table
 * for minutes.
 */

const directory = join(import.meta.dirname, "..", "..", "api", "db", "migrations");

/**
 * Landed before this check, on tables that were small then, and applied everywhere since: by
 * migration number, how many statements of each kind they hold. Nothing may be added here: a new
 * migration takes the safe pattern the failure names.
 */
const LANDED: Record<number, Record<string, number>> = {
  5: { "index built under lock": 2 },
  6: {
    "constraint checked against every row under lock": 3,
    "index built under lock": 5,
    "unique or primary key built under lock": 1,
  },
  8: {
    "constraint checked against every row under lock": 1,
    "every row written in the migration's transaction": 2,
    "index built under lock": 4,
    "set not null scans the table under lock": 1,
    "unique or primary key built under lock": 1,
  },
  10: { "index built under lock": 2 },
  11: { "index built under lock": 1 },
  18: {
    "constraint checked against every row under lock": 2,
    "every row written in the migration's transaction": 1,
    "set not null scans the table under lock": 1,
  },
  22: { "index built under lock": 2 },
};

describe("migrations on big tables", () => {
  const files = readdirSync(directory)
    .filter((file) => file.endsWith(".sql"))
    .sort();

  it.each(files)(
    "%s neither rewrites nor locks a big table beyond what it held when it landed",
    (file) => {
      const found = lockingStatements(readFileSync(join(directory, file), "utf8"));
      const counts: Record<string, number> = {};
      for (const statement of found) counts[statement.rule] = (counts[statement.rule] ?? 0) + 1;
      const allowed = LANDED[Number(file.slice(0, file.indexOf("_")))] ?? {};
      const beyond = found.filter(
        (statement) => (counts[statement.rule] ?? 0) > (allowed[statement.rule] ?? 0),
      );
      expect(
        beyond.map(
          (statement) =>
            `${statement.rule} on app.${statement.table}: ${statement.statement}\n  instead: ${statement.instead}`,
        ),
      ).toEqual([]);
    },
  );

  it.each(files)("%s builds concurrently only outside a transaction, repeatably", (file) => {
    expect(outsideTransactionProblems(readFileSync(join(directory, file), "utf8"))).toEqual([]);
  });

  it("takes an index built concurrently outside a transaction, and nothing less", () => {
    const build =
      "create index concurrently claims_by_email on app.claims (email) where status = 'expired';";
    const drop = "drop index concurrently if exists app.claims_by_email;";
    const outside = `--! no-transaction\n-- why\n${drop}\n${build}\n`;
    expect(lockingStatements(outside)).toEqual([]);
    expect(outsideTransactionProblems(outside)).toEqual([]);
    // The marker lets a concurrent build run; it does not make a plain one safe.
    expect(
      lockingStatements("--! no-transaction\ncreate index claims_by_email on app.claims (email);"),
    ).toMatchObject([{ rule: "index built under lock", instead: /--! no-transaction/ }]);
    expect(outsideTransactionProblems(`${drop}\n${build}`)).toEqual([
      expect.stringMatching(/^concurrently inside the runner's transaction: drop index/),
      expect.stringMatching(/^concurrently inside the runner's transaction: create index/),
    ]);
    expect(outsideTransactionProblems(`--! no-transaction\n${build}`)).toEqual([
      expect.stringMatching(/^built without dropping an invalid leftover first/),
    ]);
    // The marker counts only as the first line.
    expect(
      outsideTransactionProblems(`-- why\n--! no-transaction\n${drop}\n${build}`),
    ).toHaveLength(2);
    expect(
      outsideTransactionProblems(
        "--! no-transaction\ncreate function app.f() returns int language sql as $$ select 1; $$;",
      ),
    ).toEqual(["a function body outside a transaction"]);
  });

  it("refuses each kind of statement that locks or rewrites, and names the safe pattern", () => {
    const refused = (sql: string) => lockingStatements(sql).map((statement) => statement.rule);
    expect(refused("create index claims_by_email on app.claims (email);")).toEqual([
      "index built under lock",
    ]);
    expect(refused("create unique index if not exists x on app.payments (claim_id)")).toEqual([
      "index built under lock",
    ]);
    expect(refused("alter table app.claims alter column amount_due type numeric(20, 0);")).toEqual([
      "column type changed (rewrites the table)",
    ]);
    expect(
      refused("alter table app.payouts add column seen_at timestamptz default now();"),
    ).toEqual(["column added with a volatile default (rewrites the table)"]);
    expect(refused("alter table app.receipts add column version integer not null;")).toEqual([
      "column added not null without a default (fails on a filled table)",
    ]);
    expect(refused("alter table app.claims alter column email set not null;")).toEqual([
      "set not null scans the table under lock",
    ]);
    expect(
      refused("alter table app.outbox add constraint positive check (attempts >= 0);"),
    ).toEqual(["constraint checked against every row under lock"]);
    expect(refused("alter table app.payments add constraint u unique (tx_hash);")).toEqual([
      "unique or primary key built under lock",
    ]);
    expect(refused("update app.claims set email = lower(email);")).toEqual([
      "every row written in the migration's transaction",
    ]);
    expect(refused("vacuum full app.claims;")).toEqual(["table rewritten"]);
    const [statement] = lockingStatements("alter table app.claims alter column email set not null");
    expect(statement?.instead).toMatch(/nullable.*backfill it in batches.*not valid.*validate/);
  });

  it("lets the safe patterns and small or new tables through", () => {
    const safe = `
      -- create index claims_x on app.claims (x);  (a comment is no statement)
      create index concurrently claims_by_email on app.claims (email);
      alter table app.claims add column note text;
      alter table app.claims add column attempts integer not null default 0;
      alter table app.outbox add constraint positive check (attempts >= 0) not valid;
      alter table app.outbox validate constraint positive;
      alter table app.claims add constraint email_set check (email is not null) not valid;
      alter table app.claims validate constraint email_set;
      alter table app.claims alter column email set not null;
      create index mail_intake_by_time on app.mail_intake (last_ok_at);
      create table app.audits (id bigint primary key, at timestamptz);
      create index audits_by_time on app.audits (at);
      create function app.f() returns void language plpgsql as $$
      begin update app.claims set email = null where id = 'x'; end $$;
      comment on table app.claims is 'update app.claims set x = 1; vacuum full';`;
    expect(lockingStatements(safe)).toEqual([]);
  });
});
