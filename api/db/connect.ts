import postgres from "postgres";

export type Sql = postgres.Sql;

/**
 * One postgres.js pool per process. `int8` comes back as bigint; `numeric` (atomic USDC
 * amounts) comes back as a string and is converted with BigInt() where it is read.
 */
export function connectDatabase(url: string, options: { max?: number; name?: string } = {}): Sql {
  return postgres(url, {
    max: options.max ?? 10,
    onnotice: () => {},
    types: { bigint: postgres.BigInt },
    connection: { application_name: options.name ?? "pay-and-earn" },
  });
}
