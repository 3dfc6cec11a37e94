import type { MailConfig } from "../config/mailSettings.ts";
import type { Sql } from "../db/connect.ts";
import { repliesInLastHour } from "../mailbox/outbox.ts";
import { organizationalDomain } from "./organizationalDomain.ts";

/**
 * The reply budget this sender would exceed (per address, per organizational domain, overall;
 * MAIL_REPLIES_PER_*), with the time until a reply leaves its hour; null when there is room.
 * Per domain, so one domain passing DMARC cannot use up the replies for everyone else.
 */
export async function spentReplyBudget(
  sql: Sql,
  settings: MailConfig,
  from: string,
): Promise<{ seconds: number; why: string } | null> {
  const domain = from.slice(from.lastIndexOf("@") + 1).toLowerCase();
  const organization = organizationalDomain(domain) ?? domain;
  const use = await repliesInLastHour(sql, from, organization);
  const budgets = [
    { name: "per address", used: use.toRecipient, limit: settings.repliesPerSenderPerHour },
    {
      name: `per domain (${organization})`,
      used: use.toDomain,
      limit: settings.repliesPerDomainPerHour,
    },
    { name: "overall", used: use.overall, limit: settings.repliesPerHour },
  ].filter((budget) => budget.used.count >= budget.limit);
  if (budgets.length === 0) return null;
  const seconds = Math.max(1, ...budgets.map((budget) => budget.used.freesInSeconds));
  return {
    seconds,
    why: `replies ${budgets.map((budget) => `${budget.name} ${budget.used.count}/${budget.limit}`).join(", ")} in the last hour`,
  };
}
