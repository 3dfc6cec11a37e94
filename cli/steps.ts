import type { Output } from "./output.ts";
import { terminalSafe } from "./terminalText.ts";

/** What a running step can say while it works ("1/2 confirmations"). */
export interface Progress {
  update(text: string): void;
}

/**
 * One step of a command that takes a while (earn, status --watch). `run` returns the line that
 * says what was done ("Claim clm_… created: pay 10.000123 USDC"), which replaces the title.
 */
export interface Step<Context> {
  title: string;
  /** Left out when false (the dry run stops before paying). */
  enabled?: (context: Context) => boolean;
  run(context: Context, progress: Progress): Promise<string | undefined>;
}

/**
 * Runs the steps in order: on a terminal with a live display (listr2: a spinner per step, the
 * current progress under it), piped as plain lines (each progress line once, then the step's
 * result), and silently with --json, whose one document comes at the end. The first failure
 * stops the run and is thrown as it was.
 */
export async function runSteps<Context>(
  steps: Step<Context>[],
  context: Context,
  output: Output,
): Promise<void> {
  if (output.terminal) {
    const { Listr } = await import("listr2");
    await new Listr<Context>(
      steps.map((step) => ({
        title: step.title,
        enabled: (ctx: Context) => step.enabled?.(ctx) ?? true,
        task: async (ctx, task) => {
          const done = await step.run(ctx, {
            update: (text) => {
              task.output = terminalSafe(text);
            },
          });
          if (done) task.title = terminalSafe(done);
        },
      })),
      {
        ctx: context,
        exitOnError: true,
        rendererOptions: { collapseErrors: false, showErrorMessage: false },
      },
    ).run();
    return;
  }
  for (const step of steps) {
    if (step.enabled && !step.enabled(context)) continue;
    let last = "";
    const done = await step.run(context, {
      update: (text) => {
        if (text !== last) output.line(`  ${text}`);
        last = text;
      },
    });
    output.line(done ?? step.title);
  }
}
