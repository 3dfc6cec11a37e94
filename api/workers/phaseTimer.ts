/**
 * Milliseconds per phase of one worker round, each from the end of the one before: logged
 * with the round, they say where a burst's time goes (the chain, the index, the database).
 */
export function phaseTimer() {
  let last = performance.now();
  const laps: Record<string, number> = {};
  return {
    laps,
    lap(phase: string): void {
      const now = performance.now();
      laps[phase] = Math.round(now - last);
      last = now;
    },
  };
}
