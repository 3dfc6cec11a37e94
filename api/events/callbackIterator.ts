/**
 * An async iterator fed by callbacks (a stream's events), for GraphQL subscriptions: `push`
 * queues a value, the consumer's `return()` (the client went away) calls `onClose` once.
 */
export function callbackIterator<T>(onClose: () => void) {
  const queue: T[] = [];
  let waiting: ((result: IteratorResult<T>) => void) | undefined;
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    onClose();
    waiting?.({ value: undefined, done: true });
    waiting = undefined;
  };
  const iterator: AsyncIterableIterator<T> = {
    next() {
      const value = queue.shift();
      if (value !== undefined) return Promise.resolve({ value, done: false });
      if (closed) return Promise.resolve({ value: undefined, done: true });
      return new Promise((resolve) => {
        waiting = resolve;
      });
    },
    return() {
      close();
      return Promise.resolve({ value: undefined, done: true });
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return {
    iterator,
    push(value: T) {
      if (closed) return;
      if (waiting) {
        const resolve = waiting;
        waiting = undefined;
        resolve({ value, done: false });
      } else {
        queue.push(value);
      }
    },
    close,
  };
}
