/** At most this many paths remembered; a full memory starts again empty. */
const MOST_PATHS = 1024;
/** Longer paths are worked out each time: a memory of long hostile paths would be a large one. */
const LONGEST_PATH = 256;

/**
 * `answer(path)` remembered per path, for what every request asks of its path and the answer
 * of which only the path decides (which surfaces serve it; whether it is public). Clients send
 * few distinct paths, and a client that sends a new one each time only empties the memory.
 */
export function memoByPath<Answer>(answer: (path: string) => Answer): (path: string) => Answer {
  const known = new Map<string, Answer>();
  return (path) => {
    if (path.length > LONGEST_PATH) return answer(path);
    if (known.has(path)) return known.get(path) as Answer;
    const found = answer(path);
    if (known.size >= MOST_PATHS) known.clear();
    known.set(path, found);
    return found;
  };
}
