import { Router } from "express";
import { encodeLedgerCursor, type LedgerCursor } from "../ledger/ledgerCursor.ts";
import { ledgerEntryView } from "../ledger/ledgerEntryView.ts";
import { listLedgerEntries } from "../ledger/listLedgerEntries.ts";
import { readLedgerTotals } from "../ledger/readLedgerStats.ts";
import {
  LEDGER_PAGE_CSP,
  renderLedgerErrorPage,
  renderLedgerPage,
} from "../ledger/renderLedgerPage.ts";
import { LEDGER_DEFAULT_LIMIT, type LedgerQuery, ledgerQuery } from "../schemas/ledger.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";
import { sendProblem } from "./problem.ts";
import { validate } from "./validate.ts";

/** The same page with another cursor: the filters and page size the client chose are kept. */
function pageLink(path: string, query: LedgerQuery, cursor: LedgerCursor | null): string {
  const params = new URLSearchParams();
  if (query.limit !== LEDGER_DEFAULT_LIMIT) params.set("limit", String(query.limit));
  if (query.agent_name !== undefined) params.set("agent_name", query.agent_name);
  if (query.since) params.set("since", query.since.toISOString());
  if (query.until) params.set("until", query.until.toISOString());
  if (cursor) params.set("cursor", encodeLedgerCursor(cursor));
  const search = params.toString();
  return search ? `${path}?${search}` : path;
}

function pageRequest(query: LedgerQuery) {
  return {
    limit: query.limit,
    after: query.cursor,
    agentName: query.agent_name,
    since: query.since,
    until: query.until,
  };
}

/** GET /api/ledger (JSON, `ledgerResponse`) and GET /ledger (HTML): completed payouts. */
export function ledgerRoutes(deps: ServiceDeps): Router {
  const router = Router();
  const { config, sql } = deps;

  router.get("/api/ledger", async (request, response) => {
    const input = validate(ledgerQuery, request.query, "The ledger query");
    if (!input.ok) return sendProblem(response, input.problem);
    const query = input.value;
    const page = await listLedgerEntries(sql, pageRequest(query));
    response.set("cache-control", "no-cache").json({
      entries: page.entries.map((entry) => ledgerEntryView(config, entry)),
      next_cursor: page.nextCursor ? encodeLedgerCursor(page.nextCursor) : null,
      next_url: page.nextCursor
        ? `${config.http.publicUrl}${pageLink("/api/ledger", query, page.nextCursor)}`
        : null,
      limit: query.limit,
    });
  });

  router.get("/ledger", async (request, response) => {
    response.set("content-security-policy", LEDGER_PAGE_CSP).set("cache-control", "no-cache");
    // An empty form field means "no filter" to a person, not "an empty agent name".
    const given = Object.fromEntries(
      Object.entries(request.query).filter(([, value]) => value !== ""),
    );
    const input = validate(ledgerQuery, given, "The ledger query");
    if (!input.ok) {
      const errors = input.problem.errors ?? [];
      return response
        .status(400)
        .type("html")
        .send(
          renderLedgerErrorPage(
            "The address asks for something the ledger cannot show.",
            errors.map((error) => `${error.field || "query"}: ${error.message}`),
          ),
        );
    }
    const query = input.value;
    const [page, totals] = await Promise.all([
      listLedgerEntries(sql, pageRequest(query)),
      readLedgerTotals(sql),
    ]);
    response.type("html").send(
      renderLedgerPage({
        serviceName: config.serviceName,
        entries: page.entries.map((entry) => ledgerEntryView(config, entry)),
        totals,
        agentName: query.agent_name,
        links: {
          newest: query.cursor ? pageLink("/ledger", query, null) : null,
          older: page.nextCursor ? pageLink("/ledger", query, page.nextCursor) : null,
        },
      }),
    );
  });

  return router;
}
