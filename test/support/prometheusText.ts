/**
 * A strict reader of the Prometheus text exposition format 0.0.4: it throws on any line a
 * Prometheus server would refuse, so a test that parses a scrape also validates it.
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  samples: Sample[];
  /** Metric family name → type, from the TYPE lines. */
  types: Map<string, string>;
}

const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const LABEL_NAME = "[a-zA-Z_][a-zA-Z0-9_]*";
const LABEL_VALUE = '"(?:[^"\\\\\\n]|\\\\[\\\\"n])*"';
// Prometheus reads values with Go's ParseFloat, which takes Inf and NaN in any case
// (prom-client writes "Nan").
const VALUE =
  "(?:[+-]?(?:\\d+\\.?\\d*(?:[eE][+-]?\\d+)?|\\.\\d+(?:[eE][+-]?\\d+)?)|[+-]?[iI][nN][fF]|[nN][aA][nN])";
const SAMPLE_LINE = new RegExp(
  `^(${NAME})(?:\\{((?:${LABEL_NAME}=${LABEL_VALUE})(?:,${LABEL_NAME}=${LABEL_VALUE})*,?)?\\})? (${VALUE})(?: -?\\d+)?$`,
);
const LABEL_PAIR = new RegExp(`(${LABEL_NAME})=(${LABEL_VALUE})`, "g");
const HELP_LINE = new RegExp(`^# HELP (${NAME})(?: .*)?$`);
const TYPE_LINE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`);

export function parsePrometheusText(text: string): Exposition {
  if (text.length > 0 && !text.endsWith("\n")) {
    // prom-client ends without a newline; Prometheus accepts both. Normalise.
    text += "\n";
  }
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  const seenSeries = new Set<string>();
  const lines = text.split("\n").slice(0, -1);
  lines.forEach((line, index) => {
    const where = `line ${index + 1}: ${JSON.stringify(line)}`;
    if (line === "") return;
    if (line.startsWith("#")) {
      const type = TYPE_LINE.exec(line);
      if (type?.[1] && type[2]) {
        if (types.has(type[1])) throw new Error(`second TYPE for ${type[1]} (${where})`);
        if (samples.some((sample) => familyOf(sample.name, types) === type[1])) {
          throw new Error(`TYPE after samples of ${type[1]} (${where})`);
        }
        types.set(type[1], type[2]);
        return;
      }
      if (line.startsWith("# HELP") && !HELP_LINE.test(line))
        throw new Error(`bad HELP (${where})`);
      if (line.startsWith("# TYPE")) throw new Error(`bad TYPE (${where})`);
      return;
    }
    const match = SAMPLE_LINE.exec(line);
    if (!match?.[1] || !match[3]) throw new Error(`not a sample line (${where})`);
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? "").matchAll(LABEL_PAIR)) {
      const [, labelName = "", quoted = '""'] = pair;
      if (labelName in labels) throw new Error(`label ${labelName} twice (${where})`);
      // The format escapes \\, \" and \n exactly as JSON does.
      labels[labelName] = JSON.parse(quoted);
    }
    const series = `${match[1]}${JSON.stringify(Object.entries(labels).sort())}`;
    if (seenSeries.has(series)) throw new Error(`series twice (${where})`);
    seenSeries.add(series);
    if (!familyOf(match[1], types)) throw new Error(`sample without a TYPE (${where})`);
    samples.push({ name: match[1], labels, value: parseValue(match[3]) });
  });
  checkHistograms(samples, types);
  return { samples, types };
}

/** The family a sample belongs to: its own name, or a histogram/summary's base name. */
function familyOf(name: string, types: Map<string, string>): string | undefined {
  if (types.has(name)) return name;
  const base = /^(.*)_(bucket|sum|count)$/.exec(name)?.[1];
  return base && ["histogram", "summary"].includes(types.get(base) ?? "") ? base : undefined;
}

function parseValue(text: string): number {
  if (/^\+?inf$/i.test(text)) return Number.POSITIVE_INFINITY;
  if (/^-inf$/i.test(text)) return Number.NEGATIVE_INFINITY;
  if (/^nan$/i.test(text)) return Number.NaN;
  return Number(text);
}

/** Buckets are cumulative and end in +Inf, which equals _count. */
function checkHistograms(samples: Sample[], types: Map<string, string>): void {
  for (const [family, type] of types) {
    if (type !== "histogram") continue;
    const byLabels = new Map<string, Sample[]>();
    for (const sample of samples.filter((s) => s.name === `${family}_bucket`)) {
      const { le, ...rest } = sample.labels;
      if (le === undefined) throw new Error(`${family}_bucket without le`);
      const key = JSON.stringify(Object.entries(rest).sort());
      byLabels.set(key, [...(byLabels.get(key) ?? []), sample]);
    }
    for (const [key, buckets] of byLabels) {
      const values = buckets.map((bucket) => bucket.value);
      if (values.some((value, index) => index > 0 && value < (values[index - 1] ?? 0))) {
        throw new Error(`${family} buckets not cumulative for ${key}`);
      }
      const last = buckets[buckets.length - 1];
      if (last?.labels.le !== "+Inf") throw new Error(`${family} has no +Inf bucket for ${key}`);
      const count = samples.find(
        (s) =>
          s.name === `${family}_count` && JSON.stringify(Object.entries(s.labels).sort()) === key,
      );
      if (count?.value !== last.value) throw new Error(`${family}_count ≠ +Inf bucket for ${key}`);
    }
  }
}

/** The value of the one sample named `name` whose labels include `labels`; undefined if none. */
export function sampleValue(
  exposition: Exposition,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const found = exposition.samples.filter(
    (sample) =>
      sample.name === name &&
      Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
  );
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match`);
  return found[0]?.value;
}
