import { readFile } from "node:fs/promises";

/**
 * Where a `node --cpu-prof` profile spends its time: `node summarizeProfile.ts <file.cpuprofile>
 * [top] [last-seconds]` prints the functions and the files or packages with the most self time, and
 * the functions with the most inclusive time, as shares of the busy (not idle) samples. Used to
 * find what to make faster (BENCHMARKS.md#profiles). With `last-seconds`, only the
 * samples of the profile's last seconds count: a `bench:http` run of one route ends with its load,
 * so the start-up and the ledger's seeding are left out.
 */

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

const [file, topArgument, lastArgument] = process.argv.slice(2);
if (!file) throw new Error("usage: summarizeProfile.ts <file.cpuprofile> [top] [last-seconds]");
const top = Number(topArgument ?? 40);
const profile = JSON.parse(await readFile(file, "utf8")) as {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
};
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const selfMicros = new Map<number, number>();
const sampledAt: number[] = [];
for (const delta of profile.timeDeltas) sampledAt.push((sampledAt.at(-1) ?? 0) + delta);
const from = lastArgument ? (sampledAt.at(-1) ?? 0) - Number(lastArgument) * 1e6 : -Infinity;
profile.samples.forEach((id, index) => {
  if ((sampledAt[index] ?? 0) < from) return;
  selfMicros.set(id, (selfMicros.get(id) ?? 0) + (profile.timeDeltas[index] ?? 0));
});
// Shares are of busy time: idle (waiting for the network or the database) is left out.
const idleIds = new Set(
  profile.nodes.filter((node) => node.callFrame.functionName === "(idle)").map((node) => node.id),
);
for (const id of idleIds) selfMicros.delete(id);
const total = [...selfMicros.values()].reduce((sum, value) => sum + value, 0);

function where(url: string): string {
  const modules = url.lastIndexOf("node_modules/");
  if (modules >= 0) {
    const rest = url.slice(modules + "node_modules/".length).split("/");
    return rest[0]?.startsWith("@") ? `${rest[0]}/${rest[1]}` : (rest[0] ?? url);
  }
  return url.replace(/^file:\/\/.*?\/(api|scripts)\//, "$1/") || "(native)";
}

const byFunction = new Map<string, number>();
const byPlace = new Map<string, number>();
for (const [id, micros] of selfMicros) {
  const node = byId.get(id);
  if (!node) continue;
  const { functionName, url, lineNumber } = node.callFrame;
  const place = where(url);
  const name = `${functionName || "(anonymous)"} ${place}:${lineNumber + 1}`;
  byFunction.set(name, (byFunction.get(name) ?? 0) + micros);
  byPlace.set(place, (byPlace.get(place) ?? 0) + micros);
}
// Inclusive time (self + callees) per function, each function counted once per stack.
const inclusive = new Map<string, number>();
const parentOf = new Map<number, number>();
for (const node of profile.nodes)
  for (const child of node.children ?? []) parentOf.set(child, node.id);
for (const [id, micros] of selfMicros) {
  const seen = new Set<string>();
  for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
    const node = byId.get(at);
    if (!node) break;
    const { functionName, url, lineNumber } = node.callFrame;
    const name = `${functionName || "(anonymous)"} ${where(url)}:${lineNumber + 1}`;
    if (seen.has(name)) continue;
    seen.add(name);
    inclusive.set(name, (inclusive.get(name) ?? 0) + micros);
  }
}

// Self time charged to the innermost project function on the stack (api/, scripts/): what each
// middleware or route costs including the libraries it calls; "(outside)" is Node and libraries
// with no project frame above them (the HTTP parser, socket writes, GC, start-up).
const byProjectFrame = new Map<string, number>();
for (const [id, micros] of selfMicros) {
  let name = "(outside)";
  for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
    const node = byId.get(at);
    if (!node) break;
    const place = where(node.callFrame.url);
    if (place.startsWith("api/") || place.startsWith("scripts/")) {
      name = `${node.callFrame.functionName || "(anonymous)"} ${place}:${node.callFrame.lineNumber + 1}`;
      break;
    }
  }
  byProjectFrame.set(name, (byProjectFrame.get(name) ?? 0) + micros);
}

const print = (title: string, entries: Map<string, number>) => {
  console.log(`\n${title}`);
  for (const [name, micros] of [...entries].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`${((micros / total) * 100).toFixed(1).padStart(5)}%  ${name}`);
  }
};
console.log(`${(total / 1e6).toFixed(1)} s busy (idle left out)`);
print("Self time by function", byFunction);
print("Self time by file or package", byPlace);
print("Self time under the innermost project function", byProjectFrame);
print("Inclusive time by function", inclusive);
