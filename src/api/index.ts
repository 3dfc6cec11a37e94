import { Hono } from "hono";

// Ponder requires this file to export a Hono app. The service has its own HTTP server
// (api/); Ponder's built-in /health, /ready, /status and /metrics are all we use here.
export default new Hono();
