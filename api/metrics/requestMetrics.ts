import type { Metric, MetricValue, Registry } from "prom-client";

const REQUESTS = "http_requests_total";
const DURATION = "http_request_duration_seconds";
const LABELS = "method, route pattern and status";
/** Upper bounds of the duration buckets, in seconds. */
const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

interface Tally {
  labels: { method: string; route: string; status: string };
  /** Requests per bucket (not cumulative); the last one is above every bound. */
  inBucket: number[];
  count: number;
  sum: number;
}

/**
 * The HTTP requests counted and timed, by method, route pattern and status: the counter
 * `http_requests_total` and the histogram `http_request_duration_seconds`, as prom-client would
 * expose them. Every request records here, so the recording is one lookup by a joined key and two
 * additions; prom-client's own `observe` and `inc` re-checked and hashed the labels on each call
 * (~2.4 µs a request on these machines, BENCHMARKS.md#http-routes). The exposition is built only
 * when scraped.
 */
export class RequestMetrics {
  readonly #tallies = new Map<string, Tally>();

  record(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${status} ${route}`;
    let tally = this.#tallies.get(key);
    if (!tally) {
      tally = {
        labels: { method, route, status: String(status) },
        inBucket: new Array<number>(BUCKETS.length + 1).fill(0),
        count: 0,
        sum: 0,
      };
      this.#tallies.set(key, tally);
    }
    let bucket = 0;
    while (bucket < BUCKETS.length && seconds > (BUCKETS[bucket] as number)) bucket++;
    (tally.inBucket[bucket] as number)++;
    tally.count++;
    tally.sum += seconds;
  }

  /** Both metrics, in `registry`: exposed with the rest on each scrape. */
  registerIn(registry: Registry): void {
    const tallies = this.#tallies;
    // What a registry reads of a metric: its name, and `get()` in prom-client's own shape (its
    // typings give `type` as a numeric enum; the registry writes the string).
    const metric = (
      name: string,
      help: string,
      type: "counter" | "histogram",
      values: () => MetricValue<string>[],
    ) => {
      const description = { name, help, type, aggregator: "sum" };
      return { ...description, get: async () => ({ ...description, values: values() }) };
    };
    const register = (described: ReturnType<typeof metric>) =>
      registry.registerMetric(described as unknown as Metric);
    register(
      metric(REQUESTS, `HTTP requests answered, by ${LABELS}.`, "counter", () =>
        [...tallies.values()].map(({ labels, count }) => ({ labels, value: count })),
      ),
    );
    register(
      metric(DURATION, `Time to answer HTTP requests, by ${LABELS}.`, "histogram", () =>
        [...tallies.values()].flatMap(({ labels, inBucket, count, sum }) => {
          let cumulative = 0;
          const buckets = inBucket.map((inThisBucket, index) => {
            cumulative += inThisBucket;
            const le = index < BUCKETS.length ? (BUCKETS[index] as number) : "+Inf";
            return {
              labels: { le, ...labels },
              value: cumulative,
              metricName: `${DURATION}_bucket`,
            };
          });
          return [
            ...buckets,
            { labels, value: sum, metricName: `${DURATION}_sum` },
            { labels, value: count, metricName: `${DURATION}_count` },
          ];
        }),
      ),
    );
  }
}
