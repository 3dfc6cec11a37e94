import { readdirSync, readFileSync } from "node:fs";

/** Every process below `root`, by walking the parent links in /proc (Linux). */
export function descendantsOf(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const parent = statFields(Number(entry))?.[1];
    if (parent === undefined) continue;
    children.set(Number(parent), [...(children.get(Number(parent)) ?? []), Number(entry)]);
  }
  const found: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift() as number) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/**
 * When `pid` started, in clock ticks since boot (/proc/PID/stat, field 22); undefined once it
 * has ended. A pid and its start time name one process: the kernel reuses pids, not both.
 */
export function processStartTime(pid: number): string | undefined {
  const fields = statFields(pid);
  // Fields after the command, from field 3 (state): field 22 is index 19 here.
  return fields?.[19];
}

/** /proc/PID/stat after the command name (which may hold spaces): state, ppid, … */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // A zombie has ended; only its parent's wait is missing.
    return fields[0] === "Z" ? undefined : fields;
  } catch {
    return undefined;
  }
}

/** The command line of `pid`, arguments separated by spaces ("" once it has ended). */
export function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
  } catch {
    return "";
  }
}
