import type { z } from "zod";
import { problemResponse } from "../api/schemas/responses.ts";
import { CliError, parseOr, reasonOfError } from "./errors.ts";
import { terminalSafeJson } from "./terminalText.ts";

/** Where the service is: --service, else PAY_AND_EARN_URL, else the devnet's address. */
export function serviceUrl(option: string | undefined): string {
  const url = option ?? process.env.PAY_AND_EARN_URL ?? "http://localhost:3000";
  if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
    throw new CliError(
      "invalid_option",
      `invalid_option: --service ${url} is not an http(s) URL`,
      2,
    );
  }
  return url.replace(/\/+$/, "");
}

const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]"]);

/**
 * A service to pay through: https, or plain http on this machine only. An x402 signature
 * covers the transfer, not the request body, so whoever can rewrite the request on the way
 * chooses the payout address; a claim's payment instructions are as easy to rewrite.
 */
export function payingServiceUrl(option: string | undefined): string {
  const url = serviceUrl(option);
  const { protocol, hostname } = new URL(url);
  if (protocol === "http:" && !LOOPBACK.has(hostname)) {
    throw new CliError(
      "insecure_service",
      `insecure_service: earn pays through ${url}: use https (over plain http anyone on the way can change where the payout goes)`,
      2,
    );
  }
  return url;
}

export interface Answer<Body> {
  status: number;
  headers: Headers;
  body: Body;
}

/**
 * The service's REST API, its answers checked against the same zod schemas that type the
 * service's responses (api/schemas): a body that does not fit is refused, not guessed at.
 */
export class ServiceClient {
  readonly baseUrl: string;
  constructor(baseUrl: string) {
    this.baseUrl = baseUrl;
  }

  /** GET or POST `path`; a 2xx body must fit `schema`, a problem becomes a CliError. */
  async request<Schema extends z.ZodType>(
    path: string,
    schema: Schema,
    init: { method?: string; body?: unknown; fetcher?: typeof fetch } = {},
  ): Promise<Answer<z.output<Schema>>> {
    const response = await this.send(path, init);
    const body = await readJson(response, path);
    if (!response.ok) throw problemError(response.status, body, path);
    return {
      status: response.status,
      headers: response.headers,
      body: parseAnswer(schema, body, path),
    };
  }

  async get<Schema extends z.ZodType>(path: string, schema: Schema): Promise<z.output<Schema>> {
    return (await this.request(path, schema)).body;
  }

  /** The raw answer, for the callers that tell several statuses apart (x402: 200, 202, 402). */
  async send(
    path: string,
    init: {
      method?: string;
      body?: unknown;
      fetcher?: typeof fetch;
      headers?: Record<string, string>;
      /** 0: none (a stream that lasts as long as it must). */
      timeoutMs?: number;
    } = {},
  ): Promise<Response> {
    const url = `${this.baseUrl}${path}`;
    const fetcher = init.fetcher ?? fetch;
    try {
      return await fetcher(url, {
        method: init.method ?? (init.body === undefined ? "GET" : "POST"),
        headers: {
          accept: "application/json",
          ...(init.body === undefined ? {} : { "content-type": "application/json" }),
          ...init.headers,
        },
        ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
        ...(init.timeoutMs === 0 ? {} : { signal: AbortSignal.timeout(init.timeoutMs ?? 120_000) }),
      });
    } catch (error) {
      // Only a failure to reach the service is said as such; anything else (the x402 client
      // refusing to sign, say) is the caller's to word.
      if (!isNetworkFailure(error)) throw error;
      throw new CliError(
        "service_unreachable",
        `service_unreachable: cannot reach the service at ${this.baseUrl}: ${reasonOfError(error)}`,
      );
    }
  }
}

/** fetch's own failures: no connection (a TypeError), or the time allowed ran out. */
export function isNetworkFailure(error: unknown): boolean {
  if (error instanceof TypeError) return true;
  return (
    error instanceof DOMException && (error.name === "TimeoutError" || error.name === "AbortError")
  );
}

/** The answer's JSON, every string in it stripped of terminal control characters. */
export async function readJson(response: Response, path: string): Promise<unknown> {
  const text = await response.text();
  try {
    return terminalSafeJson(JSON.parse(text));
  } catch {
    throw new CliError(
      "unexpected_answer",
      `${path} answered ${response.status} with something that is not JSON`,
    );
  }
}

export function parseAnswer<Schema extends z.ZodType>(
  schema: Schema,
  body: unknown,
  path: string,
): z.output<Schema> {
  return parseOr(
    schema,
    body,
    (issue) =>
      new CliError(
        "unexpected_answer",
        `unexpected_answer: ${path} answered in a shape this CLI does not know (${issue}); is --service a pay-and-earn service of this version?`,
      ),
  );
}

/** An RFC 9457 problem as one line: `claim_not_found: No claim has this id.` */
export function problemError(status: number, body: unknown, path: string): CliError {
  const problem = problemResponse.safeParse(body);
  if (!problem.success) return new CliError("http_error", `${path} answered ${status}`);
  const code = problem.data.type.replace(/^.*\/problems\//, "");
  const fields = (problem.data.errors ?? []).map((error) => `${error.field} ${error.message}`);
  const words = [problem.data.detail ?? problem.data.title, ...fields].join("; ");
  return new CliError(code, `${code}: ${words}`);
}
