import { spawn } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { machineState, type RoundFigures, shareRange } from "./benchResult.ts";

/**
 * `npm run bench`: every benchmark in turn (each starts its own devnet), then one table of the
 * figures that have targets, and every result in bench/results.json. BENCH_ONLY=http,x402
 * runs some of them; the other BENCH_* settings pass through (BENCHMARKS.md#running-them).
 */

const BENCHMARKS = ["http", "x402", "payouts"] as const;
type Name = (typeof BENCHMARKS)[number];
const only = process.env.BENCH_ONLY?.split(",");
const chosen = BENCHMARKS.filter((name) => !only || only.includes(name));

async function run(name: Name, resultFile: string): Promise<unknown> {
  const code = await new Promise<number | null>((resolve) => {
    const child = spawn(process.execPath, [join(import.meta.dirname, `${name}.ts`)], {
      env: { ...process.env, BENCH_RESULT_FILE: resultFile },
      stdio: "inherit",
    });
    child.once("exit", resolve);
  });
  if (code !== 0) return { failed: `exit code ${code}` };
  return JSON.parse(await readFile(resultFile, "utf8"));
}

interface Row {
  benchmark: string;
  measure: string;
  value: string;
  target: string;
  met: boolean | null;
}

const percent = (value: number) => `${(value * 100).toFixed(0)}%`;

function httpRows(result: {
  routes: {
    route: string;
    share: number;
    rounds: RoundFigures[];
    target: number;
    p50: number;
    p99At80: number;
    errors: number;
  }[];
  service: { peakRssMiB: number };
}): Row[] {
  return [
    ...result.routes.flatMap((route) => [
      {
        benchmark: "http",
        measure: `${route.route}: share of bare`,
        value: `${percent(route.share)} (rounds ${shareRange(route).map(percent).join("–")})`,
        target: `≥ ${percent(route.target)}`,
        met: route.share >= route.target,
      },
      {
        benchmark: "http",
        measure: `${route.route}: p99 at 80% of saturation`,
        value: `${route.p99At80} ms`,
        target: "< 50 ms",
        met: route.p99At80 < 50,
      },
      {
        benchmark: "http",
        measure: `${route.route}: errors`,
        value: String(route.errors),
        target: "0",
        met: route.errors === 0,
      },
    ]),
    {
      benchmark: "http",
      measure: "service RSS under load, peak",
      value: `${result.service.peakRssMiB.toFixed(0)} MiB`,
      target: "",
      met: null,
    },
  ];
}

function x402Rows(result: {
  automine: {
    paid: { reference: { p50: number }; ours: { p50: number } };
    unpaid: { oursShare: number; referenceShare: number };
  };
  blocks: {
    reference: { p50: number; blocksP50: number };
    ours: { p50: number; blocksP50: number };
  };
}): Row[] {
  const { automine, blocks } = result;
  const overhead = automine.paid.ours.p50 - automine.paid.reference.p50;
  return [
    {
      benchmark: "x402",
      measure: "paid, automine: overhead over settle-only, p50",
      value: `${overhead.toFixed(1)} ms`,
      target: "≤ 50 ms",
      met: overhead <= 50,
    },
    {
      benchmark: "x402",
      measure: "paid, 2 s blocks: reference (settle only), p50",
      value: `${(blocks.reference.p50 / 1000).toFixed(2)} s, ${blocks.reference.blocksP50} block(s)`,
      target: "",
      met: null,
    },
    {
      benchmark: "x402",
      measure: "paid, 2 s blocks: ours (settle + payout + receipt), p50",
      value: `${(blocks.ours.p50 / 1000).toFixed(2)} s, ${blocks.ours.blocksP50} block(s)`,
      target: "",
      met: null,
    },
    {
      benchmark: "x402",
      measure: "unpaid 402: share of bare (reference's)",
      value: `${percent(automine.unpaid.oursShare)} (${percent(automine.unpaid.referenceShare)})`,
      target: "≥ 60%",
      met: automine.unpaid.oursShare >= 0.6,
    },
  ];
}

function payoutRows(result: {
  burst: {
    payments: number;
    floorBlocks: number;
    blocksAfterConfirmation: number;
    servicePeakRssMiB: number;
    databaseMsPerPayout: number;
  };
  singles: { p95: number } | null;
}): Row[] {
  const { burst, singles } = result;
  return [
    {
      benchmark: "payouts",
      measure: `burst of ${burst.payments}: last payout, blocks after confirmation (floor)`,
      value: `${burst.blocksAfterConfirmation} (${burst.floorBlocks})`,
      target: `≤ floor + 1 = ${burst.floorBlocks + 1}`,
      met: burst.blocksAfterConfirmation <= burst.floorBlocks + 1,
    },
    {
      benchmark: "payouts",
      measure: "burst: service peak RSS; database time per payout",
      value: `${burst.servicePeakRssMiB.toFixed(0)} MiB; ${burst.databaseMsPerPayout.toFixed(2)} ms`,
      target: "",
      met: null,
    },
    ...(singles
      ? [
          {
            benchmark: "payouts",
            measure: "singles: confirmation → completed, p95",
            value: `${singles.p95.toFixed(2)} s`,
            target: "≤ 3 s",
            met: singles.p95 <= 3,
          },
        ]
      : []),
  ];
}

const directory = await mkdtemp(join(tmpdir(), "bench-results-"));
const results: Record<string, unknown> = {};
const rows: Row[] = [];
try {
  for (const name of chosen) {
    console.log(`\n=== bench:${name} ===`);
    const result = await run(name, join(directory, `${name}.json`));
    results[name] = result;
    if ((result as { failed?: string }).failed) {
      rows.push({ benchmark: name, measure: "run", value: "failed", target: "", met: false });
    } else if (name === "http") rows.push(...httpRows(result as Parameters<typeof httpRows>[0]));
    else if (name === "x402") rows.push(...x402Rows(result as Parameters<typeof x402Rows>[0]));
    else rows.push(...payoutRows(result as Parameters<typeof payoutRows>[0]));
  }
} finally {
  await rm(directory, { recursive: true, force: true });
}

const widths = [9, 62, 22, 16];
const line = (cells: string[]) =>
  cells.map((cell, index) => cell.padEnd(widths[index] ?? 0)).join("  ");
console.log(`\n${line(["benchmark", "measure", "value", "target"])}  met`);
for (const row of rows) {
  const met = row.met === null ? "" : row.met ? "yes" : "NO";
  console.log(`${line([row.benchmark, row.measure, row.value, row.target])}  ${met}`);
}
const output = join(import.meta.dirname, "..", "..", "bench", "results.json");
await mkdir(join(import.meta.dirname, "..", "..", "bench"), { recursive: true });
await writeFile(
  output,
  `${JSON.stringify({ machine: machineState(), table: rows, results }, null, 2)}\n`,
);
console.log(`\nWritten: bench/results.json`);
if (rows.some((row) => row.measure === "run" && row.met === false)) process.exitCode = 1;
