import postgres from "postgres";

type Types = { bigint: bigint };

/** The pool: runs queries, and also opens transactions and reserves connections. */
export type Database = postgres.Sql<Types>;
/** Anything that runs queries: the pool, a transaction or a reserved connection. */
export type Sql = postgres.ISql<Types>;

/**
 * One postgres.js pool per process. `int8` comes back as bigint; `numeric` (atomic USDC
 * amounts) comes back as a string and is converted with BigInt() where it is read.
 */
export function connectDatabase(
  url: string,
  options: { max?: number; name?: string } = {},
): Database {
  return postgres(url, {
    max: options.max ?? 10,
    onnotice: () => {},
    types: { bigint: postgres.BigInt },
    connection: { application_name: options.name ?? "pay-and-earn" },
  });
}
