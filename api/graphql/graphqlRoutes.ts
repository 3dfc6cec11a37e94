import { promisify } from "node:util";
import { gzip } from "node:zlib";
import { costLimitPlugin } from "@escape.tech/graphql-armor-cost-limit";
import { maxAliasesPlugin } from "@escape.tech/graphql-armor-max-aliases";
import { maxDepthPlugin } from "@escape.tech/graphql-armor-max-depth";
import { maxTokensPlugin } from "@escape.tech/graphql-armor-max-tokens";
import { renderGraphiQL } from "@graphql-yoga/render-graphiql";
import { type Request, type Response, Router } from "express";
import { createYoga, type GraphiQLOptions, maskError } from "graphql-yoga";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { clientAddress } from "../rateLimits/clientAddress.ts";
import { sendPrebuilt } from "../web/prebuiltAnswer.ts";
import { aggregateCostPlugin } from "./aggregateCost.ts";
import type { GraphqlContext } from "./builder.ts";
import { ledgerAnswers } from "./ledgerAnswers.ts";
import { graphqlSchema } from "./schema.ts";

/**
 * POST /graphql (and GET for queries), and GraphiQL for a browser's GET: graphql-yoga on the
 * Pothos schema. Every query passes the armor limits before it runs; errors that are not the
 * client's own (bad arguments, limits) are masked and logged.
 */

export const GRAPHQL_LIMITS = {
  /** The deepest legitimate query (`ledger { edges { node { … } } }`) is 4 deep. */
  maxDepth: 8,
  maxAliases: 10,
  maxTokens: 1_000,
  maxCost: 2_000,
} as const;

/**
 * GraphiQL is one self-contained page (its script, styles, fonts and editor workers are inline
 * or blob: URLs from @graphql-yoga/render-graphiql, no CDN). It runs inline script and eval-free
 * workers, and talks only to this origin.
 */
export const GRAPHIQL_CSP =
  "default-src 'none'; script-src 'unsafe-inline'; worker-src blob:; style-src 'unsafe-inline'; " +
  "font-src data:; img-src 'self' data:; connect-src 'self'; base-uri 'none'; " +
  "form-action 'self'; frame-ancestors 'none'";

const DEFAULT_QUERY = `# Completed payouts, newest first, and the totals.
query Ledger {
  ledger(first: 5) {
    edges {
      node {
        claimId
        agentName
        payoutAddress
        amountUsdc
        payoutTx
        completedAt
      }
    }
    pageInfo {
      hasNextPage
      endCursor
    }
  }
  stats {
    completedPayouts
    usdcPaidOut
    uniquePayoutAddresses
  }
}
`;

export function graphqlRoutes({ core, config, logger }: SurfaceContext): Router {
  // The page is 9 MB of inlined assets and the same for every request: render it once, and
  // gzip it once (about 2 MB) for the browsers that accept it, rather than once per request.
  const graphiqlOptions = { title: `${config.serviceName} GraphQL`, defaultQuery: DEFAULT_QUERY };
  let graphiqlPage: string | undefined;
  let graphiqlGzipped: Promise<Buffer> | undefined;
  const page = (options?: GraphiQLOptions) => {
    graphiqlPage ??= renderGraphiQL(options ?? graphiqlOptions);
    return graphiqlPage;
  };
  const yoga = createYoga<Record<string, unknown>, GraphqlContext>({
    schema: graphqlSchema,
    graphqlEndpoint: "/graphql",
    // Express's request (yoga's server context) says who asks: live streams are counted per client.
    context: (initial) => ({
      core,
      client: clientAddress((initial as { req?: { ip?: string } }).req?.ip, 48),
    }),
    graphiql: graphiqlOptions,
    renderGraphiQL: page,
    landingPage: false,
    // CORS and body size are global concerns of the HTTP app, not of this route.
    cors: false,
    maskedErrors: {
      isDev: false,
      maskError: (error, message) => {
        const masked = maskError(error, message, false);
        if (masked !== error) logger.error({ err: error }, "graphql resolver failed");
        return masked;
      },
    },
    logging: {
      debug: (...args: unknown[]) => logger.debug({ yoga: args }, "graphql"),
      info: (...args: unknown[]) => logger.info({ yoga: args }, "graphql"),
      warn: (...args: unknown[]) => logger.warn({ yoga: args }, "graphql"),
      error: (...args: unknown[]) => logger.error({ yoga: args }, "graphql"),
    },
    plugins: [
      maxTokensPlugin({ n: GRAPHQL_LIMITS.maxTokens }),
      maxDepthPlugin({ n: GRAPHQL_LIMITS.maxDepth, flattenFragments: true }),
      maxAliasesPlugin({ n: GRAPHQL_LIMITS.maxAliases }),
      costLimitPlugin({ maxCost: GRAPHQL_LIMITS.maxCost }),
      aggregateCostPlugin(),
    ],
  });

  const kept = ledgerAnswers(core.ledgerVersion, config.readCacheMs);
  /**
   * A query of the ledger alone with no current kept answer: yoga's, made once for the requests
   * that ask meanwhile, then kept for the next. The key holds all the request that shapes it.
   */
  const answerLedgerQuery = async (request: Request, response: Response, key: string) => {
    const answer = await kept.answer(key, async () => {
      const made = await yoga.fetch(
        "http://localhost/graphql",
        {
          method: "POST",
          headers: {
            "content-type": "application/json",
            ...(request.headers.accept ? { accept: request.headers.accept } : {}),
          },
          body: JSON.stringify(request.body),
        },
        {},
      );
      return {
        status: made.status,
        contentType: made.headers.get("content-type") ?? "application/json; charset=utf-8",
        body: await made.text(),
      };
    });
    sendPrebuilt(request, response, answer);
  };

  const router = Router();
  router.use("/graphql", (request, response) => {
    if (request.method === "POST" && request.path === "/") {
      const key = kept.keyFor(request.body, request.headers.accept);
      if (key) {
        const answer = kept.current(key);
        if (answer) return sendPrebuilt(request, response, answer);
        return answerLedgerQuery(request, response, key);
      }
    }
    // Yoga's own test for "a browser wants GraphiQL"; other answers keep the global API policy.
    if (request.method === "GET" && request.headers.accept?.includes("text/html")) {
      response.setHeader("content-security-policy", GRAPHIQL_CSP);
      if (request.path === "/" && request.acceptsEncodings("gzip", "identity") === "gzip") {
        // On the thread pool, not the event loop; a failure is tried again next time.
        graphiqlGzipped ??= promisify(gzip)(page()).catch((error: unknown) => {
          graphiqlGzipped = undefined;
          throw error;
        });
        return graphiqlGzipped.then((body) => {
          // Already encoded: the compression middleware leaves it alone.
          response
            .status(200)
            .set({ "content-encoding": "gzip", vary: "Accept-Encoding" })
            .type("html")
            .send(body);
        });
      }
      if (request.path === "/") {
        // Without gzip (br or deflate alone) the page goes as it is: the compression middleware
        // would recompress 9 MB for every request (~150 ms of CPU each). no-transform stops it.
        return response
          .status(200)
          .set({ "cache-control": "no-transform", vary: "Accept-Encoding" })
          .type("html")
          .send(page());
      }
    }
    return yoga(request, response);
  });
  return router;
}
