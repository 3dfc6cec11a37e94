import { Hono } from "hono";

// Why this file exists: Ponder's build refuses to start without it ("API endpoint file not
// found"; the path src/api/index.ts is fixed, and its default export must be a Hono app:
// https://ponder.sh/docs/api-reference/ponder/api-endpoints). The service serves its own HTTP
// (api/); of Ponder's server only the built-in /health, /ready, /status and /metrics are used.
export default new Hono();
