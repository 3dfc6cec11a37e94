import { type LedgerDay, type LedgerTotals, MAX_LEDGER_DAYS } from "../ledger/readLedgerStats.ts";
import { formatUsdcFixed } from "../money.ts";
import { badUserInput, builder } from "./builder.ts";

/** `stats`: totals over completed payouts and a per-day (UTC) series. Amounts in USDC. */

const DailyStats = builder.objectRef<LedgerDay>("DailyStats").implement({
  fields: (t) => ({
    day: t.exposeString("day", { description: "The UTC day, YYYY-MM-DD." }),
    completedPayouts: t.exposeInt("completedPayouts"),
    uniquePayoutAddresses: t.exposeInt("uniquePayoutAddresses"),
    usdcReceived: t.string({ resolve: (day) => formatUsdcFixed(day.received) }),
    usdcPaidOut: t.string({ resolve: (day) => formatUsdcFixed(day.paidOut) }),
  }),
});

const Stats = builder.objectRef<LedgerTotals>("Stats").implement({
  description:
    "Completed payouts only: what the service received for them and paid out. Transfers that " +
    "paid nothing (below the price, unmatched) are not counted.",
  fields: (t) => ({
    completedPayouts: t.exposeInt("completedPayouts"),
    uniquePayoutAddresses: t.exposeInt("uniquePayoutAddresses"),
    usdcReceived: t.string({ resolve: (totals) => formatUsdcFixed(totals.received) }),
    usdcPaidOut: t.string({ resolve: (totals) => formatUsdcFixed(totals.paidOut) }),
    firstCompletedAt: t.field({
      type: "DateTime",
      nullable: true,
      resolve: (totals) => totals.firstCompletedAt,
    }),
    lastCompletedAt: t.field({
      type: "DateTime",
      nullable: true,
      resolve: (totals) => totals.lastCompletedAt,
    }),
    daily: t.field({
      type: [DailyStats],
      description: `The last \`days\` UTC days up to today (1 to ${MAX_LEDGER_DAYS}), oldest first, zeros included.`,
      args: { days: t.arg.int({ defaultValue: 30 }) },
      resolve: (_totals, { days }, { core }) => {
        const count = days ?? 30;
        if (!Number.isInteger(count) || count < 1 || count > MAX_LEDGER_DAYS) {
          const message = `must be from 1 to ${MAX_LEDGER_DAYS}`;
          throw badUserInput(`days ${message}`, [{ argument: "days", message }]);
        }
        return core.ledgerDaily(count);
      },
    }),
  }),
});

builder.queryField("stats", (t) =>
  t.field({
    type: Stats,
    resolve: (_root, _args, { core }) => core.ledgerTotals(),
  }),
);
