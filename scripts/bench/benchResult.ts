import { writeFile } from "node:fs/promises";
import { cpus, loadavg } from "node:os";

/** The machine a result was measured on, and how busy it was (these machines are shared). */
export function machineState() {
  return {
    date: new Date().toISOString(),
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    /** 1, 5 and 15 minute load averages when the run ended. */
    loadAverage: loadavg().map((value) => Number(value.toFixed(2))),
    node: process.version,
  };
}

/** `npm run bench` (all.ts) collects each benchmark's result from the file it names. */
export async function writeBenchResult(result: object): Promise<void> {
  const file = process.env.BENCH_RESULT_FILE;
  if (file) await writeFile(file, JSON.stringify({ machine: machineState(), ...result }, null, 2));
}

/** A round of `bench:http` as reported: its share of bare, req/s and the service's µs a request. */
export interface RoundFigures {
  share: number;
  rps: number;
  cpuMicros: number;
}

/** The lowest and highest share of a route's rounds. */
export function shareRange(route: { rounds: RoundFigures[] }): [number, number] {
  const shares = route.rounds.map((round) => round.share);
  return [Math.min(...shares), Math.max(...shares)];
}
