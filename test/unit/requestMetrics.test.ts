import { Counter, Histogram, Registry } from "prom-client";
import { expect, it } from "vitest";
import { RequestMetrics } from "../../api/metrics/requestMetrics.ts";

it("exposes exactly what prom-client's own counter and histogram expose for the same requests", async () => {
  const ours = new Registry();
  const metrics = new RequestMetrics();
  metrics.registerIn(ours);

  const reference = new Registry();
  const labelNames = ["method", "route", "status"] as const;
  const counter = new Counter({
    name: "http_requests_total",
    help: "HTTP requests answered, by method, route pattern and status.",
    labelNames,
    registers: [reference],
  });
  const histogram = new Histogram({
    name: "http_request_duration_seconds",
    help: "Time to answer HTTP requests, by method, route pattern and status.",
    labelNames,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [reference],
  });

  // On the bounds, between them, above the last, for several label sets in turn.
  const requests: [string, string, number, number][] = [
    ["GET", "/api/info", 200, 0.0001],
    ["GET", "/api/info", 200, 0.005],
    ["POST", "/api/claims", 201, 0.0051],
    ["GET", "/api/info", 200, 0.3],
    ["GET", "/api/claims/:claimId", 404, 10],
    ["POST", "/api/claims", 201, 12.5],
    ["GET", "/api/info", 304, 1],
    ["GET", "/api/info", 200, 2.5],
  ];
  for (const [method, route, status, seconds] of requests) {
    metrics.record(method, route, status, seconds);
    const labels = { method, route, status: String(status) };
    histogram.observe(labels, seconds);
    counter.inc(labels);
  }
  expect(await ours.metrics()).toBe(await reference.metrics());
});
