import type { Response } from "express";

/**
 * RFC 9457 problem details. `type` is a stable relative URI built from a snake_case code
 * (`/problems/claim_not_found`); clients branch on it, never on `title` or `detail`.
 */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail?: string;
  errors?: { field: string; message: string }[];
  [extension: string]: unknown;
}

export function problem(
  code: string,
  status: number,
  title: string,
  extra: Omit<Partial<Problem>, "type" | "status" | "title"> = {},
): Problem {
  return { type: `/problems/${code}`, title, status, ...extra };
}

export function sendProblem(response: Response, details: Problem): void {
  response.status(details.status).type("application/problem+json").send(JSON.stringify(details));
}
