/**
 * A read that runs one at a time: asked while it runs, it runs once more when it ends (however
 * many asked meanwhile), so a NOTIFY that arrives mid-read is never lost and a burst of them
 * costs two reads. A read may ask for itself again (it left rows behind). A failed read is
 * logged by `onError`, never thrown.
 */
export interface SingleFlightRead {
  ask(): void;
  /** Settles once the read under way, if any, has ended. */
  settled(): Promise<void>;
}

export function singleFlightRead(
  readOnce: (askAgain: () => void) => Promise<void>,
  onError: (error: unknown) => void,
): SingleFlightRead {
  let reading: Promise<void> | undefined;
  let again = false;
  const askAgain = () => {
    again = true;
  };
  function ask(): void {
    if (reading) {
      again = true;
      return;
    }
    reading = readOnce(askAgain)
      .catch(onError)
      .finally(() => {
        reading = undefined;
        if (again) {
          again = false;
          ask();
        }
      });
  }
  return { ask, settled: async () => reading };
}
